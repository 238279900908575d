"""The frozen generator G of a joint Hat EBM, from wherever it comes (config.generator).

  source='sngan'        path = workdir of experiments/train_sngan.py (also gives D for DDLS)
  source='autoencoder'  path = workdir of experiments/train_autoencoder.py (its decoder)
  source='synthesis'    path = workdir of experiments/train_synthesis.py (the G trained in tandem
                        with its hat: a strong generator to refine with a new hat; no D)
  source='savedmodel'   path = a SavedModel directory (Keras, or tf.Module with __call__), loaded
                        as a TensorFlow graph: no Python in it runs (a Keras Lambda layer's)
  source='factory'      path = 'package.module:function'; function() returns a Keras model
Any latent -> image callable will do, which is the paper's point: the Hat EBM needs no
probabilistic generator. For 'savedmodel' and 'factory' the config declares latent_shape and
output_range; outputs are mapped linearly from output_range to the [-1, 1] of the data.

Precision: the project's SN-GAN and decoder, and a factory's model, are built under the chain's
Keras policy (nets.with_precision); a SavedModel keeps the precision it was saved in. Either way
G gets its latents in its compute dtype and hands back float32 images.
"""
import hashlib
import importlib
import os

import numpy as np

import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import nets
from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib

SOURCES = validation.GENERATOR_SOURCES
# Sources that are a workdir of this project's training: what its checkpoints hold.
WORKDIR_SOURCES = {'sngan': 'SN-GAN', 'autoencoder': 'autoencoder', 'synthesis': 'synthesis run'}


class FrozenGenerator(tf.Module):
  """Any latent -> image callable as a frozen generator: latent_shape, outputs mapped to [-1, 1]."""

  def __init__(self, model, latent_shape, output_range=(-1.0, 1.0), keras=True, name='frozen'):
    super().__init__(name=name)
    self.model = model
    self.latent_shape = tuple(int(d) for d in latent_shape)
    self.low, self.high = float(output_range[0]), float(output_range[1])
    self._keras = keras
    if not keras:  # a graph's variables are tracked here (tf.Module tracks lists of them)
      self.graph_variables = list(getattr(model, 'variables', ()))
    # What G computes in: a Keras model's policy; a plain SavedModel function takes float32.
    self.compute_dtype = tf.as_dtype(getattr(model, 'compute_dtype', None) or tf.float32)
    if keras:
      model.trainable = False

  def __call__(self, z, training=False):
    del training  # always inference mode: G is frozen
    z = tf.cast(z, self.compute_dtype)  # the cast's gradient brings grad_Z back in float32
    out = self.model(z, training=False) if self._keras else self.model(z)
    out = tf.cast(out, tf.float32)
    if (self.low, self.high) != (-1.0, 1.0):
      out = 2.0 * (out - self.low) / (self.high - self.low) - 1.0
    return out


class _UntrackedCall:
  """G reached through a closure: a tf.Module holding it tracks G's variables but never the Keras
  objects, so its SavedModel loads with TensorFlow alone (export.py)."""

  def __init__(self, generator):
    self._fn = lambda z, training=False: generator(z, training=training)
    self.latent_shape = tuple(int(d) for d in generator.latent_shape)

  def __call__(self, z, training=False):
    return self._fn(z, training=training)


def untracked_call(generator):
  """Any generator (a Keras model with latent_shape, or a FrozenGenerator) as an untracked
  callable with its latent_shape, for the sampling chain of an exported module."""
  return _UntrackedCall(generator)


