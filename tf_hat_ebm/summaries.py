"""What a run writes for people: TensorBoard that explains itself, and the figures beside it.

Scalars are grouped (energy/, eval/, langevin/, lr/, train/) and each carries a description: what
it is, its sign, its healthy range. energy/ sorts first and holds the health of a run: the energy
difference, the energies of data and samples and the runaway guard; a custom-scalars layout shows
the same first, the two energies on one chart. The config is a text summary and every config field
an hparam of a session named by the workdir, so runs (seeds, overrides of one config) compare row
by row in TensorBoard's HPARAMS tab. `RunReport` is what the trainer calls: at the
start, at log steps, at grid steps (labelled PNG figures, the same images in TensorBoard, energy
histograms of data and samples) and at the end (a PNG of the training curves).
"""
import json
import os
from typing import Mapping

import numpy as np
import tensorflow as tf

from tf_hat_ebm import figures
from tf_hat_ebm import registry

# metric -> (group, description). {T} is replaced by the training chain's temperature.
# A kind's `grid_labels` hook (registry.Kind.hooks): the training grids' panel labels ('x',
# 'g_z') where they are not X = G(Z) + Y and G(Z).
GridLabels = Mapping[str, str]

SCALARS = {
    'energy_diff': ('energy', 'mean H(X+) - mean H(X-): data energy minus sample energy, the '
                    'maximum-likelihood loss times T. The EBM update pushes it below 0, the '
                    'chain pushes it back; healthy: small, oscillating around 0 (|.| below ~1 '
                    'for the digits). A steady drift to large |.| is a runaway (the guard '
                    'watches it).'),
    'energy_pos': ('energy', 'mean H(X+) of the noised data batch. Any sign; only differences '
                   'matter, it should not run away.'),
    'energy_neg': ('energy', 'mean H(X-) of the training chain\'s samples G(Z) + Y. Any sign; '
                   'tracks energy_pos.'),
    'ebm_loss': ('train', 'maximum-likelihood loss of the hat network, (mean H(X+) - mean H(X-)) '
                 '/ T with T = {T}: energy_diff scaled by 1/T, hence its size; judge energy_diff.'),
    'gen_loss': ('train', 'generator loss gen_loss_factor * mean (G(Z) - X)^2 against the bank\'s '
                 'samples: >= 0, falling as G learns to produce the EBM\'s samples.'),
    'hat_grad_norm': ('train', 'global norm of the hat network\'s gradient before clipping; the '
                      'loss is divided by T = {T}, so this is 1/T times the energy gradient. '
                      '>= 0; spikes of 10x the trend precede divergence.'),
    'gen_grad_norm': ('train', 'global norm of the generator\'s gradient before clipping, >= 0.'),
    'residual_grad_norm': ('langevin', 'mean norm of dH/dY per image along the training chain '
                           '(untempered), >= 0; a steady rise means the chain is pushed hard.'),
    'residual_abs': ('langevin', 'mean |Y| of the training chain\'s last step: how far the samples '
                     'are from G(Z), in [-1, 1] pixel units; >= 0, small (below ~0.3).'),
    'latent_grad_norm': ('langevin', 'mean norm of dH/dZ per sample along the joint chain, >= 0.'),
    'latent_abs': ('langevin', 'mean |Z| after the joint chain; about 0.8 for N(0, I) latents.'),
    'disc_loss': ('train', 'SN-GAN discriminator hinge loss, >= 0; about 1-2 while balanced.'),
    'disc_real': ('train', 'mean D(x) on data; above disc_fake while D wins.'),
    'disc_fake': ('train', 'mean D(G(z)) on generated images.'),
    'disc_grad_norm': ('train', 'global norm of the discriminator\'s gradient, >= 0.'),
    'loss': ('train', 'autoencoder loss (reconstruction MSE plus any regulariser), >= 0, falling.'),
    'mse': ('train', 'reconstruction mean squared error in [-1, 1] pixel units, >= 0, falling.'),
    'grad_norm': ('train', 'global norm of the autoencoder\'s gradient, >= 0.'),
    'steps_per_sec': ('train', 'training steps per second of the last chunk (host time).'),
    'guard_count': ('energy', 'checks in a row the runaway guard found suspicious; 0 is healthy, '
                    'training.guard.patience of them stop or roll back the run.'),
    'rollbacks': ('energy', 'divergence rollbacks so far (each lowers the learning rates); 0 is '
                  'healthy.'),
    'train_mse': ('eval', 'reconstruction MSE on the train split, >= 0.'),
    'test_mse': ('eval', 'reconstruction MSE on the test split, >= 0; near train_mse unless '
                 'the autoencoder overfits.'),
}


