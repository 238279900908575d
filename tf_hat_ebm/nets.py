"""SN-GAN ResNet networks (after the Mimicry library) for the Hat EBM.

* The hat network H is the SN-GAN discriminator with every spectral norm removed: image -> scalar.
* The generator G is the SN-GAN generator: latent -> image, `out_factor * tanh(.)`.
* The SN-GAN discriminator D (of the GAN a refinement starts from, and DDLS's) is the hat network's
  layout with spectral normalisation on every convolution and on its dense head.
* The retrofit's deterministic autoencoder: an encoder to an image-shaped latent on a sphere, and
  a decoder back (the authors' release's GenDecoder32 layout).

Both are built from one set of blocks for every resolution (16 for digits, 32, 64, 128) and any
number of image channels; `width` scales the channels (ImageNet "scaled" = 2x, CPU configs smaller).
Batch norm in G is always in inference mode with statistics fixed at mean 0 / variance 1, so the
energy is deterministic; its scale and offset still train (paper, appendix "Architectures").
Layouts, batch-norm epsilon (1e-3) and the default initialisation (Keras' glorot uniform) are those
of the authors' release, whose published models `tf_hat_ebm.release_import` loads.
"""
import math

import tensorflow as tf

from tf_hat_ebm import validation
from tf_hat_ebm.keras_compat import keras
from tf_hat_ebm.langevin import project_to_sphere
from tpu_utils import hardware

layers = keras.layers


# Mimicry initialisation: xavier-uniform with gain sqrt(2) in the residual path, gain 1 elsewhere.
# (Factories: Keras warns when one unseeded initializer instance serves several layers.)
def _RESIDUAL_INIT():
  return keras.initializers.VarianceScaling(2.0, 'fan_avg', 'uniform')


def _PLAIN_INIT():
  return keras.initializers.VarianceScaling(1.0, 'fan_avg', 'uniform')


# config.model.init: 'glorot' is Keras' default glorot uniform everywhere (the authors' release);
# 'mimicry' puts gain sqrt(2) on the residual path's convolutions (Mimicry's SN-GAN).
INITS = validation.INITS


def residual_init(init):
  """Kernel-initializer factory of the residual path's 3x3 convolutions for `init`."""
  if init not in INITS:
    raise ValueError(f'unknown model.init {init!r}; use one of {", ".join(INITS)}')
  return _RESIDUAL_INIT if init == 'mimicry' else _PLAIN_INIT


# Image sizes with an SN-GAN layout; 16 is the digits variant of the 32x32 layout.
check_image_size = validation.check_image_size
SUPPORTED_IMAGE_SIZES = validation.SUPPORTED_IMAGE_SIZES


def conv(channels, kernel, init=_RESIDUAL_INIT, name=None, **kwargs):
  return layers.Conv2D(channels, kernel, padding='same', kernel_initializer=init(), name=name,
                       **kwargs)


def fixed_batch_norm(name=None, epsilon=1e-3):
  """Batch norm frozen at mean 0, variance 1 (always called with training=False).

  epsilon 1e-3 is Keras' default, which the release's generators use; Mimicry's (torch) is 1e-5.
  """
  return layers.BatchNormalization(epsilon=epsilon, name=name)


def batch_norm_epsilon(batch_stats):
  # A generator trained with batch statistics is Mimicry's SN-GAN (torch's epsilon 1e-5).
  return 1e-5 if batch_stats else 1e-3


@tf.custom_gradient
def unfused_relu(x):
  """max(x, 0) with ReLU's gradient: Maximum's own gradient (two broadcasting selects, one for the
  unused zero) was 4-5% of a digits step on CPU. The Maximum keeps the oneDNN remapper from fusing
  the block before's Conv2D + BiasAdd + Add with this ReLU (below)."""
  y = tf.maximum(x, tf.zeros([], x.dtype))

  def grad(dy):
    return tf.raw_ops.ReluGrad(gradients=dy, features=y)
  return y, grad


def upsample(x):
  # Bilinear 2x upsampling with half-pixel centres (torch's align_corners=False).
  shape = tf.shape(x)
  return tf.image.resize(x, [shape[1] * 2, shape[2] * 2], method='bilinear')


def downsample(x):
  return tf.nn.avg_pool2d(x, 2, 2, 'VALID')