def load(config, precision='float32'):
  """(frozen generator, SN-GAN discriminator or None) named by config.generator, shape-checked;
  the project's networks and a factory's model built under the Keras policy `precision`.

  The generator is pinned: a workdir's checkpoint is generator.checkpoint (the latest at a run's
  first start, recorded there), and its weights must hash to generator.fingerprint when that is
  set. Both are filled in on `config` (the trainer writes them to config.json), and
  generator.path is made absolute, so every later load sees exactly this generator.
  """
  gcfg, data = config.generator, config.data
  if gcfg.source not in SOURCES:
    raise ValueError(f'generator.source must be one of {SOURCES}, not {gcfg.source!r}')
  if not gcfg.path:
    raise ValueError(f'set generator.path for generator source {gcfg.source!r}')
  if gcfg.source != 'factory':
    gcfg.path = absolute_path(gcfg.path)
  discriminator = None
  if gcfg.source in WORKDIR_SOURCES:
    what = WORKDIR_SOURCES[gcfg.source]
    script = f'experiments/train_{gcfg.source}.py'
    pinned = gcfg.get('checkpoint')
    if pinned is not None and not tf.io.gfile.exists(
        os.path.join(gcfg.path, 'checkpoints', f'ckpt-{pinned}.index')):
      raise PinnedGeneratorGone(gcfg.path, pinned)
    path = checkpoints.resolve_checkpoint(gcfg.path, pinned, what=what, script=script)
    if gcfg.source == 'sngan':
      model, discriminator = load_sngan(gcfg.path, config, checkpoint=path, precision=precision)
    elif gcfg.source == 'synthesis':
      model, _ = load_sngan(gcfg.path, synthesis_generator_config(gcfg.path, config),
                            checkpoint=path, precision=precision)
    else:
      model = load_decoder(gcfg.path, config, checkpoint=path, precision=precision)
    generator = FrozenGenerator(model, model.latent_shape)
    step = checkpoint_step(path)
    if pinned is None and step is not None:
      gcfg.checkpoint = step
    where = f'{path}'
  else:
    model, keras = (_load_savedmodel(gcfg.path) if gcfg.source == 'savedmodel'
                    else nets.with_precision(precision, lambda: _load_factory(gcfg.path)))
    if not gcfg.latent_shape:  # read from the model's signature, then recorded in config.json
      gcfg.latent_shape = signature_latent_shape(model)
    if not gcfg.latent_shape:
      raise ValueError(f'generator source {gcfg.source!r} needs generator.latent_shape (its '
                       'signature does not say)')
    generator = FrozenGenerator(model, gcfg.latent_shape, gcfg.output_range, keras=keras)
    where = f'{gcfg.source} {gcfg.path}'
  check_generator(generator, (data.image_size, data.image_size, data.channels),
                  f'{gcfg.source} generator {gcfg.path}')
  if gcfg.source in ('savedmodel', 'factory'):
    check_output_range(generator, f'{gcfg.source} generator {gcfg.path}')
  check_fingerprint(generator, gcfg, where)
  return generator, discriminator


class PinnedGeneratorGone(ValueError):
  """The generator checkpoint a joint run pinned is not where it was (moved, or deleted by the
  generator's later training); the message names the training flags, runs.load_run its own."""

  def __init__(self, path, pinned):
    self.path, self.pinned = path, pinned
    self.present = checkpoints.list_checkpoints(os.path.join(path, 'checkpoints'))
    super().__init__(f'the pinned generator checkpoint ckpt-{pinned} of {path} '
                     f'(generator.checkpoint) is gone ({self.where()}); restore it, or '
                     'choose another with --config.generator.path=DIR (moved) or '
                     '--config.generator.checkpoint=STEP, and --allow_config_change')

  def where(self):
    if not tf.io.gfile.isdir(self.path):
      return 'the directory no longer exists: moved?'
    found = ', '.join(f'ckpt-{s}' for s in self.present) or 'none'
    return f'checkpoints there now: {found}'


