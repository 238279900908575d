"""SN-GAN baseline (Miyato et al. 2018, Mimicry settings): the pretrained GAN that refinement needs.

Generator: the project's SN-GAN generator with out_factor 1.0. Discriminator: nets.SNDiscriminator.
Hinge loss from TF-GAN, Adam(2e-4, beta1 = 0, beta2 = 0.9) with both rates decayed linearly to 0,
n_dis = 5 discriminator steps per generator step; one trainer step is one generator step (Mimicry
counts 100k of those). D is called with training=True while training (spectral normalisation
updates its estimate) and training=False when frozen.
For small data sets (training.diffaugment, training.gen_ema): DiffAugment on every input of D
(augment.py), real and generated, in D's steps and G's; and an exponential moving average of G's
weights, checkpointed as `generator` (what sampling, refinement and DDLS read) beside the trained
weights, `generator_train`.
"""
import tensorflow as tf

from tf_hat_ebm import augment
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tf_hat_ebm import tfgan_compat
from tf_hat_ebm import validation
from tf_hat_ebm.tasks import base

LR_DECAYS = validation.LR_DECAYS


def learning_rates(config):
  """(generator, discriminator) learning rates or schedules of their optimizers' steps.

  Linear decay as Mimicry's: the rate of generator step t is lr * (1 - t / num_steps); the
  discriminator takes n_dis steps per generator step, so its schedule runs n_dis times longer.
  """
  ocfg, tcfg = config.optim, config.training
  if ocfg.lr_decay not in LR_DECAYS:
    raise ValueError(f'optim.lr_decay must be one of {LR_DECAYS}, not {ocfg.lr_decay!r}')
  if ocfg.lr_decay == 'constant':
    return float(ocfg.gen_lr), float(ocfg.disc_lr)
  return (optim.linear_decay(ocfg.gen_lr, tcfg.num_steps),
          optim.linear_decay(ocfg.disc_lr, tcfg.num_steps * tcfg.n_dis))


def discriminator_loss(d_real, d_fake, global_batch_size):
  """TF-GAN's hinge loss mean(relu(1 - D(real))) + mean(relu(1 + D(fake))) over the global
  batch."""
  weight = 1.0 / global_batch_size
  return tfgan_compat.hinge_discriminator_loss(d_real, d_fake, weight, weight)


def generator_loss(d_fake, global_batch_size):
  """TF-GAN's hinge generator loss -mean D(G(z)), over the global batch."""
  return tfgan_compat.hinge_generator_loss(d_fake, 1.0 / global_batch_size)


class SNGANTask(base.Task):
  """Networks, optimizers and the per-replica step (n_dis D steps, then one G step) of SN-GAN."""

  metric_names = ('disc_loss', 'gen_loss', 'disc_real', 'disc_fake', 'disc_grad_norm',
                  'gen_grad_norm')
  progress_metrics = ('disc_loss', 'gen_loss')

  def __init__(self, config, strategy):
    self.n_dis = int(config.training.n_dis)
    self.batches_per_step = self.n_dis  # the trainer's iterator yields n_dis real batches per step
    super().__init__(config, strategy)

  def build(self):
    config, data = self.config, self.config.data
    for net in ('gen', 'disc'):
      learning.check_clip_mode(config.optim[f'{net}_clip_mode'], f'optim.{net}_clip_mode')
    self.generator = nets.make_generator(config.model, data.image_size, data.channels)
    self.discriminator = nets.make_discriminator(config.model, data.image_size, data.channels)
    self.policy = config.training.get('diffaugment', '')
    self.ema = float(config.training.get('gen_ema', 0.0))
    self.networks = dict(generator=self.generator, discriminator=self.discriminator)
    self.sampler = self.generator  # the G that sampling and the grids use
    if self.ema:
      self.sampler = learning.ema_variables(
          lambda: nets.make_generator(config.model, data.image_size, data.channels))
      self.networks = dict(generator=self.sampler, generator_train=self.generator,
                           discriminator=self.discriminator)
    gen_lr, disc_lr = learning_rates(config)
    self.adam('gen', self.generator.trainable_variables, gen_lr)
    self.adam('disc', self.discriminator.trainable_variables, disc_lr)

  def initialize(self):
    """Fresh start: the average starts at G's initial weights."""
    if self.ema:
      self.strategy.run(tf.function(
          lambda: learning.ema_update(self.sampler, self.generator, 0.0)))

  def discriminate(self, images):
    """D(DiffAugment(images)) while training."""
    return self.discriminator(augment.diff_augment(images, self.rng, self.policy), training=True)

  def _latents(self):
    return self.rng.normal([self.batch, *self.generator.latent_shape])

  def discriminator_step(self, real, fake):
    """One Adam step on the hinge loss; returns (loss, grad norm, D(real), D(fake))."""
    logits = {}

    def loss():
      logits['real'] = self.discriminate(real)
      logits['fake'] = self.discriminate(fake)
      return discriminator_loss(logits['real'], logits['fake'], self.global_batch)

    ocfg = self.config.optim
    value, norm = learning.apply_gradients(self.optimizers['disc'], loss,
                                           self.discriminator.trainable_variables,
                                           ocfg.disc_clip_norm, ocfg.disc_clip_mode)
    return value, norm, logits['real'], logits['fake']

  def generator_step(self):
    """One Adam step on -mean D(G(z)) for fresh latents; returns (loss, grad norm)."""
    return learning.apply_gradients(
        self.optimizers['gen'],
        lambda: generator_loss(
            self.discriminate(self.generator(self._latents(), training=True)),
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
    if self.ema:
      updates = self.optimizers['gen'].iterations - 1  # this step's, from 0
      learning.ema_update(self.sampler, self.generator, learning.ema_decay(self.ema, updates))
    replicas = self.strategy.num_replicas_in_sync
    return dict(disc_loss=d_value * replicas, gen_loss=g_value * replicas,
                disc_real=tf.reduce_mean(d_real), disc_fake=tf.reduce_mean(d_fake),
                disc_grad_norm=d_norm, gen_grad_norm=g_norm)

  def grid_samples(self, num):
    """Fixed-seed G(z) for the image grids: {'x'} numpy."""
    self.grid_rng.reset_from_seed([self.config.seed + 1])
    z = self.grid_rng.normal([num, *self.generator.latent_shape])
    return {'x': self.sampler(z, training=False).numpy()}