class DiscriminatorBlock(layers.Layer):
  """ReLU, 3x3 conv, ReLU, 3x3 conv, [avg-pool]; 1x1 conv shortcut (then pool) when needed.

  `stem=True` is SN-GAN's "optimized" first block: no leading ReLU, always downsamples, and the
  shortcut is pooled before its 1x1 conv. `conv_factory` lets the SN-GAN discriminator wrap the
  convolutions in spectral normalisation; the hat network uses plain convolutions. The first conv
  has `hidden='out'` channels (the release's hat block) or `hidden='in'` (Mimicry's discriminator
  block); they differ only where the channels change (64x64 and 128x128).
  """

  def __init__(self, out_channels, downsample=False, stem=False, conv_factory=conv,
               hidden='out', init='glorot', **kwargs):
    super().__init__(**kwargs)
    if hidden not in ('in', 'out'):
      raise ValueError(f"hidden must be 'in' or 'out', not {hidden!r}")
    self.out_channels = out_channels
    self.downsample = downsample or stem
    self.stem = stem
    self.hidden = hidden
    self._conv_factory = conv_factory
    self._init = residual_init(init)

  def build(self, input_shape):
    in_channels = int(input_shape[-1])
    hidden = self.out_channels if self.stem or self.hidden == 'out' else in_channels
    self.c1 = self._conv_factory(hidden, 3, init=self._init, name='c1')
    self.c2 = self._conv_factory(self.out_channels, 3, init=self._init, name='c2')
    self.learnable_shortcut = self.stem or self.downsample or in_channels != self.out_channels
    if self.learnable_shortcut:
      self.c_sc = self._conv_factory(self.out_channels, 1, init=_PLAIN_INIT, name='c_sc')
    super().build(input_shape)

  def call(self, x):
    # The ReLU by another op: on CPU the oneDNN remapper fuses the block before's Conv2D + BiasAdd
    # + Add with a Relu here although that Add also feeds this block's shortcut, and fails
    # ("remapper failed"), leaving the whole graph unfused.
    h = x if self.stem else unfused_relu(x)
    h = self.c2(tf.nn.relu(self.c1(h)))
    if self.downsample:
      h = downsample(h)
    s = x
    if self.stem:
      s = self.c_sc(downsample(s))
    elif self.learnable_shortcut:
      s = self.c_sc(s)
      if self.downsample:
        s = downsample(s)
    return h + s


class GeneratorBlock(layers.Layer):
  """BN, ReLU, [bilinear 2x], 3x3 conv, BN, ReLU, 3x3 conv; 1x1 conv shortcut ([up] then conv)."""

  def __init__(self, out_channels, upsample=True, batch_stats=False, init='glorot', **kwargs):
    super().__init__(**kwargs)
    self.out_channels = out_channels
    self.upsample = upsample
    self.batch_stats = batch_stats
    self._init = residual_init(init)

  def build(self, input_shape):
    in_channels = int(input_shape[-1])
    epsilon = batch_norm_epsilon(self.batch_stats)
    self.b1 = fixed_batch_norm('b1', epsilon)
    self.c1 = conv(self.out_channels, 3, init=self._init, name='c1')
    self.b2 = fixed_batch_norm('b2', epsilon)
    self.c2 = conv(self.out_channels, 3, init=self._init, name='c2')
    self.learnable_shortcut = self.upsample or in_channels != self.out_channels
    if self.learnable_shortcut:
      self.c_sc = conv(self.out_channels, 1, init=_PLAIN_INIT, name='c_sc')
    super().build(input_shape)

  def call(self, x, training=None):
    bn_training = bool(training) if self.batch_stats else False
    h = tf.nn.relu(self.b1(x, training=bn_training))
    if self.upsample:
      h = upsample(h)
    h = self.c1(h)
    h = self.c2(tf.nn.relu(self.b2(h, training=bn_training)))
    s = x
    if self.learnable_shortcut:
      s = self.c_sc(upsample(s) if self.upsample else s)
    return h + s


