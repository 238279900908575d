"""Figures and TensorBoard for people: every PNG titled and labelled, Y on its own unclipped
scale, grouped and described scalars, histograms, config text, hparams, evaluation results."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import copy_of, run_command
from tf_hat_ebm import figures
from tf_hat_ebm import summaries


@pytest.fixture(name='run')
def run_fixture(trained_run):
  """conftest's tiny synthesis run of 2 steps (grids at its last step) and its trainer."""
  return trained_run


def read_png(path):
  return tf.io.decode_png(tf.io.read_file(path)).numpy()


def events(workdir):
  """[(step, tag, plugin, description, value)] of every summary in the workdir's TensorBoard."""
  out = []
  for path in sorted(glob.glob(os.path.join(workdir, 'tensorboard', 'events.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for v in event.summary.value:
        out.append((event.step, v.tag, v.metadata.plugin_data.plugin_name,
                    v.metadata.summary_description, v))
  return out


def test_every_png_of_a_run_is_titled_labelled_and_large_enough(run):
  workdir, trainer = run
  pngs = sorted(glob.glob(os.path.join(workdir, '**', '*.png'), recursive=True))
  names = [os.path.relpath(p, workdir) for p in pngs]
  assert names == ['samples/data.png', 'samples/generator_0000002.png',
                   'samples/residual_0000002.png', 'samples/samples_0000002.png',
                   'training_curves.png']
  written = trainer.report.written
  assert sorted(written) == pngs
  for path in pngs:
    meta = written[path]
    assert read_png(path).shape[1::-1] == meta['size']
    assert 'digits_synth' in meta['title']
    # real images have no step: a step on their grid would read as a sample of that step
    assert ('step 2' in meta['title']) != path.endswith('data.png'), meta['title']
    assert meta['labels']
  for name, label in (('samples', 'X = G(Z) + Y'), ('generator', 'G(Z)'), ('residual', 'Y')):
    meta = written[os.path.join(workdir, 'samples', f'{name}_0000002.png')]
    assert meta['labels'][0].startswith(label) and meta['tile_px'] >= 48
    assert meta['size'][0] >= 2 * 48 and meta['size'][1] >= 2 * 48  # 4 samples: 2 x 2 tiles
  residual = written[os.path.join(workdir, 'samples', 'residual_0000002.png')]
  assert residual['y_scale'] > 0 and residual['clipped'] == 0.0
  assert f'\u00b1{residual["y_scale"]:.3g}' in residual['labels'][0]
  curves = written[os.path.join(workdir, 'training_curves.png')]
  assert curves['panels'][:2] == ['energy difference mean H(X+) - mean H(X-) (= EBM loss x T)',
                                  'energies']
  assert {'gradient norms', 'learning rates', 'divergence guard'} <= set(curves['panels'])


def test_y_is_shown_on_a_symmetric_scale_chosen_per_figure_and_never_clipped():
  rng = np.random.default_rng(0)
  for size in (4e-4, 0.8):  # a refinement's tiny residual and a synthesis run's large one
    y = size * rng.uniform(-1, 1, [9, 16, 16, 1])
    meta = figures.grid_figure([('Y', y, 'residual')], 'Y', None)
    assert meta['y_scale'] == pytest.approx(np.abs(y).max())
    assert meta['clipped'] == 0.0
    shown = figures._to_display(y, 'residual', meta['y_scale'])  # pylint: disable=protected-access
    # The scale is reached (black or white) by the extreme pixel only.
    assert shown.min() >= 0 and shown.max() <= 1
    assert min(1 - shown.max(), shown.min()) < 1e-6
    assert np.mean((shown == 0) | (shown == 1)) <= 1 / y.size


def test_a_long_title_is_shortened_to_fit_the_figure(tmp_path):
  rng = np.random.default_rng(0)
  long = 'Langevin chains: step 300 of /work/some/deep/reproduction/of/the/paper/digits/refine_s0'
  path = dict(images=rng.uniform(-1, 1, [2, 2, 8, 8, 1]), residuals=0.01 * rng.normal(
      size=[2, 2, 8, 8, 1]), generator_images=rng.uniform(-1, 1, [2, 8, 8, 1]),
              steps=np.array([0, 5]))
  for name, draw in (
      ('grid', lambda out: figures.grid_figure([('X', path['images'][0], 'image')], long, out)),
      ('path', lambda out: figures.path_figure(path, long, out))):
    out = str(tmp_path / f'{name}.png')
    meta = draw(out)
    assert meta['title'] == 'Langevin chains: step 300 of \u2026/refine_s0', name
    # The title's band, and the path figure's subtitle (what Y is shown on) below it.
    band = read_png(out)[figures.MARGIN_PX:figures.MARGIN_PX + figures.TITLE_PX
                         + (figures.LABEL_PX if name == 'path' else 0)]
    # Nothing drawn in the side margins of the title band: the title is not cut by the edges.
    margin = figures.MARGIN_PX // 2
    assert band[:, :margin].min() == 255 and band[:, -margin:].min() == 255, name
  short = figures.grid_figure([('X', path['images'][0], 'image')], 'step 3 of a/b', None)
  assert short['title'] == 'step 3 of a/b'  # a title that fits is left as it is
  elided = figures.grid_figure([('X', path['images'][0], 'image')], 'x' * 300, None)
  assert '\u2026' in elided['title'] and len(elided['title']) < 300


def test_path_figure_shows_g_z_per_step_when_the_chain_moves_z():
  rng = np.random.default_rng(0)
  path = dict(images=rng.uniform(-1, 1, [3, 2, 8, 8, 3]), residuals=0.01 * rng.normal(
      size=[3, 2, 8, 8, 3]), generator_images=rng.uniform(-1, 1, [3, 2, 8, 8, 3]),
              steps=np.array([0, 5, 10]))
  meta = figures.path_figure(path, 'joint chain', None, energies=rng.normal(size=[3, 2]))
  assert meta['rows'] == ['G(Z) #1', 'X #1', 'Y #1', 'G(Z) #2', 'X #2', 'Y #2']
  assert meta['labels'][:3] == ['step 0', 'step 5', 'step 10'] and meta['tile_px'] >= 48
  assert meta['y_scale'] == pytest.approx(np.abs(path['residuals']).max())


def test_event_files_hold_grouped_described_scalars_histograms_config_and_hparams(run):
  workdir, _ = run
  found = events(workdir)
  scalars = {tag: description for _, tag, plugin, description, _ in found if plugin == 'scalars'}
  assert {'energy/energy_diff', 'train/ebm_loss', 'train/gen_loss', 'train/hat_grad_norm',
          'langevin/residual_abs', 'langevin/residual_grad_norm', 'lr/hat_lr', 'lr/gen_lr',
          'energy/guard_count'} <= set(scalars)
  assert all(tag.split('/')[0] in ('energy', 'train', 'langevin', 'lr', 'eval')
             for tag in scalars)
  assert all(len(d) > 20 for d in scalars.values()), scalars
  assert 'T = 1e-08' in scalars['train/ebm_loss']  # the loss's 1/T scaling is stated
  histograms = {tag for _, tag, plugin, _, _ in found if plugin == 'histograms'}
  assert histograms == {'energy/histogram_data', 'energy/histogram_samples'}
  images = {tag: d for _, tag, plugin, d, _ in found if plugin == 'images'}
  assert set(images) == {'samples/data', 'samples/samples', 'samples/generator', 'samples/residual',
                         'energy/histograms'}
  assert '+-' not in images['samples/residual'].replace('+-max', '')  # no one grid's scale
  text = [v for _, tag, plugin, _, v in found if plugin == 'text' and tag == 'config']
  assert b'"hat_width": 8' in tf.make_ndarray(text[0].tensor).item()
  hparams = {tag for _, tag, plugin, _, _ in found if plugin == 'hparams'}
  # No experiment record: TensorBoard takes the columns from the sessions (test_tensorboard.py).
  assert hparams == {'_hparams_/session_start_info'}


def test_evaluate_ood_writes_a_histogram_png_and_logs_to_tensorboard(trained_workdir, tmp_path):
  workdir = str(copy_of(trained_workdir, tmp_path))  # it writes to the run
  result = run_command('evaluate_ood.py', f'--workdir={workdir}', '--num=40', '--batch_size=20',
                       '--sets=uniform_noise')
  assert result.returncode == 0, result.stderr[-2000:]
  assert read_png(os.path.join(workdir, 'ood_energies.png')).shape[1] >= 700
  found = [(step, tag, plugin) for step, tag, plugin, _, _ in events(workdir)
           if tag.startswith('eval/')]
  assert (2, 'eval/ood_auroc_uniform_noise', 'scalars') in found
  assert (2, 'eval/ood_energies', 'images') in found
  assert {tag for _, tag, plugin in found if plugin == 'histograms'} == {
      'eval/energy_uniform_noise', 'eval/energy_digits_test'}
  scalars = summaries.read_scalars(os.path.join(workdir, 'tensorboard'))
  assert 0 <= scalars['eval/ood_auroc_uniform_noise'][0][1] <= 1


def test_montage_puts_drawn_figures_side_by_side_labelled(tmp_path):
  rng = np.random.RandomState(0)
  paths = []
  for name in ('coop', 'current', 'historical'):
    paths.append(str(tmp_path / f'{name}.png'))
    figures.grid_figure([(name, rng.uniform(-1, 1, [4, 16, 16, 1]), 'image')], name, paths[-1])
  sizes = [figures.decode({'png': open(p, 'rb').read()}).shape for p in paths]
  meta = figures.montage([('cooperative learning', paths[0]), ('current samples', paths[1]),
                          ('historical bank', paths[2])], 'after 500 updates',
                         str(tmp_path / 'historical.png'))
  assert meta['panels'] == ['cooperative learning', 'current samples', 'historical bank']
  assert meta['title'] == 'after 500 updates'
  assert meta['size'][0] >= sum(s[1] for s in sizes) and meta['size'][1] > sizes[0][0]
  assert os.path.exists(tmp_path / 'historical.png')
  with pytest.raises(FileNotFoundError, match="montage panel 'x': no figure at"):
    figures.montage([('x', str(tmp_path / 'missing.png'))], 't')


def test_training_curves_keep_legends_off_the_data_and_coinciding_lines_apart(tmp_path):
  steps = list(range(0, 1000, 10))
  rising = [(s, 0.001 * s) for s in steps]  # the newest points top right, where legends sat
  series = {'energy_diff': rising, 'energy_pos': rising, 'energy_neg': rising,
            'guard_count': [(s, 0.0) for s in steps], 'rollbacks': [(s, 0.0) for s in steps],
            'hat_grad_norm': rising[1:], 'gen_grad_norm': rising[1:]}
  path = str(tmp_path / 'curves.png')
  meta = figures.training_curves(series, 'curves', path)
  assert meta['legends_over_data'] == 0
  assert read_png(path).shape[:2] == meta['size'][::-1]
  fig_lines = figures.LINE_STYLES
  assert len({style for style, _ in fig_lines[:2]}) == 2  # two coinciding curves: two styles


def test_generator_panels_say_when_values_outside_the_image_range_are_clipped():
  g_z = np.full([4, 8, 8, 1], 0.5, np.float32)
  g_z[0, 0, 0, 0] = 1.7  # a 2 tanh generator reaches +-2
  meta = figures.grid_figure([('G(Z)', g_z, 'image')], 'G', None)
  assert meta['outside'] == {'G(Z)': pytest.approx(1 / g_z.size)}
  assert 'outside [-1, 1], shown clipped' in meta['labels'][0]
  inside = figures.grid_figure([('G(Z)', np.clip(g_z, -1, 1), 'image')], 'G', None)
  assert 'clipped' not in inside['labels'][0]


def test_historical_figure_shows_the_four_arms_in_the_papers_order(tmp_path):
  rng = np.random.default_rng(0)
  samples = {arm: rng.uniform(-1, 1, [4, 8, 8, 1]) for arm in
             ('bank', 'current', 'cooperative_bn', 'cooperative')}
  out = str(tmp_path / 'historical.png')
  meta = figures.historical_figure(samples, out)
  assert meta['labels'] == ['Coop. (no batch norm)', 'Coop. (batch norm)', 'Hat EBM (current)',
                            'Hat EBM (historical)']
  assert meta['title'] == 'Samples after 500 weight updates' and os.path.getsize(out) > 0
  del samples['cooperative']
  meta = figures.historical_figure(samples, None, updates=300)
  # (the title is cut in the middle to fit three small panels)
  assert meta['title'].startswith('Samples after 300 ') and meta['title'].endswith('batch norm))')
  assert len(meta['labels']) == 3
  with pytest.raises(ValueError, match='not \\[.hybrid.\\]'):
    figures.historical_figure({'hybrid': samples['bank']})


def test_a_run_with_figures_off_writes_no_png_and_keeps_its_numbers(four_steps):
  # conftest's tiny() sets training.figures False: no grid sampled at step 4, nothing drawn.
  assert not (four_steps / 'samples').exists()
  assert not (four_steps / 'training_curves.png').exists()
  assert (four_steps / 'checkpoints' / 'ckpt-4.index').exists()
  assert summaries.read_scalars(str(four_steps / 'tensorboard'))