def adopt_pin(config, workdir, allow_change=False):
  """Before a resume: config.generator takes the pin recorded in workdir/config.json.

  Another generator (source, path or checkpoint) than the one the run was made with is an error
  naming both, unless `allow_change`; then the new one is pinned in its place.
  """
  gcfg = config.get('generator')
  if gcfg is None or not tf.io.gfile.exists(os.path.join(workdir, 'config.json')):
    return
  saved = workdir_lib.load_config(workdir).get('generator')
  if saved is None:
    return

  def describe_pin(g):
    step = '' if g.get('checkpoint') is None else f' ckpt-{g.checkpoint}'
    return f'{g.source} {absolute_path(g.path) if g.path else "(no path)"}{step}'

  asked = gcfg.get('checkpoint')
  same = (gcfg.source == saved.source and absolute_path(gcfg.path) == absolute_path(saved.path)
          and asked in (None, saved.get('checkpoint')))
  if same:
    gcfg.checkpoint = saved.get('checkpoint')
    if not gcfg.get('fingerprint') and not allow_change:  # allowed: the weights are re-recorded
      gcfg.fingerprint = saved.get('fingerprint') or ''
  elif not allow_change:
    raise ValueError(f'workdir {workdir} was made with the generator {describe_pin(saved)}; this '
                     f'config asks for {describe_pin(gcfg)}; pass --allow_config_change to '
                     'continue it with the new one')
  elif (gcfg.source == saved.source and asked is None and saved.get('checkpoint') is not None
        and gcfg.source in WORKDIR_SOURCES):
    # Moved (only the path differs, no checkpoint asked for): the pinned checkpoint, found at the
    # new path, is the generator; never the newest there without a word.
    new_path = absolute_path(gcfg.path)
    if not tf.io.gfile.exists(os.path.join(new_path, 'checkpoints',
                                           f'ckpt-{saved.checkpoint}.index')):
      raise PinnedGeneratorGone(new_path, saved.checkpoint)
    gcfg.checkpoint = saved.checkpoint
    print(f'The generator of workdir {workdir} moved to {new_path}: continuing with its pinned '
          f'ckpt-{saved.checkpoint} there (--config.generator.checkpoint=STEP pins another)')


def absolute_path(path):
  """A local path made absolute (so a run can be loaded from any directory); URLs as they are."""
  return path if '://' in path else os.path.abspath(os.path.expanduser(path))


def checkpoint_step(path):
  """N of a .../ckpt-N checkpoint path, else None."""
  tail = os.path.basename(path)
  return int(tail[5:]) if tail.startswith('ckpt-') and tail[5:].isdigit() else None


def fingerprint(generator):
  """A short hash of the generator's weights (shapes and values, in the model's order)."""
  digest = hashlib.sha256()
  model = generator.model
  weights = getattr(model, 'weights', None)
  if weights is None:
    weights = getattr(model, 'variables', ())
  for w in weights:
    value = np.asarray(w.numpy())
    digest.update(str(value.shape).encode())
    digest.update(value.tobytes())
  return digest.hexdigest()[:16] if weights else ''


def check_fingerprint(generator, gcfg, where):
  """Records generator.fingerprint, or fails naming both when the weights are not those."""
  found = fingerprint(generator)
  if gcfg.get('fingerprint') and found and found != gcfg.fingerprint:
    raise ValueError(f'the generator {where} has weights {found}, but this run was made with '
                     f'weights {gcfg.fingerprint} (generator.fingerprint): it changed since; '
                     'restore that generator, or pass --allow_other_generator '
                     '(--allow_config_change when training) to use this one')
  if 'fingerprint' in gcfg:
    gcfg.fingerprint = found


def untrained(config, precision='float32'):
  """A generator of config's networks with fresh weights (benchmarks, tests), built under the
  Keras policy `precision`."""
  data = config.data
  if config.generator.source == 'autoencoder':
    model = nets.with_precision(precision, lambda: nets.make_decoder(config))
  else:
    model = nets.with_precision(precision, lambda: nets.make_generator(
        config.model, data.image_size, data.channels))
  return FrozenGenerator(model, model.latent_shape)


def check_generator(generator, image_shape, what):
  """Fails, naming both shapes, when G does not map its latents to the config's images."""
  z = tf.zeros([1, *generator.latent_shape])
  try:
    out = generator(z)
  except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
    raise ValueError(f'{what} does not accept latents of shape {list(generator.latent_shape)}: '
                     f'{str(e).strip().splitlines()[0]}') from e
  if tuple(out.shape[1:]) != tuple(image_shape):
    raise ValueError(f'{what} maps latents {list(generator.latent_shape)} to images '
                     f'{list(out.shape[1:])}; the config expects images {list(image_shape)}')


RANGE_SLACK = 0.05  # of the declared range: what an output may overshoot it by
RANGE_PROBES = 64   # standard normal latents whose images are checked


