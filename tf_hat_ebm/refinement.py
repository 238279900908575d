"""Joint Hat EBM over a frozen generator: refinement of a pretrained GAN, retrofit of a decoder.

Energy U(Y, Z) = H(G(Z) + Y)/T with G frozen (inference mode) and only the hat network H trained.
Per training step, on every replica:
  X+ = data + data_eps * N(0, I);  (Z_K, Y_K) by K alternating Langevin iterations (Y then Z) from
  Y0 = 0, Z0 ~ N(0, I);  X- = G(Z_K) + Y_K;  theta <- Adam(grad (mean H(X+) - mean H(X-))/T).

The generator is named in `config.generator`; any Keras model (or SavedModel) mapping latents to
images will do, which is the paper's point: the Hat EBM needs no probabilistic generator.
  source='sngan'        path = workdir of experiments/train_sngan.py (also gives D for DDLS)
  source='autoencoder'  path = workdir of experiments/train_autoencoder.py (its decoder)
  source='savedmodel'   path = a SavedModel directory (Keras or tf.Module with __call__)
  source='factory'      path = 'package.module:function'; function() returns a Keras model
For 'savedmodel' and 'factory' the config declares latent_shape and output_range; outputs are
mapped linearly from output_range to the [-1, 1] of the data.
"""
import importlib

import ml_collections
import tensorflow as tf

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import langevin
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tpu_utils.strategy import check_batch_split

GENERATOR_SOURCES = ('sngan', 'autoencoder', 'savedmodel', 'factory')


def joint_langevin_config(**overrides):
  # latent_first: each iteration a Y step, then a Z step (paper), or Z first (the authors' release).
  cfg = config_lib.langevin_config(latent_step_size=5e-3, use_residual=True, latent_first=False)
  cfg.update(overrides)
  return cfg


def joint_config():
  """base_config() with the joint fields: generator source, latent eps, DDLS; CIFAR-10 refine."""
  config = config_lib.base_config()
  config.name = 'refinement'
  config.experiment = 'joint'
  config.generator = gen = ml_collections.ConfigDict()
  gen.source = 'sngan'
  gen.path = ''                       # workdir, SavedModel directory or 'module:function'
  gen.latent_shape = ()               # savedmodel / factory only: e.g. (128,) or (16, 16, 1)
  gen.output_range = (-1.0, 1.0)      # savedmodel / factory only: range of the model's outputs
  # Keep latents on the sphere of radius sqrt(m) (m = latent size): the joint chain projects Z0 and
  # every Z step onto it, and G's input too. For a decoder trained only on such latents (the
  # retrofit autoencoder); Z0 ~ N(0, I) already lies near that sphere. Without it a digits retrofit
  # run walked |Z| out to 10^4, where the decoder extrapolates, and its energies ran away.
  gen.latent_sphere = False
  config.model.out_factor = 1.0       # refinement's SN-GAN: tanh in [-1, 1]
  config.model.disc_width = 128       # of the SN-GAN whose D serves DDLS
  config.model.gen_batch_stats = True  # SN-GAN generators normalise with (moving) batch statistics
  config.langevin = joint_langevin_config(steps=250, step_size=1e-4, latent_step_size=5e-3,
                                          temperature=1e-3, prior_sigma=0.25)
  config.sampling = joint_langevin_config(steps=250, step_size=1e-4, latent_step_size=5e-3,
                                          temperature=1e-3, prior_sigma=0.25)
  # DDLS baseline (Che et al. 2020) in the sampling command: eps 0.1 is their step 0.01 in
  # z <- z - (eps/2) grad + sqrt(eps) noise.
  config.ddls = ml_collections.ConfigDict(dict(steps=100, step_size=0.1, noise=True))
  config.training.num_steps = 20_000
  config.training.batch_size = 128
  config.training.bank_size = 0       # unused: the generator is frozen
  config.optim.hat_lr = 1e-5
  return config


# ---- the frozen generator -----------------------------------------------------------------------
class FrozenGenerator(tf.Module):
  """Any latent -> image callable as a frozen generator: latent_shape, outputs mapped to [-1, 1]."""

  def __init__(self, model, latent_shape, output_range=(-1.0, 1.0), keras=True,
               latent_sphere=False, name='frozen'):
    super().__init__(name=name)
    self.model = model
    self.latent_shape = tuple(int(d) for d in latent_shape)
    self.low, self.high = float(output_range[0]), float(output_range[1])
    self.latent_sphere = bool(latent_sphere)
    self._keras = keras
    if keras:
      model.trainable = False

  def __call__(self, z, training=False):
    del training  # always inference mode: G is frozen
    if self.latent_sphere:
      z = langevin.project_to_sphere(z)
    out = self.model(z, training=False) if self._keras else self.model(z)
    out = tf.cast(out, tf.float32)
    if (self.low, self.high) != (-1.0, 1.0):
      out = 2.0 * (out - self.low) / (self.high - self.low) - 1.0
    return out


def _load_savedmodel(path):
  try:
    return tf.keras.models.load_model(path, compile=False), True
  except (ValueError, OSError, KeyError, TypeError):
    pass  # not a Keras SavedModel: a plain tf.Module with a __call__ or serving signature
  try:
    module = tf.saved_model.load(path)
  except (OSError, ValueError) as e:
    raise FileNotFoundError(f'cannot load a SavedModel from {path}: '
                            f'{str(e).strip().splitlines()[0]}') from e
  if hasattr(module, '__call__') and callable(module):
    return module, False
  signature = module.signatures['serving_default']
  return (lambda z: list(signature(z).values())[0]), False


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


