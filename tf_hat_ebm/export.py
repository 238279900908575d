"""A trained Hat EBM as a self-contained SavedModel: `sample`, `sample_path` and `energy`.

The module is also what the evaluation and sampling scripts run in-process, so an exported model
and its workdir give the same samples for the same seed. Loading needs TensorFlow only:

  model = tf.saved_model.load(path)           # or tensorflow_hub.load(path)
  x = model.sample(num_samples=16, seed=0)['images']        # [16, size, size, channels] in [-1, 1]
  e = model.energy(x)['energy']                              # [16], higher = less likely
  e = model(x)                                               # the same: __call__, serving_default
  layer = tensorflow_hub.KerasLayer(path)                    # energy in Keras, H's parameters

`num_samples` and `seed` are int64 scalars (Python ints convert; `seed` defaults to 0), `energy`
takes float32 images [N, size, size, channels]: the signatures are concrete. Inputs are checked
inside the functions: 1 <= num_samples <= MAX_SAMPLES, and energy images non-empty, finite, in
[-1, 1]. The SavedModel describes itself: `step`, `dataset`, `experiment`, `config_name` and the
package `version` are variables, and assets/README.md (a model card: what the model is, the
paper, its data, step, measured FID / OOD AUROC, how to call it) and assets/config.json (the run's
config) are assets (`model.model_card.asset_path`, `model.config_file.asset_path`).

Synthesis models are `ConditionalHatEBMModule`s. Joint (refinement / retrofit) models
(`JointHatEBMModule`) move Y and Z along the chain and add
`refine(latents)`: the joint chain from given latents, e.g. a GAN's own samples' latents.
"""
import dataclasses
import math
import os
import shutil
import sys
import tempfile

from google.protobuf import message
import numpy as np
import tensorflow as tf

import tf_hat_ebm
from tf_hat_ebm import errors
from tf_hat_ebm import generators
from tf_hat_ebm import langevin
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm import text as text_lib
from tf_hat_ebm import trained_run
from tf_hat_ebm import workdir as workdir_lib

# num_samples is int64 (an int32 input would wrap 2**32 + 4 to 4); one call makes at most this many.
MAX_SAMPLES = 2**31 - 1
# energy() accepts images in [-1, 1] up to float rounding; [0, 255] or [0, 1]-scaled data is not.
RANGE_TOLERANCE = 1e-3
_SAMPLE_SIGNATURE = [tf.TensorSpec([], tf.int64, name='num_samples'),
                     tf.TensorSpec([], tf.int64, name='seed')]


MAX_PATH_STEPS = 50


def default_path_steps(num_steps, points=5):
  """Evenly spaced chain steps 0..K for the Langevin-path figure."""
  return sorted(set(int(round(s)) for s in np.linspace(0, num_steps, points)))


def clip_images(x):
  return tf.clip_by_value(x, -1.0, 1.0)


def check_num_samples(num_samples, function):
  """Asserts 1 <= num_samples <= MAX_SAMPLES inside a traced function."""
  # As an int64 tensor: a function run eagerly (tf.config.run_functions_eagerly) gets a Python int.
  num_samples = tf.convert_to_tensor(num_samples, tf.int64)
  return [tf.debugging.assert_positive(num_samples,
                                       message=f'{function}: num_samples must be >= 1'),
          tf.debugging.assert_less_equal(
              num_samples, tf.constant(MAX_SAMPLES, tf.int64),
              message=f'{function}: num_samples must be <= {MAX_SAMPLES} per call')]


def check_values(x, function, what, bound=None):
  """Asserts x is non-empty, finite and (with `bound`) within [-bound, bound]."""
  checks = [tf.debugging.assert_positive(tf.shape(x)[0],
                                         message=f'{function}: {what} must not be empty'),
            tf.debugging.assert_all_finite(x, message=f'{function}: {what} must be finite')]
  if bound is not None:
    with tf.control_dependencies(checks):  # the range of NaN is meaningless: finiteness first
      checks.append(tf.debugging.assert_less_equal(
          tf.reduce_max(tf.abs(x)), tf.constant(bound + RANGE_TOLERANCE, x.dtype),
          message=f'{function}: {what} must lie in [-{bound:g}, {bound:g}] (pixels scaled from '
                  '[0, 255] as (p / 127.5) - 1)'))
  return checks