def discriminator_layout(image_size, width):
  """[(channels, downsample)] of the blocks after the stem, and the stem's channels."""
  check_image_size(image_size)
  if image_size <= 32:
    # SN-GAN 32x32: stem(w, down), block(w, down), block(w), block(w).
    return width, [(width, True), (width, False), (width, False)]
  # SN-GAN 64/128: stem(w/16, down), down-blocks doubling up to w (+ block(w, w) at 128).
  stem = width // 16
  blocks = [(width // 8, True), (width // 4, True), (width // 2, True), (width, True)]
  if image_size == 128:
    blocks.append((width, False))
  return stem, blocks


def generator_layout(image_size, width):
  """Channels of each up-block: constant width up to 32x32, halving from width at 64/128.

  At 128x128 the first up-block keeps `width` (Mimicry's sngan_128 and the release):
  width -> width -> width/2 -> ... -> width/16.
  """
  check_image_size(image_size)
  num_up = int(math.log2(image_size // 4))
  if image_size <= 32:
    return [width] * num_up
  halving = [width // 2**(i + 1) for i in range(4)]
  return [width] * (num_up - 4) + halving


class HatNetwork(keras.Model):
  """H(x): image -> scalar energy. SN-GAN discriminator with spectral norm removed.

  Head: ReLU, global average pool, dense(1, no bias). Returns shape [batch].
  """

  def __init__(self, image_size=32, channels=3, width=256, conv_factory=conv, hidden='out',
               init='glorot', name='hat', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels, self.width = image_size, channels, width
    stem_channels, layout = discriminator_layout(image_size, width)
    block_args = dict(conv_factory=conv_factory, hidden=hidden, init=init)
    self.blocks = [DiscriminatorBlock(stem_channels, stem=True, name='block0', **block_args)]
    for i, (ch, down) in enumerate(layout):
      self.blocks.append(DiscriminatorBlock(ch, downsample=down, name=f'block{i + 1}',
                                            **block_args))
    self.head = layers.Dense(1, use_bias=False, kernel_initializer=_PLAIN_INIT(), name='head',
                             dtype='float32')

  def call(self, x):
    h = x
    for block in self.blocks:
      h = block(h)
    # Pool and project in float32: under mixed precision the energy keeps full precision.
    h = tf.reduce_mean(tf.cast(tf.nn.relu(h), tf.float32), axis=[1, 2])
    return tf.squeeze(self.head(h), axis=-1)

  def build_for_input(self):
    self(tf.zeros([1, self.image_size, self.image_size, self.channels]))
    return self


class Generator(keras.Model):
  """G(z): latent [batch, z_dim] -> image [batch, size, size, channels] in out_factor*(-1, 1)."""

  def __init__(self, image_size=32, channels=3, width=256, z_dim=128, out_factor=1.0,
               batch_stats=False, init='glorot', name='generator', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels, self.width = image_size, channels, width
    self.z_dim, self.out_factor = z_dim, out_factor
    # batch_stats=True: SN-GAN training (Mimicry) normalises with batch statistics when called
    # with training=True and uses the moving statistics otherwise (frozen, for refinement). The
    # Hat EBM's own generators keep the fixed mean 0 / variance 1 statistics.
    self.batch_stats = batch_stats
    self.dense = layers.Dense(4 * 4 * width, kernel_initializer=_PLAIN_INIT(), name='dense')
    self.blocks = [GeneratorBlock(ch, batch_stats=batch_stats, init=init, name=f'block{i}')
                   for i, ch in enumerate(generator_layout(image_size, width))]
    self.bn = fixed_batch_norm('bn_out', batch_norm_epsilon(batch_stats))
    self.to_image = conv(channels, 3, init=_PLAIN_INIT, name='to_image')

  @property
  def latent_shape(self):
    return (self.z_dim,)

  def call(self, z, training=None):
    h = tf.reshape(self.dense(z), [-1, 4, 4, self.width])
    for block in self.blocks:
      h = block(h, training=training)
    bn_training = bool(training) if self.batch_stats else False
    h = self.to_image(tf.nn.relu(self.bn(h, training=bn_training)))
    return self.out_factor * tf.tanh(tf.cast(h, tf.float32))  # images are float32 always

  def build_for_input(self):
    self(tf.zeros([1, self.z_dim]))
    return self


PRECISIONS = validation.PRECISIONS


def resolve_precision(precision, strategy=None, facts=None):
  """(Keras policy, reason) for config.perf.precision; 'auto' is decided by tpu_utils.hardware.

  'auto' picks bf16 only where the hardware has it natively (TPU, GPU of compute capability >= 8.0,
  CPU with AMX-BF16 or AVX512-BF16): elsewhere emulated bf16 is many times slower than float32.
  """
  return hardware.resolve_precision(precision, strategy, facts)


def with_precision(precision, build_fn):
  """Builds models under a Keras dtype policy (variables float32, compute in `precision`).

  The global policy is restored afterwards: layers keep the policy they were built with, and other
  models in the same process are unaffected.
  """
  if precision not in PRECISIONS:
    raise ValueError(f'unknown precision {precision!r}; use one of {", ".join(PRECISIONS)}')
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(precision)
  try:
    return build_fn()
  finally:
    keras.mixed_precision.set_global_policy(previous)


def make_hat(config_model, image_size, channels):
  return HatNetwork(image_size, channels, config_model.hat_width,
                    init=config_model.init).build_for_input()


# Synthesis generator updates under which G normalises with batch statistics (tasks/synthesis.py).
BATCH_NORM_UPDATES = ('cooperative_bn',)


def synthesis_gen_batch_stats(config):
  """Whether a synthesis run's G normalises with batch statistics (model.gen_batch_stats): its
  config's, or its generator update's when that is a batch-norm one."""
  return (bool(config.model.get('gen_batch_stats', False))
          or config.training.get('generator_update') in BATCH_NORM_UPDATES)


def make_generator(config_model, image_size, channels):
  return Generator(image_size, channels, config_model.gen_width, config_model.z_dim,
                   config_model.out_factor,
                   batch_stats=config_model.get('gen_batch_stats', False),
                   init=config_model.init).build_for_input()


# ---- SN-GAN discriminator ----------------------------------------------------------------------
# Keras' SpectralNormalization divides the stored kernel by its spectral norm (one power
# iteration) at every call with training=True and uses the stored kernel as is otherwise: D is
# called with training=True while training and training=False when frozen (DDLS).
class SpectralNormalization(layers.SpectralNormalization):
  """Keras' spectral normalisation, usable inside `strategy.run` graphs, the same on every Keras 2.

  Keras 2.15's normalize_weights branches in Python on a tensor (skip an all-zero kernel), which
  fails when the layer is traced without AutoGraph (as in the trainer's replica step); tf-keras
  2.16+ changed its contract (returns the kernel for a caller to assign). The same update here on
  both: one power iteration (by default), kernel <- kernel / sigma, u kept for the next call.
  """

  def build(self, input_shape):
    # Keras 2.15's build; tf-keras 2.16+'s makes its input spec with TensorFlow's Keras, Keras 3
    # there, and fails. The wrapped layer is a convolution or dense layer: it has a kernel.
    layers.Wrapper.build(self, input_shape)
    self.input_spec = layers.InputSpec(shape=[None] + tf.TensorShape(input_shape)[1:])
    self.kernel = self.layer.kernel
    self.kernel_shape = self.kernel.shape.as_list()
    # The kernel's variable dtype: inside a mixed policy's call tf-keras 2.16+ reports an
    # AutoCastVariable's dtype as the compute dtype, and a bfloat16 u fails to restore a float32 D.
    self.vector_u = self.add_weight(
        shape=(1, self.kernel_shape[-1]), name='vector_u',
        dtype=getattr(self.kernel, 'true_dtype', self.kernel.dtype),
        initializer=keras.initializers.TruncatedNormal(stddev=0.02), trainable=False)

  def call(self, inputs, training=False):
    if training:
      self.normalize_weights()
    return self.layer(inputs)

  def normalize_weights(self):
    weights = tf.reshape(self.kernel, [-1, self.kernel_shape[-1]])
    u = tf.cast(self.vector_u, weights.dtype)  # the kernel is read in the compute dtype
    for _ in range(self.power_iterations):
      v = tf.math.l2_normalize(tf.matmul(u, weights, transpose_b=True))
      u = tf.math.l2_normalize(tf.matmul(v, weights))
    u, v = tf.stop_gradient(u), tf.stop_gradient(v)
    sigma = tf.matmul(tf.matmul(v, weights), u, transpose_b=True)
    sigma = tf.where(sigma > 0, sigma, tf.ones_like(sigma))  # an all-zero kernel stays as it is
    self.vector_u.assign(tf.cast(u, self.vector_u.dtype))
    self.kernel.assign(tf.cast(tf.reshape(self.kernel / sigma, self.kernel_shape),
                               self.kernel.dtype))


def sn_conv(channels, kernel, init=_RESIDUAL_INIT, name=None):
  return SpectralNormalization(conv(channels, kernel, init), name=name)


class SpatialSumHead(layers.Layer):
  """Mimicry's SN-GAN head: a spectral-normed dense(1) on the ReLU features summed over space.

  The hat network (whose blocks the discriminator shares) hands its head the spatial mean; times
  the number of positions that is the sum.
  """

  def __init__(self, positions, **kwargs):
    super().__init__(**kwargs)
    self.positions = positions
    self.dense = SpectralNormalization(
        layers.Dense(1, kernel_initializer=_PLAIN_INIT()), name='dense')

  def call(self, mean_features):
    return self.dense(mean_features * self.positions)


class SNDiscriminator(HatNetwork):
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


# ---- the retrofit's autoencoder -----------------------------------------------------------------
def latent_shape_for(image_size):
  return (image_size // 2, image_size // 2, 1)


class StemBlock(DiscriminatorBlock):
  """The hat network's stem (no leading ReLU, 1x1 conv shortcut) without its downsampling."""

  def __init__(self, out_channels, **kwargs):
    super().__init__(out_channels, stem=True, **kwargs)

  def call(self, x):
    return self.c2(tf.nn.relu(self.c1(x))) + self.c_sc(x)


class Encoder(keras.Model):

  def __init__(self, image_size=32, channels=3, width=256, init='glorot', name='encoder', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels = image_size, channels
    self.latent_shape = latent_shape_for(image_size)
    self.blocks = [StemBlock(width, init=init, name='block0'),
                   DiscriminatorBlock(width, downsample=True, init=init, name='block1'),
                   DiscriminatorBlock(width, init=init, name='block2'),
                   DiscriminatorBlock(width, init=init, name='block3')]
    self.to_latent = conv(1, 3, init=_PLAIN_INIT, name='to_latent')

  def call(self, x):
    h = x
    for block in self.blocks:
      h = block(h)
    return project_to_sphere(self.to_latent(tf.nn.relu(h)))

  def build_for_input(self):
    self(tf.zeros([1, self.image_size, self.image_size, self.channels]))
    return self


class DecoderStemBlock(keras.layers.Layer):
  """3x3 conv, BN, ReLU, 3x3 conv, plus a 1x1 conv shortcut; no upsampling (the release's)."""

  def __init__(self, out_channels, init='glorot', **kwargs):
    super().__init__(**kwargs)
    self.c1 = conv(out_channels, 3, init=residual_init(init), name='c1')
    self.b2 = fixed_batch_norm('b2')
    self.c2 = conv(out_channels, 3, init=residual_init(init), name='c2')
    self.c_sc = conv(out_channels, 1, init=_PLAIN_INIT, name='c_sc')

  def call(self, z):
    return self.c2(tf.nn.relu(self.b2(self.c1(z), training=False))) + self.c_sc(z)


class Decoder(keras.Model):
  """z [batch, s/2, s/2, 1] -> image [batch, s, s, channels] in out_factor * (-1, 1)."""

  def __init__(self, image_size=32, channels=3, width=256, out_factor=2.0, init='glorot',
               name='decoder', **kw):
    super().__init__(name=name, **kw)
    self.image_size, self.channels, self.width = image_size, channels, width
    self.out_factor = out_factor
    self.latent_shape = latent_shape_for(image_size)
    self.blocks = [DecoderStemBlock(width, init=init, name='block0'),
                   GeneratorBlock(width, upsample=True, init=init, name='block1'),
                   GeneratorBlock(width, upsample=False, init=init, name='block2'),
                   GeneratorBlock(width, upsample=False, init=init, name='block3')]
    self.bn = fixed_batch_norm('bn_out')
    self.to_image = conv(channels, 3, init=_PLAIN_INIT, name='to_image')

  def call(self, z):
    h = z
    for block in self.blocks:
      h = block(h)
    h = self.to_image(tf.nn.relu(self.bn(h, training=False)))
    return self.out_factor * tf.tanh(tf.cast(h, tf.float32))  # images are float32 always

  def build_for_input(self):
    self(tf.zeros([1, *self.latent_shape]))
    return self


def make_encoder(config):
  return Encoder(config.data.image_size, config.data.channels, config.model.enc_width,
                 config.model.init).build_for_input()


def make_decoder(config):
  return Decoder(config.data.image_size, config.data.channels, config.model.gen_width,
                 config.model.out_factor, config.model.init).build_for_input()
