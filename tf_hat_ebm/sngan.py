"""SN-GAN baseline (Miyato et al. 2018, Mimicry settings): the pretrained GAN that refinement needs.

Generator: the project's SN-GAN generator with out_factor 1.0. Discriminator: the hat network's
layout with spectral normalisation on every convolution and on the dense head, which has a bias and
sees the features summed over space (Mimicry's; the hat network averages). Hinge loss from TF-GAN,
Adam(2e-4, beta1 = 0, beta2 = 0.9) with both rates decayed linearly to 0, n_dis = 5 discriminator
steps per generator step; one trainer step is one generator step (Mimicry counts 100k of those).

Keras' SpectralNormalization divides the stored kernel by its spectral norm (one power iteration)
at every call with training=True and uses the stored kernel as is otherwise, so the discriminator
is called with training=True while training and training=False when frozen (DDLS).
"""
import os

import tensorflow as tf
from tensorflow_gan.python.losses import losses_impl as tfgan_losses

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tpu_utils.strategy import check_batch_split

layers = tf.keras.layers


def sngan_config():
  """base_config() with the SN-GAN fields and Mimicry's CIFAR-10 settings (configs override)."""
  config = config_lib.base_config()
  config.name = 'sngan'
  config.experiment = 'sngan'
  config.model.gen_width = 256        # ngf (32x32); 1024 at 64x64
  config.model.disc_width = 128       # ndf (32x32); 1024 at 64x64
  config.model.z_dim = 128
  config.model.out_factor = 1.0       # refinement's generator: tanh in [-1, 1]
  # Mimicry's generator normalises with batch statistics in training; with the Hat EBM's fixed
  # statistics the adversarial updates killed every ReLU of the digits generator within 100 steps.
  config.model.gen_batch_stats = True
  config.training.batch_size = 64
  config.training.num_steps = 100_000  # generator steps
  config.training.n_dis = 5
  config.optim.gen_lr = 2e-4
  config.optim.disc_lr = 2e-4
  config.optim.beta1 = 0.0
  config.optim.beta2 = 0.9
  # Mimicry: both learning rates decay linearly to 0 over the run ('constant': gen_lr's schedule
  # and disc_lr as they are).
  config.optim.lr_decay = 'linear'
  return config


LR_DECAYS = ('linear', 'constant')


def learning_rates(config):
  """(generator, discriminator) learning rates or schedules of their optimizers' steps.

  Linear decay as Mimicry's: the rate of generator step t is lr * (1 - t / num_steps); the
  discriminator takes n_dis steps per generator step, so its schedule runs n_dis times longer.
  """
  ocfg, tcfg = config.optim, config.training
  if ocfg.lr_decay not in LR_DECAYS:
    raise ValueError(f'optim.lr_decay must be one of {LR_DECAYS}, not {ocfg.lr_decay!r}')
  if ocfg.lr_decay == 'constant':
    return optim.network_schedule(ocfg, 'gen'), ocfg.disc_lr
  return (optim.linear_decay(ocfg.gen_lr, tcfg.num_steps),
          optim.linear_decay(ocfg.disc_lr, tcfg.num_steps * tcfg.n_dis))


class SpectralNormalization(layers.SpectralNormalization):
  """Keras' spectral normalisation, usable inside `strategy.run` graphs.

  Keras 2.15's normalize_weights branches in Python on a tensor (skip an all-zero kernel), which
  fails when the layer is traced without AutoGraph (as in the trainer's replica step). The same
  update here: one power iteration (by default), kernel <- kernel / sigma, u kept for the next call.
  """

  def normalize_weights(self):
    weights = tf.reshape(self.kernel, [-1, self.kernel_shape[-1]])
    u = self.vector_u
    for _ in range(self.power_iterations):
      v = tf.math.l2_normalize(tf.matmul(u, weights, transpose_b=True))
      u = tf.math.l2_normalize(tf.matmul(v, weights))
    u, v = tf.stop_gradient(u), tf.stop_gradient(v)
    sigma = tf.matmul(tf.matmul(v, weights), u, transpose_b=True)
    sigma = tf.where(sigma > 0, sigma, tf.ones_like(sigma))  # an all-zero kernel stays as it is
    self.vector_u.assign(tf.cast(u, self.vector_u.dtype))
    self.kernel.assign(tf.cast(tf.reshape(self.kernel / sigma, self.kernel_shape),
                               self.kernel.dtype))


