"""DiffAugment (augment.py): each transform as the paper's code, its gradient, and SN-GAN's D
seeing augmented real and generated images in both of its losses."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import augment
from tf_hat_ebm import validation
from tf_hat_ebm.tasks import sngan

from conftest import tiny


def _images(n=16, size=16, channels=1, seed=0):
  return tf.random.stateless_uniform([n, size, size, channels], [seed, 1], minval=0.5,
                                     maxval=1.0)  # no zero pixel: a zero in the output was moved


def _shifted(x, dy, dx):
  out = np.zeros_like(x)
  h, w = x.shape[:2]
  out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = (
      x[max(-dy, 0):h + min(-dy, 0), max(-dx, 0):w + min(-dx, 0)])
  return out


def test_translation_shifts_each_image_by_at_most_an_eighth_with_zeros_shifted_in():
  x = _images().numpy()
  out = augment.translation(tf.constant(x), tf.random.Generator.from_seed([3])).numpy()
  shifts = []
  for xi, oi in zip(x, out):
    found = [(dy, dx) for dy in range(-2, 3) for dx in range(-2, 3)
             if np.array_equal(oi, _shifted(xi, dy, dx))]
    assert len(found) == 1, 'every output is its input shifted by one offset within +-2'
    shifts.append(found[0])
  assert len(set(shifts)) > 3  # per image, not one shift for the batch


def test_cutout_zeroes_one_square_of_half_the_size():
  x = _images().numpy()
  out = augment.cutout(tf.constant(x), tf.random.Generator.from_seed([4])).numpy()
  for xi, oi in zip(x, out):
    zero = oi[..., 0] == 0
    rows, cols = np.where(zero)
    assert zero.any()
    # a rectangle (a square of 8 clipped at the border), and every other pixel unchanged
    assert zero.sum() == (np.ptp(rows) + 1) * (np.ptp(cols) + 1)
    assert 4 <= np.ptp(rows) + 1 <= 8 and 4 <= np.ptp(cols) + 1 <= 8
    np.testing.assert_array_equal(oi[~zero], xi[~zero])


def test_color_keeps_shape_and_moves_brightness_per_image():
  x = _images(channels=3)
  out = augment.color(x, tf.random.Generator.from_seed([5]))
  assert out.shape == x.shape
  shift = tf.reduce_mean(out - x, axis=[1, 2, 3]).numpy()
  assert np.ptp(shift) > 0.1


def test_the_gradient_reaches_exactly_the_pixels_left_in_view():
  x = _images(n=4)
  rng = tf.random.Generator.from_seed([6])
  with tf.GradientTape() as tape:
    tape.watch(x)
    out = augment.diff_augment(x, rng, 'translation,cutout')
    total = tf.reduce_sum(out)
  grad = tape.gradient(total, x).numpy()
  assert set(np.unique(grad)) <= {0.0, 1.0}
  # each pixel that reaches the output once has gradient 1: as many as the output's nonzeros
  np.testing.assert_array_equal((grad == 1).sum(axis=(1, 2, 3)),
                                (out.numpy() != 0).sum(axis=(1, 2, 3)))


def test_an_empty_policy_is_the_identity_and_an_unknown_one_is_refused():
  x = _images(n=2)
  assert augment.diff_augment(x, tf.random.Generator.from_seed([0]), '') is x
  with pytest.raises(validation.ConfigError, match="unknown 'flip'; choose from color"):
    validation.diffaugment_policy('translation,flip')


@pytest.mark.parametrize('policy', ['', 'translation,cutout'])
def test_sngan_discriminator_sees_augmented_real_and_fake_in_both_losses(policy):
  task = sngan.SNGANTask(tiny('digits_sngan', **{'training.diffaugment': policy}),
                         tf.distribute.get_strategy())
  seen = []
  call = task.discriminator.call

  def spy(inputs, *args, **kwargs):
    seen.append(inputs)
    return call(inputs, *args, **kwargs)

  task.discriminator.call = spy
  real, fake = _images(n=4), -_images(n=4, seed=1)
  with tf.GradientTape(persistent=True) as tape:
    tape.watch([real, fake])
    task.discriminator_step(real, fake)
  changed = [not np.array_equal(s.numpy(), x.numpy()) for s, x in zip(seen, (real, fake))]
  assert changed == [bool(policy)] * 2
  seen.clear()
  task.generator_step()
  assert len(seen) == 1
  g_out = task.generator(task._latents(), training=True)  # pylint: disable=protected-access
  # G's loss reaches G's weights through the transform
  with tf.GradientTape() as tape:
    loss = sngan.generator_loss(task.discriminate(task.generator(
        task._latents(), training=True)), 4)  # pylint: disable=protected-access
  grads = tape.gradient(loss, task.generator.trainable_variables)
  assert g_out.shape == real.shape
  assert all(g is not None for g in grads) and float(tf.linalg.global_norm(grads)) > 0