class HatEBMModule(tf.Module):
  """What every exported Hat EBM has: its networks' variables, the sampling chain's settings,
  `energy`, the reusable-SavedModel attributes and the signatures. The chain itself (`sample`,
  `sample_path`) is the subclass's: ConditionalHatEBMModule (synthesis) or JointHatEBMModule
  (refinement, retrofit)."""

  # Plain attributes, saved with the model, in place of tf.Module's computed properties: the
  # reusable SavedModel API names these lists (set in __init__).
  variables = trainable_variables = None

  def __init__(self, model, image_shape, path_steps=None, name='hat_ebm'):
    """model: a tasks.base.InferenceModel (H, G and the sampling chain of a restored run)."""
    super().__init__(name=name)
    hat, generator, settings = model.hat, model.generator, model.sampling
    # The networks are reached through closures, and only their variables are tracked: saving then
    # stores variables and traced functions, never Keras objects (loadable with TF alone).
    self._hat_fn = lambda x: hat(x)  # pylint: disable=unnecessary-lambda
    self._generator_call = generators.untracked_call(generator)
    self.network_variables = list(hat.variables) + list(generator.variables)
    self._settings = settings
    self._latent_shape = tuple(int(d) for d in generator.latent_shape)
    # Variables (not constants) so that they are saved and readable on the loaded model.
    self.image_shape = tf.Variable(image_shape, dtype=tf.int32, trainable=False)
    # The Keras policy the chain computes in (the training run's), e.g. b'mixed_bfloat16'.
    self.precision = tf.Variable(model.precision, trainable=False)
    self._precision_name = model.precision
    self._image_shape = tuple(int(d) for d in image_shape)
    steps = default_path_steps(settings.steps) if path_steps is None else path_steps
    steps = sorted(set(int(s) for s in steps))
    if len(steps) > MAX_PATH_STEPS:  # columns of the path figure
      raise ValueError(f'--path_steps: {len(steps)} steps; the path figure shows at most '
                       f'{MAX_PATH_STEPS}')
    if not steps or steps[0] < 0 or steps[-1] > settings.steps:
      raise ValueError(f'path steps must lie in 0..{settings.steps} (the sampling chain\'s K); '
                       f'got {steps}')
    self._path_steps = tuple(steps)
    self.path_steps = tf.Variable(steps, dtype=tf.int32, trainable=False)
    # The chain's K, eps, T, ... for whoever loads the model (None saved as -1).
    self.chain_settings = {
        k: tf.Variable(float(-1 if v is None else v), trainable=False)
        for k, v in dataclasses.asdict(settings).items()}
    self.rng = tf.random.Generator.from_seed(0)
    # A concrete signature: the image shape is the model's, known only here.
    images_spec = tf.TensorSpec([None, *self._image_shape], tf.float32, name='images')
    self.energy = tf.function(self._energy, input_signature=[images_spec])
    # The reusable SavedModel API (tensorflow_hub.KerasLayer(path) with no signature): __call__
    # scores images, `variables` / `trainable_variables` are those of H, which __call__ uses.
    self.__call__ = tf.function(lambda images: self._energy(images)['energy'],
                                input_signature=[images_spec])
    self.variables = list(hat.variables)
    self.trainable_variables = list(hat.trainable_variables)
    self.regularization_losses = []

  @property
  def expected_shape(self):
    return '[N, {}, {}, {}]'.format(*self._image_shape)

  # ---- energy --------------------------------------------------------------------------------
  def _energy(self, images):
    """H(x) per image (untempered), for float32 images of shape [N, size, size, channels]."""
    with tf.control_dependencies(check_values(images, 'energy', 'images', bound=1.0)):
      images = tf.identity(images)
    return {'energy': tf.cast(self._hat_fn(images), tf.float32)}

  def energy_functions(self):
    """The concrete `energy`: float32 [None, size, size, channels]."""
    return [self.energy.get_concrete_function()]

  def extra_signatures(self):
    """Hook for subclasses: {name: concrete function} added to the SavedModel's signatures."""
    return {}

  def signatures(self):
    energy = self.energy_functions()[0]
    return {'serving_default': energy, 'energy': energy,
            'sample': self.sample.get_concrete_function(),
            'sample_path': self.sample_path.get_concrete_function(), **self.extra_signatures()}


