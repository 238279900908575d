"""Deterministic autoencoder whose decoder the retrofit Hat EBM makes sampleable (paper "Retrofit").

Encoder: hat-style blocks (stem without downsampling, one down block, two blocks), ReLU, 3x3 conv
to one channel: an image-shaped latent at half the resolution (16x16x1 for 32x32 images, 8x8x1 for
the 16x16 digits), projected onto the sphere of radius sqrt(m), m its size (16 for 16x16x1), where
<<<<<<< HEAD
N(0, I) latents also concentrate. Decoder (the authors' release, GenDecoder32): a residual stem
block at the latent resolution (3x3 conv, BN, ReLU, 3x3 conv; 1x1 conv shortcut), one upsampling
generator block to the image size, two generator blocks without upsampling, BN, ReLU, 3x3 conv,
tanh.
Trained with 1000 * MSE between the reconstruction of data + 0.02 N(0, I) and the clean data.
=======
N(0, I) latents also concentrate. Decoder: the 32x32 generator with its dense layer replaced by a
3x3 conv stem and its first two up-blocks not upsampling (one upsampling, to the image size).
Trained with 1000 * MSE between x and the decoding of its noisy latent sphere(E(x) + s N(0, I)),
s = training.latent_noise (the authors' release: 2e-2, added to the latent, not to the image).
>>>>>>> r14b
"""
import json
import os

import numpy as np
import tensorflow as tf

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import data as data_lib
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tf_hat_ebm.langevin import project_to_sphere
from tpu_utils.strategy import check_batch_split


def autoencoder_config():
  """base_config() with the autoencoder fields; CIFAR-10 settings (configs override)."""
  config = config_lib.base_config()
  config.name = 'autoencoder'
  config.experiment = 'autoencoder'
  config.model.enc_width = 256
  config.model.gen_width = 256        # decoder width
  config.model.out_factor = 2.0       # as the synthesis / retrofit generators
  config.training.batch_size = 128
  config.training.num_epochs = 100
  # The decoder is trained on sphere(E(x) + latent_noise * N(0, I)); the release's 2e-2.
  config.training.latent_noise = 2e-2
  config.training.recon_factor = 1000.0
  config.training.eval_every = 0      # set by the configs to one epoch of steps
  config.training.eval_examples = 10_000  # of the train split, for the per-epoch train error
  config.training.bank_size = 0       # unused
  config.optim.ae_lr = 1e-4
  return config