def load_generator(config):
  """(frozen generator, SN-GAN discriminator or None) named by config.generator, shape-checked."""
  gcfg, data = config.generator, config.data
  image_shape = (data.image_size, data.image_size, data.channels)
  if gcfg.source not in GENERATOR_SOURCES:
    raise ValueError(f'generator.source must be one of {GENERATOR_SOURCES}, not {gcfg.source!r}')
  if not gcfg.path:
    raise ValueError(f'set generator.path for generator source {gcfg.source!r}')
  discriminator = None
  if gcfg.source == 'sngan':
    from tf_hat_ebm import sngan  # pylint: disable=g-import-not-at-top
    model, discriminator = sngan.load_pretrained(gcfg.path, config.model, data.image_size,
                                                 data.channels)
    generator = FrozenGenerator(model, model.latent_shape, latent_sphere=gcfg.latent_sphere)
  elif gcfg.source == 'autoencoder':
    from tf_hat_ebm import autoencoder  # pylint: disable=g-import-not-at-top
    decoder = autoencoder.load_decoder(gcfg.path, config)
    generator = FrozenGenerator(decoder, decoder.latent_shape, latent_sphere=gcfg.latent_sphere)
  else:
    if not gcfg.latent_shape:
      raise ValueError(f'generator source {gcfg.source!r} needs generator.latent_shape')
    model, keras = (_load_savedmodel(gcfg.path) if gcfg.source == 'savedmodel'
                    else _load_factory(gcfg.path))
    generator = FrozenGenerator(model, gcfg.latent_shape, gcfg.output_range, keras=keras,
                                latent_sphere=gcfg.latent_sphere)
  check_generator(generator, image_shape, f'{gcfg.source} generator {gcfg.path}')
  return generator, discriminator


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


# ---- the task -----------------------------------------------------------------------------------
class JointTask:
  """A hat network trained with the joint sampler over a frozen generator."""

  metric_names = ('energy_diff', 'ebm_loss', 'hat_grad_norm', 'latent_grad_norm',
                  'residual_grad_norm', 'latent_abs', 'residual_abs', 'energy_pos', 'energy_neg')
  progress_metrics = ('energy_diff', 'residual_abs')

  def __init__(self, config, strategy, generator=None):
    self.config, self.strategy = config, strategy
    learning.check_clip_mode(config.optim.hat_clip_mode, 'optim.hat_clip_mode')
    self.global_batch = config.training.batch_size
    self.batch = check_batch_split(config.training.batch_size, strategy)
    self.settings = langevin.JointSettings.from_config(config.langevin)
    self.sampling_settings = langevin.JointSettings.from_config(config.sampling)
    data = config.data
    with strategy.scope():
      # Loaded (and shape-checked) first: a wrong generator fails before anything is built.
      if generator is None:
        self.generator, self.discriminator = load_generator(config)
      else:
        self.generator, self.discriminator = generator, None
      self.hat = nets.make_hat(config.model, data.image_size, data.channels)
      self.lr_scale = tf.Variable(1.0, trainable=False, name='lr_scale')  # lowered by rollback
      self.hat_opt = optim.make_adam(config.optim, optim.network_schedule(config.optim, 'hat'),
                                     self.hat.trainable_variables, self.lr_scale)
      self.rng = tf.random.Generator.from_seed(config.seed)
      self.grid_rng = tf.random.Generator.from_seed(config.seed + 1)

  def checkpoint_items(self):
    # The generator is not saved: it is frozen and comes from config.generator on every start.
    return dict(hat=self.hat, hat_optimizer=self.hat_opt, rng=self.rng, lr_scale=self.lr_scale)

  def initialize(self):
    pass

  def learning_rates(self):
    return {'hat_lr': optim.current_learning_rate(self.hat_opt)}

  def replica_step(self, images):
    tcfg = self.config.training
    x_pos = learning.perturb_data(images, tcfg.data_eps, self.rng)
    _, y, g_z, diag = langevin.sample_joint(self.hat, self.generator, self.rng, self.settings,
                                            batch_size=self.batch)
    x_neg = tf.stop_gradient(g_z + y)
    ebm_value, hat_norm, e_pos, e_neg = learning.ebm_update(
        self.hat, self.hat_opt, x_pos, x_neg, self.settings.temperature, self.global_batch,
        self.config.optim.hat_clip_norm, self.config.optim.hat_clip_mode)
    return dict(energy_diff=e_pos - e_neg,
                ebm_loss=ebm_value * self.strategy.num_replicas_in_sync, hat_grad_norm=hat_norm,
                energy_pos=e_pos, energy_neg=e_neg, **diag)

  def replica_sample(self, rng, num, settings, z0=None):
    """X = G(Z_K) + Y_K of a fresh joint chain (or one from z0): (X, G(Z_K), Y_K, Z_K)."""
    z, y, g_z, _ = langevin.sample_joint(self.hat, self.generator, rng, settings,
                                         batch_size=num, z0=z0)
    return g_z + y, g_z, y, z

  def grid_samples(self, num):
    """Fixed-seed samples of the training chain for the image grids: {'x', 'g_z', 'y'} numpy."""
    self.grid_rng.reset_from_seed(self.config.seed + 1)
    if getattr(self, '_grid_fn', None) is None:
      self._grid_fn = tf.function(lambda n: self.strategy.run(
          lambda: self.replica_sample(self.grid_rng, n, self.settings)))
    out = [self.strategy.experimental_local_results(t)[0].numpy() for t in self._grid_fn(num)]
    return dict(zip(('x', 'g_z', 'y'), out[:3]))