class ConditionalHatEBMModule(HatEBMModule):
  """A conditional Hat EBM (synthesis): X = G(Z) + Y, Z fixed along the chain."""

  def _start(self, num_samples, seed, function):
    with tf.control_dependencies(check_num_samples(num_samples, function)):
      self.rng.reset_from_seed(seed)  # deterministic for a seed, whatever was sampled before
    _, g_z, y0 = langevin.conditional_start(self._generator_call, self.rng, self._settings,
                                            num_samples)
    return g_z, y0

  def _run(self, g_z, y, steps):
    if steps == 0:
      return y
    settings = dataclasses.replace(self._settings, steps=steps)
    y, _ = langevin.sample_conditional(self._hat_fn, g_z, self.rng, settings, y0=y)
    return y

  @tf.function(input_signature=_SAMPLE_SIGNATURE)
  def sample(self, num_samples, seed=0):
    """num_samples samples of the configured chain.

    images: X = G(Z) + Y clipped to [-1, 1] (G's 2 tanh range lets the sum overshoot);
    generator_images G(Z) and residuals Y unclipped.
    """
    with tf.control_dependencies(check_num_samples(num_samples, 'sample')):
      self.rng.reset_from_seed(seed)  # deterministic for a seed, whatever was sampled before
    # The chain of training and evaluation (langevin.sample), from the same RNG stream.
    _, y, g_z, _ = langevin.sample(self._hat_fn, self._generator_call, self.rng, self._settings,
                                   batch_size=num_samples)
    return {'images': clip_images(g_z + y), 'generator_images': g_z, 'residuals': y}

  @tf.function(input_signature=_SAMPLE_SIGNATURE)
  def sample_path(self, num_samples, seed=0):
    """The same chains as `sample`, stopped at `path_steps`: [steps, N, ...] per output."""
    g_z, y = self._start(num_samples, seed, 'sample_path')
    ys, done = [], 0
    for step in self._path_steps:  # run in segments; the noise stream is the same as `sample`'s
      y = self._run(g_z, y, step - done)
      done = step
      ys.append(y)
    ys = tf.stack(ys)
    return {'images': clip_images(g_z[None] + ys), 'generator_images': g_z, 'residuals': ys,
            'steps': tf.identity(self.path_steps)}


class JointHatEBMModule(HatEBMModule):
  """Joint (refinement / retrofit) models: chains move both Y and Z through the frozen G.

  `sample` starts from Z0 ~ N(0, I), `refine(latents)` from given latents (e.g. a GAN's own);
  both return images X = G(Z_K) + Y_K, generator_images G(Z_K), residuals Y_K and latents Z_K.
  """

  def __init__(self, model, image_shape, path_steps=None, name='joint_hat_ebm'):
    super().__init__(model, image_shape, path_steps, name)

  def _chain(self, z, y, steps):
    settings = dataclasses.replace(self._settings, steps=steps)
    z, y, g_z, _ = langevin.sample_joint(self._hat_fn, self._generator_call, self.rng, settings,
                                         z0=z, y0=y)
    return z, y, g_z

  def _outputs(self, z, y, g_z):
    return {'images': clip_images(g_z + y), 'generator_images': g_z, 'residuals': y,
            'latents': z}

  @tf.function(input_signature=_SAMPLE_SIGNATURE)
  def sample(self, num_samples, seed=0):
    with tf.control_dependencies(check_num_samples(num_samples, 'sample')):
      self.rng.reset_from_seed(seed)
    return self.chain(self.rng, num_samples)

  def chain(self, rng, num_samples=None, latents=None):
    """The sampling chain (langevin.sample, as in training) from fresh latents or `latents`."""
    z, y, g_z, _ = langevin.sample(self._hat_fn, self._generator_call, rng, self._settings,
                                   batch_size=num_samples, z0=latents)
    return self._outputs(z, y, g_z)

  @tf.function(input_signature=_SAMPLE_SIGNATURE)
  def sample_path(self, num_samples, seed=0):
    """The chains of `sample` at `path_steps`: [steps, N, ...] images, G(Z), Y and Z."""
    with tf.control_dependencies(check_num_samples(num_samples, 'sample_path')):
      self.rng.reset_from_seed(seed)
    z = langevin.initial_latent(self._generator_call, self.rng, self._settings, num_samples)
    y, g_z = None, tf.cast(self._generator_call(z), tf.float32)
    xs, gs, ys, done = [], [], [], 0
    for step in self._path_steps:
      if step > done:
        z, y, g_z = self._chain(z, y, step - done)
      done = step
      y_now = tf.zeros_like(g_z) if y is None else y
      xs.append(clip_images(g_z + y_now))
      gs.append(g_z)
      ys.append(y_now)
    return {'images': tf.stack(xs), 'generator_images': tf.stack(gs), 'residuals': tf.stack(ys),
            'steps': tf.identity(self.path_steps)}

  @tf.function
  def refine(self, latents):
    """The configured joint chain from the given latents (deterministic: seed 0)."""
    latents = tf.cast(latents, tf.float32)
    with tf.control_dependencies(check_values(latents, 'refine', 'latents')):
      self.rng.reset_from_seed(0)
    return self.chain(self.rng, latents=latents)

  def extra_signatures(self):
    spec = tf.TensorSpec([None, *self._latent_shape], tf.float32, name='latents')
    return {'refine': self.refine.get_concrete_function(spec)}


