"""SN-GAN ResNet hat networks and generators: shapes, parameter counts, fixed batch norm."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import nets
from tf_hat_ebm.keras_compat import keras


def conv_params(k, cin, cout):
  return k * k * cin * cout + cout


def hat_params(image_size, channels, width):
  """Trainable parameters of the SN-GAN discriminator layout, counted by hand."""
  if image_size <= 32:
    stem, blocks = width, [(width, True), (width, False), (width, False)]
  else:
    stem = width // 16
    blocks = [(width // 8, True), (width // 4, True), (width // 2, True), (width, True)]
    if image_size == 128:
      blocks.append((width, False))
  total = (conv_params(3, channels, stem) + conv_params(3, stem, stem)
           + conv_params(1, channels, stem))
  cin = stem
  for cout, down in blocks:  # hidden channels = out channels (the release's hat block)
    total += conv_params(3, cin, cout) + conv_params(3, cout, cout)
    if down or cin != cout:
      total += conv_params(1, cin, cout)
    cin = cout
  return total + cin  # dense(1), no bias


def generator_params(image_size, channels, width, z_dim):
  num_up = int(np.log2(image_size // 4))
  if image_size <= 32:
    outs = [width] * num_up
  else:  # halving to width/16; at 128x128 the first up-block keeps the width
    outs = [width] * (num_up - 4) + [width // 2**(i + 1) for i in range(4)]
  total = z_dim * 16 * width + 16 * width
  cin = width
  for cout in outs:  # BN(in) scale+offset, conv, BN(out), conv, 1x1 shortcut (always upsampling)
    total += 2 * cin + conv_params(3, cin, cout) + 2 * cout + conv_params(3, cout, cout)
    total += conv_params(1, cin, cout)
    cin = cout
  return total + 2 * cin + conv_params(3, cin, channels)


def trainable(model):
  return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


@pytest.mark.parametrize('size,width', [(16, 8), (32, 16), (64, 64), (128, 64)])
@pytest.mark.parametrize('channels', [1, 3])
def test_shapes_and_parameter_counts(size, width, channels):
  hat = nets.HatNetwork(size, channels, width).build_for_input()
  gen = nets.Generator(size, channels, width, z_dim=16, out_factor=2.0).build_for_input()
  x = tf.random.normal([3, size, size, channels])
  assert hat(x).shape == (3,)
  out = gen(tf.random.normal([3, 16]))
  assert out.shape == (3, size, size, channels)
  assert float(tf.reduce_max(tf.abs(out))) < 2.0
  assert trainable(hat) == hat_params(size, channels, width)
  assert trainable(gen) == generator_params(size, channels, width, 16)


def test_paper_sized_cifar_networks():
  # SN-GAN 32x32 generator (ngf 256) has ~4.3M parameters; the 256-wide hat network 4.2M.
  gen = nets.Generator(32, 3, 256, 128).build_for_input()
  hat = nets.HatNetwork(32, 3, 256).build_for_input()
  assert trainable(gen) == generator_params(32, 3, 256, 128) == 4_276_739
  assert trainable(hat) == hat_params(32, 3, 256) == 4_204_800


def test_scaled_width_doubles_channels():
  assert nets.generator_layout(128, 2048) == [2048, 1024, 512, 256, 128]
  assert nets.generator_layout(64, 1024) == [512, 256, 128, 64]
  stem, blocks = nets.discriminator_layout(128, 2048)
  assert stem == 128 and blocks[-1] == (2048, False) and len(blocks) == 5


def test_generator_batch_norm_is_fixed_and_trains_scale_offset():
  gen = nets.Generator(16, 1, 8, 4).build_for_input()
  z = tf.random.normal([5, 4])
  a = gen(z, training=True).numpy()
  b = gen(z[:2], training=True).numpy()  # batch statistics would change with the batch
  np.testing.assert_allclose(a[:2], b, rtol=1e-5, atol=1e-6)
  bns = [m for m in gen.submodules if isinstance(m, keras.layers.BatchNormalization)]
  assert bns and all(float(tf.reduce_max(tf.abs(bn.moving_mean))) == 0 for bn in bns)
  names = [v.name for v in gen.trainable_variables]
  assert any('gamma' in n for n in names) and any('beta' in n for n in names)


def test_unsupported_size_is_a_clear_error():
  with pytest.raises(ValueError, match='image size 48 has no SN-GAN network'):
    nets.HatNetwork(48, 3, 16)


@pytest.mark.parametrize('init,gain', [('glorot', 1.0), ('mimicry', np.sqrt(2.0))])
def test_initialisation_of_the_residual_path(init, gain):
  # Glorot uniform draws from +-sqrt(6 / (fan_in + fan_out)); Mimicry's gain sqrt(2) widens that
  # on the residual convolutions only (shortcuts and head keep gain 1).
  hat = nets.HatNetwork(32, 3, 64, init=init).build_for_input()
  block = hat.blocks[1]
  limit = np.sqrt(6.0 / (9 * 64 + 9 * 64))
  residual = np.abs(block.c1.kernel.numpy()).max()
  assert 0.99 * gain * limit < residual <= gain * limit
  shortcut = np.abs(block.c_sc.kernel.numpy()).max()
  assert shortcut <= np.sqrt(6.0 / (64 + 64))
  with pytest.raises(ValueError, match="unknown model.init 'he'"):
    nets.HatNetwork(32, 3, 8, init='he')


def test_batch_norm_epsilon():
  # 1e-3 (Keras' default, the release's generators); Mimicry's SN-GAN (batch statistics) 1e-5.
  for batch_stats, epsilon in ((False, 1e-3), (True, 1e-5)):
    gen = nets.Generator(16, 1, 8, 4, batch_stats=batch_stats).build_for_input()
    bns = [m for m in gen.submodules if isinstance(m, keras.layers.BatchNormalization)]
    assert len(bns) == 5 and {bn.epsilon for bn in bns} == {epsilon}


@pytest.mark.parametrize('dtype', [tf.float32, tf.bfloat16])
def test_unfused_relu_is_relu_with_relus_gradient(dtype):
  x = tf.constant([[-2.0, -0.5, 0.0, 0.25, 3.0]], dtype)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch(x)
    ours, ref = nets.unfused_relu(x), tf.nn.relu(x)
    weighted = [tf.reduce_sum(y * tf.constant([[1., 2., 3., 4., 5.]], dtype)) for y in (ours, ref)]
  np.testing.assert_array_equal(ours.numpy(), ref.numpy())
  grads = [tape.gradient(w, x).numpy().astype(np.float32) for w in weighted]
  np.testing.assert_array_equal(grads[0], [[0, 0, 0, 4, 5]])  # 0 at 0, as ReLU's
  np.testing.assert_array_equal(grads[0], grads[1])


def test_hat_input_gradient_has_no_select_ops():
  # Maximum's own gradient (a select per input) cost 4-5% of a digits step on CPU.
  hat = nets.HatNetwork(image_size=16, channels=1, width=8).build_for_input()

  @tf.function
  def grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      energy = tf.reduce_sum(hat(x))
    return tape.gradient(energy, x)
  graph = grad.get_concrete_function(tf.TensorSpec([2, 16, 16, 1])).graph
  ops = [op.type for op in graph.get_operations()]
  assert 'SelectV2' not in ops and 'Select' not in ops
  assert 'Maximum' in ops and ops.count('ReluGrad') >= 3  # the unfused ReLUs, ReLU's gradient


def test_a_discriminator_built_in_bfloat16_restores_one_trained_in_float32(tmp_path):
  # An SN-GAN trains in float32; a joint run builds its D under the chain's policy. The spectral
  # norm's u is a variable like the kernel (float32), whatever the policy computes in.
  from types import SimpleNamespace  # pylint: disable=g-import-not-at-top
  model = SimpleNamespace(disc_width=8, init='sngan')
  trained = nets.make_discriminator(model, 16, 1)
  trained(tf.zeros([1, 16, 16, 1]))
  path = tf.train.Checkpoint(discriminator=trained).write(str(tmp_path / 'd'))
  chain = nets.with_precision('mixed_bfloat16', lambda: nets.make_discriminator(model, 16, 1))
  assert {v.dtype for v in chain.variables} == {tf.float32}
  tf.train.Checkpoint(discriminator=chain).read(path).assert_existing_objects_matched()
  x = tf.random.stateless_uniform([2, 16, 16, 1], [0, 1], -1, 1)
  np.testing.assert_allclose(chain(x), trained(x), atol=0.05, rtol=0.05)