def sn_conv(channels, kernel, init=nets._RESIDUAL_INIT, name=None):  # pylint: disable=protected-access
  return SpectralNormalization(nets.conv(channels, kernel, init), name=name)


class SpatialSumHead(layers.Layer):
  """Mimicry's SN-GAN head: a spectral-normed dense(1) on the ReLU features summed over space.

  The hat network (whose blocks the discriminator shares) hands its head the spatial mean; times
  the number of positions that is the sum.
  """

  def __init__(self, positions, **kwargs):
    super().__init__(**kwargs)
    self.positions = positions
    self.dense = SpectralNormalization(
        layers.Dense(1, kernel_initializer=nets._PLAIN_INIT()), name='dense')  # pylint: disable=protected-access

  def call(self, mean_features):
    return self.dense(mean_features * self.positions)


class SNDiscriminator(nets.HatNetwork):
  """D(x): image -> logit [batch]. The hat network's blocks with spectral-normed convs and head.

  Mimicry's blocks: hidden channels = in channels, initialisation with gain sqrt(2).
  """

  def __init__(self, image_size=32, channels=3, width=128, name='discriminator', **kw):
    super().__init__(image_size, channels, width, conv_factory=sn_conv, hidden='in',
                     init='mimicry', name=name, **kw)
    downsamples = sum(block.downsample for block in self.blocks)
    self.head = SpatialSumHead((image_size // 2**downsamples)**2, name='head')


def make_discriminator(config_model, image_size, channels):
  return SNDiscriminator(image_size, channels, config_model.disc_width).build_for_input()


def discriminator_loss(d_real, d_fake, global_batch_size):
  """TF-GAN's hinge loss mean(relu(1 - D(real))) + mean(relu(1 + D(fake))), over the global batch."""
  return tfgan_losses.wasserstein_hinge_discriminator_loss(
      d_real, d_fake, real_weights=1.0 / global_batch_size,
      generated_weights=1.0 / global_batch_size, loss_collection=None,
      reduction=tf.compat.v1.losses.Reduction.SUM)


def generator_loss(d_fake, global_batch_size):
  """TF-GAN's hinge generator loss -mean D(G(z)), over the global batch."""
  return tfgan_losses.wasserstein_hinge_generator_loss(
      d_fake, weights=1.0 / global_batch_size, loss_collection=None,
      reduction=tf.compat.v1.losses.Reduction.SUM)


class SNGANTask:
  """Models, optimizers and the per-replica step (n_dis D steps, then one G step) of SN-GAN."""

  metric_names = ('disc_loss', 'gen_loss', 'disc_real', 'disc_fake', 'disc_grad_norm',
                  'gen_grad_norm')
  progress_metrics = ('disc_loss', 'gen_loss')

  def __init__(self, config, strategy):
    self.config, self.strategy = config, strategy
    tcfg = config.training
    self.n_dis = int(tcfg.n_dis)
    self.batches_per_step = self.n_dis   # the trainer's iterator yields n_dis real batches per step
    self.global_batch = tcfg.batch_size
    self.batch = check_batch_split(tcfg.batch_size, strategy)
    data = config.data
    with strategy.scope():
      self.generator = nets.make_generator(config.model, data.image_size, data.channels)
      self.discriminator = make_discriminator(config.model, data.image_size, data.channels)
      self.lr_scale = tf.Variable(1.0, trainable=False, name='lr_scale')  # lowered by rollback
      gen_lr, disc_lr = learning_rates(config)
      self.gen_opt = optim.make_adam(config.optim, gen_lr, self.generator.trainable_variables,
                                     self.lr_scale)
      self.disc_opt = optim.make_adam(config.optim, disc_lr,
                                      self.discriminator.trainable_variables, self.lr_scale)
      self.rng = tf.random.Generator.from_seed(config.seed)
      self.grid_rng = tf.random.Generator.from_seed(config.seed + 1)

  def checkpoint_items(self):
    return dict(generator=self.generator, discriminator=self.discriminator,
                gen_optimizer=self.gen_opt, disc_optimizer=self.disc_opt, rng=self.rng,
                lr_scale=self.lr_scale)

  def initialize(self):
    pass

  def learning_rates(self):
    return {'gen_lr': optim.current_learning_rate(self.gen_opt),
            'disc_lr': optim.current_learning_rate(self.disc_opt)}

  def _latents(self):
    return self.rng.normal([self.batch, *self.generator.latent_shape])

  def discriminator_step(self, real, fake):
    """One Adam step on the hinge loss; returns (loss, grad norm, D(real), D(fake))."""
    logits = {}

    def loss():
      logits['real'] = self.discriminator(real, training=True)
      logits['fake'] = self.discriminator(fake, training=True)
      return discriminator_loss(logits['real'], logits['fake'], self.global_batch)

    value, norm = learning.apply_gradients(self.disc_opt, loss,
                                           self.discriminator.trainable_variables,
                                           self.config.optim.get('disc_clip_norm'))
    return value, norm, logits['real'], logits['fake']

  def generator_step(self):
    """One Adam step on -mean D(G(z)) for fresh latents; returns (loss, grad norm)."""
    return learning.apply_gradients(
        self.gen_opt,
        lambda: generator_loss(
            self.discriminator(self.generator(self._latents(), training=True), training=True),
            self.global_batch),
        self.generator.trainable_variables, self.config.optim.gen_clip_norm,
        self.config.optim.gen_clip_mode)

  def replica_step(self, images):
    # n_dis real batches arrive at once (batches_per_step); each D step gets fresh fakes.
    real = tf.reshape(images, [self.n_dis, self.batch, *images.shape[1:]])
    for i in range(self.n_dis):
      fake = tf.stop_gradient(self.generator(self._latents(), training=True))
      d_value, d_norm, d_real, d_fake = self.discriminator_step(real[i], fake)
    g_value, g_norm = self.generator_step()
    replicas = self.strategy.num_replicas_in_sync
    return dict(disc_loss=d_value * replicas, gen_loss=g_value * replicas,
                disc_real=tf.reduce_mean(d_real), disc_fake=tf.reduce_mean(d_fake),
                disc_grad_norm=d_norm, gen_grad_norm=g_norm)

  def grid_samples(self, num):
    """Fixed-seed G(z) for the image grids: {'x'} numpy."""
    self.grid_rng.reset_from_seed(self.config.seed + 1)
    z = self.grid_rng.normal([num, *self.generator.latent_shape])
    return {'x': self.generator(z, training=False).numpy()}


# ---- the pretrained SN-GAN for refinement and DDLS ---------------------------------------------
def load_pretrained(workdir, config_model, image_size, channels):
  """(G, D) of the SN-GAN run in `workdir` (latest checkpoint), frozen, built from config_model.

  A checkpoint of other networks (resolution, width, latent size) fails with a message naming the
  checkpoint's shapes and the config's, before anything trains.
  """
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  latest = tf.train.latest_checkpoint(ckpt_dir)
  if latest is None:
    raise FileNotFoundError(f'no SN-GAN checkpoint in {ckpt_dir}; train one with '
                            'experiments/train_sngan.py first')
  check_generator_checkpoint(latest, config_model, image_size, channels)
  generator = nets.make_generator(config_model, image_size, channels)
  discriminator = (make_discriminator(config_model, image_size, channels)
                   if config_model.get('disc_width') else None)  # 0: none (an imported G)
  items = dict(generator=generator)
  if discriminator is not None:
    items['discriminator'] = discriminator
  try:
    tf.train.Checkpoint(**items).restore(latest).expect_partial().assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError) as e:
    raise ValueError(f'cannot restore the SN-GAN of {latest}: '
                     f'{str(e).strip().splitlines()[0]}') from e
  for model in items.values():
    model.trainable = False
  return generator, discriminator


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