def eval_scalars(result):
  """What tf-hat-ebm-evaluate-fid logs under eval/ of a results.EvalResult:
  <metric>_<method> (the mean over its sample sets) and <metric>_data_test_vs_train."""
  values = {f'{metric}_{method}': result.mean(metric, method)
            for metric in result.metrics for method in result.methods
            if result.sets(metric, method)}
  return {**values, **{f'{metric}_data_test_vs_train': v for metric, v in result.data.items()}}


def eval_descriptions(result):
  """The description of each of eval_scalars(result), from the result's labels."""
  out = {}
  for metric, shown in result.metrics.items():
    against = f'against {result.reference}'
    how = (f'(evaluate_fid.py, mean over {result.runs} sample sets of {result.num_samples}), '
           f'{shown.better} is better: {shown.description}')
    out.update({f'{metric}_{method}': f'{shown.label} of {label} {against} {how}'
                for method, label in result.methods.items()})
    out[f'{metric}_data_test_vs_train'] = (f'{shown.label} of the {result.data_split} split '
                                           f'{against}: what real data scores')
  return out


LR_DESCRIPTION = ('learning rate of the {net} optimizer now (schedule times the rollback factor), '
                  '> 0.')


def tag(name):
  """The grouped TensorBoard tag of a metric name (learning rates under lr/)."""
  if name.endswith('_lr'):
    return f'lr/{name}'
  group = SCALARS.get(name, ('train',))[0]
  return f'{group}/{name}'


def description(name, temperature=None):
  if name.endswith('_lr'):
    return LR_DESCRIPTION.format(net=name[:-3])
  text = SCALARS.get(name, ('train', name.replace('_', ' ')))[1]
  return text.replace('{T}', f'{temperature:g}' if temperature is not None else 'the temperature')


def write_scalars(values, step, temperature=None):
  """Grouped, described scalars to the default writer at `step`."""
  for name, value in values.items():
    tf.summary.scalar(tag(name), value, step=step,
                      description=description(name, temperature))


def flat_config(config, prefix=''):
  """{dotted path: bool/int/float/str} of a config's leaves (lists and None as strings)."""
  out = {}
  for key, value in config.items():
    path = f'{prefix}{key}'
    if hasattr(value, 'items'):
      out.update(flat_config(value, path + '.'))
    elif isinstance(value, (bool, int, float, str)):
      out[path] = value
    else:
      out[path] = str(value)
  return out


def write_config(config, step, trial_id):
  """The config as a text summary (JSON), and its leaves as the hparams of one session named
  `trial_id` (the workdir: each run its own row), to the default writer.

  No hparams_config (experiment) record is written: TensorBoard then takes the columns from the
  sessions' hparams and the metrics from their scalars, across runs of different configs alike;
  an experiment record would win over them, and the first one found would name the columns."""
  # pylint: disable=g-import-not-at-top
  from tensorboard.plugins.hparams import api as hp
  text = json.dumps(json.loads(config.to_json_best_effort()), indent=2, sort_keys=True)
  tf.summary.text('config', '```\n' + text + '\n```', step=step,
                  description='the run\'s full config (config.json in the workdir)')
  hp.hparams(flat_config(config), trial_id=str(trial_id))