def build_module(run, path_steps=None):
  """The exportable module of a restored `trained_run.Run` (its kind's, registry.py), carrying
  what the SavedModel says about itself (describe)."""
  module = run.kind.export_module(run.model, run.config, path_steps)
  describe(module, run)
  return module


def describe(module, run):
  """Attaches the run's metadata: variables saved with the model, and the model card and config
  that `save` writes as assets."""
  config = run.config
  module.step = tf.Variable(int(run.step), dtype=tf.int64, trainable=False)
  module.dataset = tf.Variable(config.data.name, trainable=False)
  module.experiment = tf.Variable(config.get('experiment', 'synthesis'), trainable=False)
  module.config_name = tf.Variable(config.get('name', ''), trainable=False)
  module.version = tf.Variable(tf_hat_ebm.__version__, trainable=False)
  module.asset_texts = {'config.json': config.to_json_best_effort(indent=2, sort_keys=True),
                        'README.md': model_card(module, run)}


def _measured(workdir):
  """The scores of workdir's fid.json (each labelled by its metric) and the OOD AUROCs of its
  ood.json, as markdown lines. A file there that cannot be read (another schema, no metrics, a
  malformed field) is named in the card and in a warning, never taken for no file."""
  lines = []
  for name in ('fid.json', 'ood.json'):
    path = os.path.join(workdir, name) if workdir else ''
    if not path or not tf.io.gfile.exists(path):
      continue
    try:
      with tf.io.gfile.GFile(path) as f:
        saved = workdir_lib.parse_json(f.read())
      if name == 'ood.json' and not isinstance(saved, dict):
        raise ValueError(f'an OOD result is a JSON object, not {type(saved).__name__}')
      result = result_lib.EvalResult.from_json(saved) if name == 'fid.json' else saved
      found = _scores(result) if name == 'fid.json' else _aurocs(result)
      if not found:
        raise ValueError('it holds no finite score')
    except (ValueError, tf.errors.OpError) as e:
      reason = errors.one_line(e)
      print(f'warning: {path} is not read into the model card ({reason}); rerun its evaluation '
            'with --overwrite to record its scores', file=sys.stderr, flush=True)
      found = [f'- {name}: not read ({text_lib.markdown(reason)})']
    lines += found
  return lines


def _scores(result):
  """A line per metric and method of a results.EvalResult: mean ± sd over its sets."""
  md = text_lib.markdown  # the files are data: their text is shown, never interpreted
  lines = []
  for key, metric in result.metrics.items():
    for method in result.methods:
      values = result.sets(key, method)
      if not values or not all(math.isfinite(v) for v in values):
        continue
      std = result.std(key, method)
      spread = '' if std is None else f' ± {std:.{metric.digits}f}'
      lines.append(f'- {md(metric.label)} {md(method)} ({md(result.feature_net)}, '
                   f'{md(result.num_samples)} samples, step {md(result.step)}): '
                   f'{result.mean(key, method):.{metric.digits}f}{spread}')
  if lines:
    lines.append(f'  - {fid_features_note(md(result.feature_net))}')
  return lines


def _aurocs(result):
  md = text_lib.markdown
  reference = (result.get('in_distribution') or {}).get('name')
  lines = []
  for key, value in (result.get('sets') or {}).items():
    auroc = value.get('auroc') if isinstance(value, dict) else None
    lines.append(f'- OOD AUROC, {md(key)} vs {md(reference)} (step {md(result.get("step"))}):'
                 f' {text_lib.number(auroc, ".3f")}')
  return lines


def _generator_row(run):
  """A joint run exported over another generator than it was trained with says both."""
  other = getattr(run, 'other_generator', None)
  if not other:
    return ''
  trained = text_lib.markdown(run.config.generator.get('fingerprint') or 'unknown')
  return (f'\n| generator | trained with weights {trained}; this export uses other weights '
          f'{text_lib.markdown(other)} (--allow_other_generator) |')