def check_output_range(generator, what):
  """Fails, naming both ranges, when G's images leave its declared generator.output_range: a
  generator of [0, 255] declared as [-1, 1] would train the Hat EBM on the wrong scale."""
  z = tf.random.stateless_normal([RANGE_PROBES, *generator.latent_shape], [0, 0])
  mapped = generator(z).numpy()  # in [-1, 1] when the declaration is right
  span = generator.high - generator.low
  low, high = (generator.low + (v + 1.0) / 2.0 * span for v in (mapped.min(), mapped.max()))
  if low < generator.low - RANGE_SLACK * span or high > generator.high + RANGE_SLACK * span:
    raise ValueError(f'{what} outputs images in [{low:.4g}, {high:.4g}]; generator.output_range '
                     f'says [{generator.low:g}, {generator.high:g}]: set '
                     '--config.generator.output_range to the range it outputs')


def signature_latent_shape(model):
  """The latent shape a model's signature states (a Keras model's input, a SavedModel's traced
  call), or () when none states a whole one."""
  shape = getattr(model, 'input_shape', None)
  if shape is None:
    traced = getattr(model, 'traced', None)
    for concrete in getattr(traced, 'concrete_functions', None) or [traced]:
      specs = tf.nest.flatten(getattr(concrete, 'structured_input_signature', None))
      if specs and isinstance(specs[0], tf.TensorSpec):
        shape = specs[0].shape
        break
  dims = tuple(shape)[1:] if shape is not None and len(shape) > 1 else ()
  return dims if dims and all(isinstance(d, int) for d in dims) else ()


# ---- project networks restored from a training workdir ------------------------------------------
def load_sngan(workdir, config, checkpoint=None, precision='float32'):
  """(G, D) of the SN-GAN run in `workdir`, frozen, built from config.model under the Keras policy
  `precision`; D is None with model.disc_width 0 (an imported generator). A checkpoint of other
  networks fails naming the checkpoint's shapes and the config's, before anything trains."""
  data = config.data
  path = checkpoints.resolve_checkpoint(workdir, checkpoint, what='SN-GAN',
                                        script='experiments/train_sngan.py')
  check_generator_checkpoint(path, config.model, data.image_size, data.channels)

  def build():
    items = dict(generator=nets.make_generator(config.model, data.image_size, data.channels))
    if config.model.get('disc_width'):
      items['discriminator'] = nets.make_discriminator(config.model, data.image_size,
                                                       data.channels)
    return items

  items = nets.with_precision(precision, build)
  checkpoints.restore(path, items, 'the SN-GAN')
  for model in items.values():
    model.trainable = False
  return items['generator'], items.get('discriminator')


def synthesis_generator_config(workdir, config):
  """`config` with the model of the synthesis run in `workdir` (its G's width, latent and output
  scale are the run's, not the refinement config's) and no discriminator; its images must be the
  config's."""
  run = workdir_lib.load_config(workdir)
  ours, theirs = config.data, run.data
  if (theirs.image_size, theirs.channels) != (ours.image_size, ours.channels):
    raise ValueError(f'the synthesis run {workdir} makes {theirs.image_size}x{theirs.image_size}x'
                     f'{theirs.channels} images; the config expects {ours.image_size}x'
                     f'{ours.image_size}x{ours.channels}')
  out = config.copy_and_resolve_references()
  with out.unlocked():
    for field in ('gen_width', 'z_dim', 'out_factor', 'init'):
      out.model[field] = run.model[field]
    # its normalisation too: a batch-norm epsilon the run did not train with shifts every pixel
    out.model['gen_batch_stats'] = nets.synthesis_gen_batch_stats(run)
    out.model['disc_width'] = 0
  return out


def load_decoder(workdir, config, checkpoint=None, precision='float32'):
  """The frozen decoder of the autoencoder run in `workdir`, checked against `config`, built under
  the Keras policy `precision`."""
  data = config.data
  path = checkpoints.resolve_checkpoint(workdir, checkpoint, what='autoencoder',
                                        script='experiments/train_autoencoder.py')
  wanted = (data.image_size, data.channels, config.model.gen_width,
            nets.latent_shape_for(data.image_size))
  # An imported decoder has no config.json beside its checkpoints: the restore checks the shapes.
  if tf.io.gfile.exists(os.path.join(workdir, 'config.json')):
    saved = workdir_lib.load_config(workdir, lambda _: config_lib.autoencoder_defaults())
    size = saved.data.image_size
    have = (size, saved.data.channels, saved.model.gen_width, nets.latent_shape_for(size))
    if have != wanted:
      raise ValueError(f'autoencoder in {workdir} does not match the config: it has '
                       f'{_describe_decoder(*have)}; config expects {_describe_decoder(*wanted)}')
  decoder = nets.with_precision(precision, lambda: nets.make_decoder(config))
  checkpoints.restore(path, dict(decoder=decoder), f'the decoder ({_describe_decoder(*wanted)})')
  decoder.trainable = False
  return decoder


