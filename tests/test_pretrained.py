"""The ready-made models: packing a trained workdir, installing it, and the shipped ones in use."""
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_command, train_tiny_refinement
from tf_hat_ebm import pretrained
from tf_hat_ebm import trained_run

SOURCE = dict(command='python experiments/train.py (a test)', commit='0' * 40)


def network_values(run):
  return [v.numpy() for item in run.model.checkpoint_items().values() for v in item.variables]


@pytest.fixture(scope='module')
def models(trained_workdir, tmp_path_factory):
  """A models directory holding the tiny synthesis run packed as 'tiny_synth'."""
  models_dir = str(tmp_path_factory.mktemp('models'))
  pretrained.pack(trained_workdir, 'tiny_synth', 'a tiny synthesis run', SOURCE, models_dir)
  return models_dir


def test_a_packed_run_installs_as_a_workdir_with_the_trained_networks(
    models, trained_workdir, tmp_path):
  entry = pretrained.entry('tiny_synth', models)
  assert entry['kind'] == 'synthesis' and entry['step'] == 2 and entry['source'] == SOURCE
  assert set(entry['files']) == {'config.json', 'checkpoints/ckpt-2.index',
                                 'checkpoints/ckpt-2.data-00000-of-00001'}
  # Networks only: a fraction of the training checkpoint, which holds optimizer slots and the bank.
  packed = entry['files']['checkpoints/ckpt-2.data-00000-of-00001']['bytes']
  trained = os.path.getsize(os.path.join(trained_workdir, 'checkpoints',
                                         'ckpt-2.data-00000-of-00001'))
  assert packed < trained / 2
  workdir = str(tmp_path / 'w')
  written = pretrained.install('tiny_synth', workdir, models_dir=models)
  assert sorted(os.path.relpath(p, workdir) for p in written) == [
      'checkpoints/checkpoint', 'checkpoints/ckpt-2.data-00000-of-00001',
      'checkpoints/ckpt-2.index', 'config.json', 'pretrained.json']
  with open(os.path.join(workdir, 'pretrained.json')) as f:
    assert json.load(f)['source'] == SOURCE
  run, source = trained_run.load_run(workdir), trained_run.load_run(trained_workdir)
  assert run.step == 2
  for mine, theirs in zip(network_values(run), network_values(source), strict=True):
    np.testing.assert_array_equal(mine, theirs)


def test_install_checks_every_file_and_refuses_to_replace_anything_unasked(models, tmp_path):
  with pytest.raises(ValueError, match=r'^--model=nope: no such shipped model; shipped: '
                     r'tiny_synth$'):
    pretrained.install('nope', str(tmp_path / 'a'), models_dir=models)
  workdir = tmp_path / 'w'
  workdir.mkdir()
  (workdir / 'notes.txt').write_text('mine')
  with pytest.raises(FileExistsError, match='is not empty: install into a new directory, or '
                     'pass --overwrite'):
    pretrained.install('tiny_synth', str(workdir), models_dir=models)
  assert os.listdir(workdir) == ['notes.txt']
  pretrained.install('tiny_synth', str(workdir), overwrite=True, models_dir=models)
  assert (workdir / 'notes.txt').read_text() == 'mine'  # kept
  assert (workdir / 'config.json').exists()
  broken = str(tmp_path / 'broken')
  shutil.copytree(models, broken)
  data = os.path.join(broken, 'tiny_synth', 'checkpoints', 'ckpt-2.data-00000-of-00001')
  with open(data, 'r+b') as f:
    f.seek(100)
    byte = f.read(1)
    f.seek(100)
    f.write(bytes([byte[0] ^ 1]))
  with pytest.raises(ValueError, match=r'^shipped model tiny_synth: .*ckpt-2\.data-00000-of-00001 '
                     r'has sha256 [0-9a-f]{16}, its manifest says [0-9a-f]{16} \(corrupted\): '
                     r'reinstall tf_hat_ebm$'):
    pretrained.install('tiny_synth', str(tmp_path / 'fresh'), models_dir=broken)
  assert not (tmp_path / 'fresh').exists()  # nothing written