def model_card(module, run):
  """assets/README.md: what the model is, its data and training, its scores, how to call it."""
  config, s = run.config, module._settings  # pylint: disable=protected-access
  joint = isinstance(module, JointHatEBMModule)
  h, w, c = module._image_shape  # pylint: disable=protected-access
  what = ('a joint Hat EBM over a frozen generator (refinement / retrofit): its chain moves the '
          'residual Y and the latent Z' if joint else
          'a conditional Hat EBM (synthesis): a hat network H and a generator G trained in tandem; '
          'its chain moves the residual Y with Z fixed')
  measured = _measured(getattr(run, 'workdir', None)) or ['- none recorded in the workdir']
  latents = ', '.join(map(str, module._latent_shape))  # pylint: disable=protected-access
  refine = (f'\n- `refine(latents)`: float32 [N, {latents}] -> the same outputs, the chain from '
            'given latents' if joint else '')
  name = text_lib.markdown(config.get('name', ''))
  experiment = text_lib.markdown(config.get('experiment', 'synthesis'))
  return f"""# Hat EBM: {name}

This SavedModel is {what}. An image is X = G(Z) + Y and H scores it: p(X) ~ exp(-H(X) / T).

Paper: Mitch Hill, Erik Nijkamp, Jonathan Mitchell, Bo Pang, Song-Chun Zhu. *Learning Probabilistic
Models from Generator Latent Spaces with Hat EBM.* NeurIPS 2022. Written by tf_hat_ebm
{tf_hat_ebm.__version__} (TensorFlow {tf.__version__}).

| | |
|---|---|
| config | {name} (assets/config.json), experiment {experiment} |
| data | {text_lib.markdown(config.data.name)}, images [{h}, {w}, {c}] in [-1, 1] |
| training step | {int(run.step)} |{_generator_row(run)}
| precision | {module._precision_name} |
| sampling chain | {s.describe()} |

Measured (the workdir's evaluation files at export):
{chr(10).join(measured)}

## Calling it

```python
import tensorflow as tf
model = tf.saved_model.load(PATH)              # or tensorflow_hub.load(PATH)
out = model.sample(num_samples=16, seed=0)     # seed defaults to 0; same seed, same samples
e = model.energy(out['images'])['energy']      # H(x): lower = more like the data
```

- `sample(num_samples, seed=0)`: int64 scalars -> `images` X clipped to [-1, 1], `generator_images`
  G(Z), `residuals` Y, each float32 [N, {h}, {w}, {c}]{', `latents` Z' if joint else ''}
- `sample_path(num_samples, seed=0)`: the same chains at the chain steps `steps`: [steps, N, ...]
- `energy(images)`: float32 [N, {h}, {w}, {c}] in [-1, 1] -> `energy` [N]{refine}
- variables: `step`, `dataset`, `experiment`, `config_name`, `version`, `precision`,
  `image_shape`, `path_steps`, `chain_settings`
- `model(images)` (`__call__`, also the `serving_default` signature): the energy [N] alone;
  `variables` and `trainable_variables` are H's
- in Keras: `tensorflow_hub.KerasLayer(PATH)` scores images, its parameters H's
{model_card_notes()}"""


PAPER = ('Mitch Hill, Erik Nijkamp, Jonathan Mitchell, Bo Pang, Song-Chun Zhu. Learning '
         'Probabilistic Models from Generator Latent Spaces with Hat EBM. NeurIPS 2022')
ARXIV_URL = 'https://arxiv.org/abs/2210.16486'
RELEASE_URL = 'https://github.com/point0bar1/hat-ebm'
BIBTEX = """@inproceedings{hill2022hatebm,
  title         = {Learning Probabilistic Models from Generator Latent Spaces with Hat {EBM}},
  author        = {Hill, Mitch and Nijkamp, Erik and Mitchell, Jonathan and Pang, Bo and
                   Zhu, Song-Chun},
  booktitle     = {Advances in Neural Information Processing Systems},
  volume        = {35},
  year          = {2022},
  eprint        = {2210.16486},
  archivePrefix = {arXiv}
}"""