def _describe_decoder(image_size, channels, width, latent_shape):
  return (f'image {image_size}x{image_size}x{channels}, decoder width {width}, '
          f'latent {list(latent_shape)}')


def generator_checkpoint_shapes(path, prefix='generator'):
  """(image size, channels, width, latent shape) of the project generator saved at `path`."""
  shapes = dict(tf.train.list_variables(path))
  dense = shapes.get(f'{prefix}/dense/kernel/.ATTRIBUTES/VARIABLE_VALUE')
  to_image = shapes.get(f'{prefix}/to_image/kernel/.ATTRIBUTES/VARIABLE_VALUE')
  if dense is None or to_image is None:
    raise ValueError(f'{path} holds no SN-GAN generator (no {prefix}/dense and {prefix}/to_image)')
  blocks = {name.split('/')[2] for name in shapes if name.startswith(f'{prefix}/blocks/')}
  return 4 * 2**len(blocks), int(to_image[-1]), int(dense[1]) // 16, (int(dense[0]),)


def describe(image_size, channels, width, latent_shape):
  return (f'image {image_size}x{image_size}x{channels}, generator width {width}, '
          f'latent {list(latent_shape)}')


def check_generator_checkpoint(path, config_model, image_size, channels):
  saved = generator_checkpoint_shapes(path)
  wanted = (image_size, channels, config_model.gen_width, (config_model.z_dim,))
  if saved != wanted:
    raise ValueError(f'generator checkpoint {path} does not match the config: checkpoint has '
                     f'{describe(*saved)}; config expects {describe(*wanted)}')


# ---- any other model ----------------------------------------------------------------------------
def _load_savedmodel(path):
  """The SavedModel's TensorFlow graph, never its Python: Keras' own loader would rebuild the
  model from its config, which can hold Python (a Lambda layer's marshalled bytecode, custom
  objects); the graph of its traced __call__ computes the same."""
  try:
    module = tf.saved_model.load(path)
  except (OSError, ValueError) as e:
    raise FileNotFoundError(f'cannot load a SavedModel from {path}: '
                            f'{str(e).strip().splitlines()[0]}') from e
  if hasattr(module, '__call__') and callable(module):
    return _Graph(module, module.__call__), False
  signature = module.signatures['serving_default']
  return _Graph(lambda z: list(signature(z).values())[0], signature), False


class _Graph:
  """A loaded SavedModel's function with the variables its traced graphs capture, so that a
  module holding the generator tracks (and an export saves) them."""

  def __init__(self, fn, traced):
    self._fn = fn
    self.traced = traced  # what states its input signature
    found = {}
    for concrete in getattr(traced, 'concrete_functions', None) or [traced]:
      for v in getattr(concrete, 'variables', ()):
        found[id(v)] = v
    self.variables = list(found.values())

  def __call__(self, z):
    return self._fn(z)


def _load_factory(spec):
  module_name, _, fn_name = spec.partition(':')
  if not module_name or not fn_name:
    raise ValueError(f"generator.path {spec!r} is not of the form 'package.module:function'")
  try:
    fn = getattr(importlib.import_module(module_name), fn_name)
  except (ImportError, AttributeError) as e:
    raise ValueError(f'cannot import generator factory {spec!r}: {e}') from e
  if not callable(fn):
    raise ValueError(f'generator factory {spec!r} is a {type(fn).__name__}, not a function')
  try:  # the factory is user code: whatever it raises is reported against generator.path
    model = fn()
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(f'generator factory {spec!r} raised {type(e).__name__}: {e}') from e
  if model is None or not callable(model):
    raise ValueError(f'generator factory {spec!r} returned {type(model).__name__}, not a '
                     'callable model')
  return model, True