def test_the_command_is_one_line_on_a_bad_model_name_or_a_used_workdir(tmp_path):
  result = run_command('pretrained.py', '--model=nope', f'--workdir={tmp_path}')
  assert result.returncode == 1
  names = ', '.join(pretrained.names()) or 'none'
  assert result.stderr == f'error: --model=nope: no such shipped model; shipped: {names}\n'
  if pretrained.names():
    (tmp_path / 'x').write_text('')
    result = run_command('pretrained.py', f'--model={pretrained.names()[0]}',
                         f'--workdir={tmp_path}')
    assert result.returncode == 1 and result.stderr.count('\n') == 1
    assert 'is not empty' in result.stderr and os.listdir(tmp_path) == ['x']


@pytest.mark.slow
def test_a_refinement_ships_with_its_sngan_and_loads_from_anywhere(tmp_path):
  gan_dir, run_dir, models = (str(tmp_path / d) for d in ('sngan', 'refine', 'models'))
  train_tiny_refinement(gan_dir, run_dir)
  os.makedirs(models)
  with pytest.raises(ValueError, match='is a joint run: name its generator'):
    pretrained.pack(run_dir, 'refine', 'a refinement', SOURCE, models)
  gan = pretrained.pack(gan_dir, 'gan', 'an SN-GAN', SOURCE, models)
  assert {k.split('/')[0] for k in tf.train.load_checkpoint(os.path.join(
      models, 'gan', 'checkpoints', 'ckpt-2')).get_variable_to_shape_map()} == {
          'generator', 'discriminator', 'step', 'save_counter', '_CHECKPOINTABLE_OBJECT_GRAPH'}
  assert gan['kind'] == 'sngan'
  pretrained.pack(run_dir, 'refine', 'a refinement', SOURCE, models, generator='gan')
  shutil.rmtree(gan_dir)  # the install needs nothing of the training's directories
  workdir = str(tmp_path / 'installed')
  pretrained.install('refine', workdir, models_dir=models)
  run = trained_run.load_run(workdir)
  assert run.config.generator.path == os.path.join(os.path.abspath(workdir), 'generator')
  assert run.model.discriminator is not None  # DDLS's D came along
  images = run.model.generator(tf.zeros([2, 4]))
  assert images.shape == (2, 16, 16, 1)
  result = run_command('sample.py', f'--workdir={workdir}', '--num_samples=4')
  assert result.returncode == 0, result.stderr


# ---- what is shipped: a fresh install's view, no training -----------------------------------
SHIPPED = pretrained.names()
MAX_SHIPPED_BYTES = 8 << 20  # a few MB in all: networks only


def test_every_shipped_model_is_verified_small_and_says_where_it_came_from():
  total = 0
  for name in SHIPPED:
    entry = pretrained.entry(name)
    assert len(pretrained.verified_files(name)) == len(entry['files'])
    assert entry['source']['command'] and len(entry['source']['commit']) == 40
    assert entry['generator'] in (None, *SHIPPED)
    total += sum(f['bytes'] for f in entry['files'].values())
  assert total < MAX_SHIPPED_BYTES


@pytest.mark.parametrize('name', SHIPPED)
def test_a_shipped_model_installs_and_loads_at_its_step(name, tmp_path):
  from tf_hat_ebm import generators  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import samplers  # pylint: disable=g-import-not-at-top
  workdir = str(tmp_path / name)
  result = run_command('pretrained.py', f'--model={name}', f'--workdir={workdir}')
  assert result.returncode == 0, result.stderr
  assert f'Installed {name} (' in result.stdout
  entry = pretrained.entry(name)
  if entry['kind'] in ('synthesis', 'joint'):
    assert trained_run.load_run(workdir).step == entry['step']
  elif entry['kind'] == 'sngan':
    assert samplers.load_sngan_run(workdir).step == entry['step']
  else:
    config = trained_run.load_config(workdir)
    decoder = generators.load_decoder(workdir, config)
    assert decoder(tf.zeros([1, *decoder.latent_shape])).shape[1:] == (16, 16, 1)