def fid_features_note(feature_net):
  """What a FID of the model card was measured with: Inception FID or not."""
  if str(feature_net).startswith('inception'):
    return ('features: TF-GAN Inception pool3, the FID of the paper and of published tables')
  return (f'features: {feature_net}, a small classifier trained on this dataset (cached as '
          '~/.cache/tf_hat_ebm); NOT Inception FID: compare it only with FIDs measured the same '
          'way, never with published numbers')


def model_card_notes():
  """The model card's closing sections: limitations, license, citation."""
  return f"""
## Limitations

- A research model: samples come from a Langevin chain started at G(Z) and show what the EBM
  learned on its training data only; energies are relative (only differences mean anything) and
  are not calibrated likelihoods.
- `energy` expects images like the training data ([-1, 1], this size and channel count); other
  images get a number, not a meaningful score. As an OOD detector it is as good as the measured
  AUROCs above, on those sets only.
- Small-data models (the digits) are demonstrations; their FID is not Inception FID.

## License

Apache-2.0 (the tf_hat_ebm license). The training data keeps its own license.

## Citation

The paper ({ARXIV_URL}; the authors' release: {RELEASE_URL}):

```bibtex
{BIBTEX}
```
"""


def save(module, output_dir):
  """Writes the SavedModel (loadable by tf.saved_model.load and tensorflow_hub.load), with the
  model card and config of `describe` as assets."""
  texts = getattr(module, 'asset_texts', None) or {}
  staging = tempfile.mkdtemp(prefix='hat_ebm_assets_') if texts else None
  try:
    for name, text in texts.items():
      with open(os.path.join(staging, name), 'w') as f:
        f.write(text)
    if texts:
      module.model_card = tf.saved_model.Asset(os.path.join(staging, 'README.md'))
      module.config_file = tf.saved_model.Asset(os.path.join(staging, 'config.json'))
    tf.saved_model.save(module, output_dir, signatures=module.signatures())
  finally:
    if staging:
      shutil.rmtree(staging, ignore_errors=True)
  return output_dir


def load_saved_model(path, flag):
  """A SavedModel written by `save`; anything else is a one-line error naming --flag."""
  if not tf.io.gfile.exists(os.path.join(path, 'saved_model.pb')):
    if tf.io.gfile.exists(os.path.join(path, '.export.commit.json')):
      raise ValueError(f'--{flag}={path}: an export there was interrupted while it replaced the '
                       'SavedModel (.export.commit.json); the same export.py command with '
                       '--overwrite puts the earlier one back and writes the new one')
    raise ValueError(f'--{flag}={path}: no saved_model.pb there (write one with '
                     'tf-hat-ebm-export)')
  try:
    model = tf.saved_model.load(path)
  except (OSError, ValueError, KeyError, IndexError, message.DecodeError,
          tf.errors.OpError) as e:
    lines = str(e).strip().splitlines()
    # IndexError: TF's reader of a variables file shorter than its index says.
    where = os.path.join(path, 'variables') + ': ' if isinstance(e, IndexError) else ''
    raise ValueError(f'--{flag}={path}: unreadable SavedModel (truncated or corrupt?): {where}'
                     f'{lines[0] if lines else type(e).__name__}') from e
  missing = [name for name in ('sample', 'sample_path', 'energy') if not hasattr(model, name)]
  if missing:
    raise ValueError(f'--{flag}={path} is not a Hat EBM export (no {", ".join(missing)}); '
                     'write one with tf-hat-ebm-export')
  return model


def export_run(workdir, output=None, path_steps=None, overwrite=False, **load):
  """tf-hat-ebm-export: the SavedModel of a workdir's run (at `load`'s checkpoint) in `output`
  (default <workdir>/saved_model), replacing an earlier export only with `overwrite` and only
  once the new one is written completely. Returns the module."""
  output = output or os.path.join(workdir, 'saved_model')
  out = outputs.OwnedOutput(output, 'export', overwrite, 'output')
  out.check()  # before any work
  run = trained_run.load_run(workdir, **load)
  module = build_module(run, path_steps=result_files.int_list(path_steps, 'path_steps'))
  with out:  # staged first: a failed export (disk full, Ctrl-C, ...) leaves the old one intact
    save(module, out.staging)
    out.commit()
  s = run.model.sampling
  print(f'Exported step {run.step} of {workdir} to {output}\n'
        f'  sample(num_samples, seed): {s.describe()}; images {module.expected_shape} in [-1, 1]\n'
        f'  sample_path steps: {module.path_steps.numpy().tolist()}\n'
        f'  energy(images): float32 {module.expected_shape} -> [N]')
  return module