# The custom-scalars layout: (category, [(chart title, tag regexes)]); the health first.
LAYOUT = (
    ('health of the run', [
        ('energy difference mean H(X+) - mean H(X-): small, around 0', [r'^energy/energy_diff$']),
        ('energies: data H(X+) and samples H(X-), tracking each other',
         [r'^energy/energy_pos$', r'^energy/energy_neg$']),
        ('runaway guard: suspicious checks in a row, rollbacks',
         [r'^energy/guard_count$', r'^energy/rollbacks$'])]),
    # ebm_loss and hat_grad_norm carry the factor 1/T (1e8 in the default): charts of their own.
    ('losses and gradients', [
        ('losses (generator, discriminator, autoencoder)',
         [r'^train/(gen|disc)_loss$', r'^train/(loss|mse)$']),
        ('EBM loss and hat gradient norm, both scaled by 1/T',
         [r'^train/ebm_loss$', r'^train/hat_grad_norm$']),
        ('other gradient norms', [r'^train/(gen|disc)_grad_norm$', r'^train/grad_norm$',
                                  r'^langevin/\w*grad_norm$']),
        ('learning rates', [r'^lr/'])]),
    ('Langevin chain', [('mean |Y| and |Z| after the chain', [r'^langevin/\w*_abs$'])]),
    # Every metric of evaluation/metrics.py (tests/test_tensorboard.py checks none is left out).
    ('evaluation', [('FID', [r'^eval/fid_']), ('KID', [r'^eval/kid_']),
                    ('precision and recall', [r'^eval/precision_', r'^eval/recall_']),
                    ('OOD AUROC', [r'^eval/ood_auroc_'])]),
)


def layout_summary():
  """The serialized custom_scalars layout summary (LAYOUT) for tf.summary.experimental.
  write_raw_pb."""
  # pylint: disable=g-import-not-at-top
  from tensorboard.plugins.custom_scalar import layout_pb2
  from tensorboard.plugins.custom_scalar import summary as custom_scalar
  layout = layout_pb2.Layout(category=[
      layout_pb2.Category(title=title, chart=[
          layout_pb2.Chart(title=chart, multiline=layout_pb2.MultilineChartContent(tag=tags))
          for chart, tags in charts]) for title, charts in LAYOUT])
  return custom_scalar.pb(layout).SerializeToString()


def read_scalars(tensorboard_dir):
  """{tag: [(step, value)]} of every scalar in a TensorBoard directory (last value per step)."""
  series = {}
  for path in sorted(tf.io.gfile.glob(os.path.join(tensorboard_dir, 'events.*'))):
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
      event = tf.compat.v1.Event.FromString(record)
      for value in event.summary.value:
        if value.metadata.plugin_data.plugin_name == 'scalars' or value.HasField('simple_value'):
          number = (value.simple_value if value.HasField('simple_value')
                    else float(tf.make_ndarray(value.tensor)))
          series.setdefault(value.tag, {})[event.step] = number
  return {k: sorted(v.items()) for k, v in series.items()}