def latent_shape_for(image_size):
  return (image_size // 2, image_size // 2, 1)


class StemBlock(nets.DiscriminatorBlock):
  """The hat network's stem (no leading ReLU, 1x1 conv shortcut) without its downsampling."""

  def __init__(self, out_channels, **kwargs):
    super().__init__(out_channels, stem=True, **kwargs)

  def call(self, x):
    return self.c2(tf.nn.relu(self.c1(x))) + self.c_sc(x)


class Encoder(tf.keras.Model):

  def __init__(self, image_size=32, channels=3, width=256, init='glorot', name='encoder', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels = image_size, channels
    self.latent_shape = latent_shape_for(image_size)
    self.blocks = [StemBlock(width, init=init, name='block0'),
                   nets.DiscriminatorBlock(width, downsample=True, init=init, name='block1'),
                   nets.DiscriminatorBlock(width, init=init, name='block2'),
                   nets.DiscriminatorBlock(width, init=init, name='block3')]
    self.to_latent = nets.conv(1, 3, init=nets._PLAIN_INIT, name='to_latent')  # pylint: disable=protected-access

  def call(self, x):
    h = x
    for block in self.blocks:
      h = block(h)
    return project_to_sphere(self.to_latent(tf.nn.relu(h)))

  def build_for_input(self):
    self(tf.zeros([1, self.image_size, self.image_size, self.channels]))
    return self


class DecoderStemBlock(tf.keras.layers.Layer):
  """3x3 conv, BN, ReLU, 3x3 conv, plus a 1x1 conv shortcut; no upsampling (the release's)."""

  def __init__(self, out_channels, init='glorot', **kwargs):
    super().__init__(**kwargs)
    self.c1 = nets.conv(out_channels, 3, init=nets.residual_init(init), name='c1')
    self.b2 = nets.fixed_batch_norm('b2')
    self.c2 = nets.conv(out_channels, 3, init=nets.residual_init(init), name='c2')
    plain = nets._PLAIN_INIT  # pylint: disable=protected-access
    self.c_sc = nets.conv(out_channels, 1, init=plain, name='c_sc')

  def call(self, z):
    return self.c2(tf.nn.relu(self.b2(self.c1(z), training=False))) + self.c_sc(z)


class Decoder(tf.keras.Model):
  """z [batch, s/2, s/2, 1] -> image [batch, s, s, channels] in out_factor * (-1, 1)."""

  def __init__(self, image_size=32, channels=3, width=256, out_factor=2.0, init='glorot',
               name='decoder', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels, self.width = image_size, channels, width
    self.out_factor = out_factor
    self.latent_shape = latent_shape_for(image_size)
    self.blocks = [DecoderStemBlock(width, init=init, name='block0'),
                   nets.GeneratorBlock(width, upsample=True, init=init, name='block1'),
                   nets.GeneratorBlock(width, upsample=False, init=init, name='block2'),
                   nets.GeneratorBlock(width, upsample=False, init=init, name='block3')]
    self.bn = nets.fixed_batch_norm('bn_out')
    self.to_image = nets.conv(channels, 3, init=nets._PLAIN_INIT, name='to_image')  # pylint: disable=protected-access

  def call(self, z):
    h = z
    for block in self.blocks:
      h = block(h)
    h = self.to_image(tf.nn.relu(self.bn(h, training=False)))
    return self.out_factor * tf.tanh(h)

  def build_for_input(self):
    self(tf.zeros([1, *self.latent_shape]))
    return self


def make_encoder(config):
  return Encoder(config.data.image_size, config.data.channels, config.model.enc_width,
                 nets.model_init(config.model)).build_for_input()


def make_decoder(config):
  return Decoder(config.data.image_size, config.data.channels, config.model.gen_width,
                 config.model.out_factor, nets.model_init(config.model)).build_for_input()


def perturb_latent(z, latent_noise, rng):
  """sphere(z + latent_noise * N(0, I)): the decoder's training latent (z itself when 0).

  Training the decoder on a neighbourhood of each code smooths G over the sphere, so that gradient
  steps in Z (the retrofit's Langevin chain) can move towards data instead of stalling. The release
  decodes E(x) + noise as is; the projection keeps every training latent on the sphere.
  """
  if latent_noise <= 0:
    return z
  return project_to_sphere(learning.perturb_data(z, latent_noise, rng))


class AutoencoderTask:
  """Encoder and decoder trained on 1000 * MSE; evaluate() gives train/test reconstruction MSE."""

  metric_names = ('loss', 'mse', 'grad_norm')
  progress_metrics = ('mse',)

  def __init__(self, config, strategy):
    self.config, self.strategy = config, strategy
    self.global_batch = config.training.batch_size
    self.batch = check_batch_split(config.training.batch_size, strategy)
    with strategy.scope():
      self.encoder = make_encoder(config)
      self.decoder = make_decoder(config)
      self.variables = self.encoder.trainable_variables + self.decoder.trainable_variables
      self.lr_scale = tf.Variable(1.0, trainable=False, name='lr_scale')  # lowered by rollback
      self.opt = optim.make_adam(config.optim, config.optim.ae_lr, self.variables, self.lr_scale)
      self.rng = tf.random.Generator.from_seed(config.seed)
      self.grid_rng = tf.random.Generator.from_seed(config.seed + 1)
    self._eval_fn = None

  def checkpoint_items(self):
    return dict(encoder=self.encoder, decoder=self.decoder, optimizer=self.opt, rng=self.rng,
                lr_scale=self.lr_scale)

  def initialize(self):
    pass

  def learning_rates(self):
    return {'ae_lr': optim.current_learning_rate(self.opt)}

  def replica_step(self, images):
    tcfg = self.config.training

    def loss_fn():
      z = perturb_latent(self.encoder(images), tcfg.latent_noise, self.rng)
      return learning.generator_loss(self.decoder(z), images, tcfg.recon_factor,
                                     self.global_batch)

    loss, norm = learning.apply_gradients(self.opt, loss_fn, self.variables)
    loss = loss * self.strategy.num_replicas_in_sync
    return dict(loss=loss, mse=loss / tcfg.recon_factor, grad_norm=norm)

  def reconstruction_mse(self, split, limit=None):
    """Mean squared error per pixel of the (noise-free) reconstructions of a split."""
    if self._eval_fn is None:
      self._eval_fn = tf.function(lambda x: tf.reduce_sum(
          tf.square(self.decoder(self.encoder(x)) - x)))
    total, count = 0.0, 0
    for x in data_lib.eval_dataset(self.config.data, split, self.config.training.batch_size):
      total += float(self._eval_fn(x))
      count += int(np.prod(x.shape))
      if limit and count >= limit * np.prod(x.shape[1:]):
        break
    return total / count

  def evaluate(self):
    tcfg, data = self.config.training, self.config.data
    return {'train_mse': self.reconstruction_mse(data.train_split, tcfg.eval_examples),
            'test_mse': self.reconstruction_mse(data.test_split)}

  def grid_samples(self, num):
    """{'x': reconstructions of the first test images, 'g_z': decoder of N(0, I) latents}."""
    test = next(iter(data_lib.eval_dataset(self.config.data, self.config.data.test_split, num)))
    self.grid_rng.reset_from_seed(self.config.seed + 1)
    z = self.grid_rng.normal([num, *self.decoder.latent_shape])
    return {'x': self.decoder(self.encoder(test)).numpy(), 'g_z': self.decoder(z).numpy()}


def load_decoder(workdir, config):
  """The frozen decoder of the autoencoder run in `workdir`, checked against `config`."""
  latest = tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints'))
  if latest is None:
    raise FileNotFoundError(f'no autoencoder checkpoint in {workdir}/checkpoints; train one with '
                            'experiments/train_autoencoder.py first')
  data = config.data
  wanted = (data.image_size, data.channels, config.model.gen_width,
            latent_shape_for(data.image_size))
  saved_cfg = os.path.join(workdir, 'config.json')
  if tf.io.gfile.exists(saved_cfg):
    with tf.io.gfile.GFile(saved_cfg) as f:
      saved = json.load(f)
    size = saved['data']['image_size']
    have = (size, saved['data']['channels'], saved['model']['gen_width'], latent_shape_for(size))
    if have != wanted:
      raise ValueError(f'autoencoder in {workdir} does not match the config: it has '
                       f'{_describe(*have)}; config expects {_describe(*wanted)}')
  decoder = make_decoder(config)
  try:
    tf.train.Checkpoint(decoder=decoder).restore(latest).expect_partial() \
        .assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError) as e:
    raise ValueError(f'cannot restore the decoder of {latest} for {_describe(*wanted)}: '
                     f'{str(e).strip().splitlines()[0]}') from e
  decoder.trainable = False
  return decoder


def _describe(image_size, channels, width, latent_shape):
  return (f'image {image_size}x{image_size}x{channels}, decoder width {width}, '
          f'latent {list(latent_shape)}')