@pytest.mark.skipif('digits_synth' not in SHIPPED, reason='digits_synth is not shipped')
# The export's save traces every signature (seconds of CPU): a slow twin, as test_one_chain's.
@pytest.mark.parametrize('exports', [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_shipped_synthesis_model_samples_scores_and_exports(tmp_path, exports):
  workdir = str(tmp_path / 'digits_synth')
  assert run_command('pretrained.py', '--model=digits_synth',
                     f'--workdir={workdir}').returncode == 0
  result = run_command('sample.py', f'--workdir={workdir}', '--num_samples=8', '--batch_size=8')
  assert result.returncode == 0, result.stderr
  images = np.load(os.path.join(workdir, 'generated', 'samples.npz'))['images']
  assert images.shape == (8, 16, 16, 1) and np.abs(images).max() <= 1.0
  assert os.path.exists(os.path.join(workdir, 'generated', 'langevin_path.png'))
  result = run_command('evaluate_fid.py', f'--workdir={workdir}', '--num_samples=20', '--runs=2',
                       '--batch_size=20')
  assert result.returncode == 0, result.stderr
  from tf_hat_ebm import results as result_lib  # pylint: disable=g-import-not-at-top
  scores = result_lib.read(os.path.join(workdir, 'fid.json')).values
  assert len(scores['fid']['hat_ebm']) == 2
  assert all(np.isfinite(v) and v > 0 for v in scores['fid']['hat_ebm'])
  if not exports:
    return
  result = run_command('export.py', f'--workdir={workdir}', f'--output={tmp_path / "exported"}')
  assert result.returncode == 0, result.stderr
  loaded = tf.saved_model.load(str(tmp_path / 'exported'))
  assert loaded.sample(num_samples=2, seed=1)['images'].shape == (2, 16, 16, 1)
  energy = loaded.energy(tf.constant(images[:2]))['energy']
  assert energy.shape == (2,) and np.all(np.isfinite(energy))


@pytest.mark.slow
@pytest.mark.parametrize('name', [n for n in SHIPPED if pretrained.entry(n)['kind'] == 'joint'])
def test_a_shipped_joint_model_samples_over_its_installed_generator(name, tmp_path):
  workdir = str(tmp_path / name)
  assert run_command('pretrained.py', f'--model={name}', f'--workdir={workdir}').returncode == 0
  result = run_command('sample.py', f'--workdir={workdir}', '--num_samples=4')
  assert result.returncode == 0, result.stderr
  images = np.load(os.path.join(workdir, 'generated', 'samples.npz'))['images']
  assert images.shape == (4, 16, 16, 1)


@pytest.mark.slow
@pytest.mark.parametrize('generator, script, config', [
    ('digits_sngan', 'train_refinement.py', 'digits_refine'),
    ('digits_autoencoder', 'train_retrofit.py', 'digits_retrofit')])
def test_a_joint_run_trains_over_a_shipped_generator(generator, script, config, tmp_path):
  if generator not in SHIPPED:
    pytest.skip(f'{generator} is not shipped')
  installed = str(tmp_path / generator)
  assert run_command('pretrained.py', f'--model={generator}',
                     f'--workdir={installed}').returncode == 0
  result = run_command(script, f'--config={config}:tiny', f'--config.generator.path={installed}',
                       f'--workdir={tmp_path / "joint"}')
  assert result.returncode == 0, result.stderr
  run = trained_run.load_run(str(tmp_path / 'joint'))
  assert run.step == 2
  assert run.config.generator.checkpoint == pretrained.entry(generator)['step']