class RunReport:
  """The trainer's TensorBoard and figure writing for one run (chief only; a no-op writer else)."""

  def __init__(self, task, config, workdir, writer, is_chief=True):
    self.task, self.config, self.workdir, self.writer = task, config, workdir, writer
    self.is_chief = is_chief
    self.name = config.get('name', 'run')
    langevin = config.get('langevin', None)
    self.temperature = langevin.temperature if langevin is not None else None
    self.sample_dir = os.path.join(workdir, 'samples')
    self._data = None
    self.written = {}  # path -> metadata of every figure this run wrote
    # training.figures: the trainer samples grids and this draws curves only with it (a workdir's
    # config.json from before the field draws them).
    self.figures = config.get('training', {}).get('figures', True)

  def start(self, step):
    if not self.is_chief:
      return
    with self.writer.as_default(step=step):
      tf.summary.experimental.write_raw_pb(layout_summary(), step=step)
      write_config(self.config, step, self.workdir)

  def scalars(self, step, metrics, extra):
    with self.writer.as_default(step=step):
      write_scalars({**metrics, **extra}, step, self.temperature)

  def grids(self, step, grids):
    """Labelled figures of the grid samples ({'x'[, 'g_z', 'y']}) as PNG and in TensorBoard, and
    the energy histograms of data and samples. Returns the figures' metadata by file name."""
    if not self.is_chief:
      return {}
    written = {}
    what = f'{self.name}, step {step}'
    labels: GridLabels = registry.for_config(self.config).hook('grid_labels', {})
    for name, key, _, label, kind, heading in figures.SAMPLE_PANELS:
      if key not in grids:
        continue
      label = labels.get(key, label)
      heading = heading if key not in labels else 'fixed-seed'
      path = os.path.join(self.sample_dir, f'{name}_{step:07d}.png')
      meta = figures.grid_figure([(label, grids[key], kind)], f'{heading} {label}: {what}', path)
      written[os.path.basename(path)] = self.written[path] = meta
      with self.writer.as_default(step=step):
        tf.summary.image(f'samples/{name}', figures.decode(meta)[None], step=step,
                         description=f'{label}, fixed-seed samples of the training chain' +
                         ('; shown on its own symmetric scale +-max |Y| of each grid (written '
                          'in the image), grey = 0' if kind == 'residual' else ''))
    data_grid = os.path.join(self.sample_dir, 'data.png')
    if 'x' in grids and 'data' in self.config and not os.path.exists(data_grid):  # real images
      data_cfg = self.config.data
      label = f'{data_cfg.name} {data_cfg.test_split} split'
      meta = figures.grid_figure([(label, self._data_images(len(grids['x'])), 'image')],
                                 f'real images: {self.name}', data_grid)  # no step: data
      written['data.png'] = self.written[data_grid] = meta
      with self.writer.as_default(step=step):
        tf.summary.image('samples/data', figures.decode(meta)[None], step=step,
                         description=f'real images ({label}), for the samples beside them')
    self._energy_histograms(step, grids)
    return written

  def _data_images(self, num):
    """The first `num` test images (kept: the same every grid)."""
    if self._data is None:
      # pylint: disable=g-import-not-at-top
      from tf_hat_ebm import data as data_lib
      data_cfg = self.config.data
      self._data = next(iter(data_lib.eval_dataset(data_cfg, data_cfg.test_split, num)))
    return self._data

  def _energy_histograms(self, step, grids):
    if registry.for_config(self.config).inference is None or 'y' not in grids:
      return  # not a Hat EBM: no energy to show
    hat = self.task.hat
    energies = {}
    with self.writer.as_default(step=step):
      for name, images, what in (('data', self._data_images(len(grids['x'])), 'test images'),
                                 ('samples', grids['x'], 'fixed-seed samples X = G(Z) + Y')):
        energy = tf.cast(hat(tf.convert_to_tensor(images, tf.float32)), tf.float32)
        energies[what] = tf.reshape(energy, [-1]).numpy()
        tf.summary.histogram(f'energy/histogram_{name}', energies[what], step=step,
                             description=f'H(x) of {what}; energy/histograms overlays it with '
                                         'the other set on one axis')
      # TensorBoard's histograms of two tags have their own ranges: one figure overlays them.
      meta = figures.energy_histograms(energies, f'H(x) of data and samples: {self.name}, step '
                                       f'{step}', None, reference='test images')
      tf.summary.image('energy/histograms', figures.decode(meta)[None], step=step,
                       description='H(x) of test images (filled) and of the fixed-seed samples '
                                   'on one axis: they overlap when the samples look like data '
                                   'to the EBM')

  def finish(self, step):
    """The training curves of the whole run (every event file of the workdir) as one PNG."""
    if not (self.is_chief and self.figures):
      return None
    self.writer.flush()
    series = {t.split('/', 1)[-1]: v
              for t, v in read_scalars(os.path.join(self.workdir, 'tensorboard')).items()}
    if not series:
      return None
    path = os.path.join(self.workdir, 'training_curves.png')
    self.written[path] = figures.training_curves(
        series, f'training curves: {self.name}, step {step}', path)
    return self.written[path]


def log_evaluation(workdir, step, values, descriptions, figure=None, histograms=None):
  """An evaluation script's results into the workdir's TensorBoard at the checkpoint's step:
  eval/<name> scalars, an optional figure (metadata of a figures function), histograms of H(x)
  by set name."""
  writer = tf.summary.create_file_writer(os.path.join(workdir, 'tensorboard'))
  with writer.as_default(step=step):
    for name, value in values.items():
      tf.summary.scalar(f'eval/{name}', value, description=descriptions.get(name, name))
    if figure is not None:
      tf.summary.image(f'eval/{os.path.splitext(os.path.basename(figure["path"]))[0]}',
                       figures.decode(figure)[None], description=figure['title'])
    for name, values_ in (histograms or {}).items():
      tf.summary.histogram(f'eval/energy_{name.replace("/", "_")}', np.asarray(values_, np.float32),
                           description=f'H(x) of {name}')
  writer.flush()
