"""The Langevin step, clipping, prior, temperature and the conditional sampler, by hand."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import langevin
from tf_hat_ebm.keras_compat import keras


class LinearHat(keras.Model):
  """H(x) = sum(w * x): grad_x H = w everywhere, so every step can be computed by hand."""

  def __init__(self, w):
    super().__init__()
    self.w = tf.constant(w, tf.float32)

  def call(self, x):
    return tf.reduce_sum(self.w * x, axis=[1, 2, 3])


class QueueNoise:
  """Stands in for tf.random.Generator: returns the given noise tensors in order."""

  def __init__(self, values):
    self.values = list(values)

  def normal(self, shape):
    return tf.constant(self.values.pop(0), tf.float32)


def test_langevin_step_without_noise():
  s = tf.constant([[1.0, 2.0]])
  g = tf.constant([[4.0, -2.0]])
  new, norm = langevin.langevin_step(s, g, step_size=0.5)
  # S - (eps^2 / 2) g = [1, 2] - 0.125 * [4, -2]
  np.testing.assert_allclose(new.numpy(), [[0.5, 2.25]], rtol=1e-6)
  np.testing.assert_allclose(norm.numpy(), [np.sqrt(20.0)], rtol=1e-6)


def test_langevin_step_with_noise():
  s = tf.constant([[1.0, 2.0]])
  g = tf.constant([[4.0, -2.0]])
  v = tf.constant([[1.0, -3.0]])
  new, _ = langevin.langevin_step(s, g, step_size=0.5, noise=v)
  np.testing.assert_allclose(new.numpy(), [[0.5 + 0.5, 2.25 - 1.5]], rtol=1e-6)


def test_clip_bounds_drift_per_sample():
  g = tf.constant([[300.0, 400.0], [0.3, 0.4]])   # grad norms 500 and 0.5
  s = tf.zeros([2, 2])
  new, norm = langevin.langevin_step(s, g, step_size=0.1, max_drift=1.0)
  # drift = 0.005 g: norms 2.5 (clipped to 1.0) and 0.0025 (kept)
  np.testing.assert_allclose(np.linalg.norm(new.numpy(), axis=1), [1.0, 0.0025], rtol=1e-5)
  np.testing.assert_allclose(new.numpy()[0], [-0.6, -0.8], rtol=1e-5)  # direction kept
  np.testing.assert_allclose(norm.numpy(), [500.0, 0.5], rtol=1e-5)


def test_norm_and_clip_do_not_overflow_float32():
  big = tf.fill([2, 32, 32, 3], 1e18)  # a diverging run: sum of squares is 3e39 > float32 max
  norm = langevin.per_sample_norm(big)
  np.testing.assert_allclose(norm.numpy(), [1e18 * np.sqrt(3072)] * 2, rtol=1e-5)
  clipped, _ = langevin.clip_per_sample(big, 2.5)
  assert np.all(np.isfinite(clipped.numpy()))
  np.testing.assert_allclose(langevin.per_sample_norm(clipped).numpy(), [2.5, 2.5], rtol=1e-5)
  zeros, zero_norm = langevin.clip_per_sample(tf.zeros([1, 4]), 1.0)
  assert np.all(zeros.numpy() == 0) and zero_norm.numpy()[0] == 0


def test_prior_energy():
  y = tf.constant([[[[1.0]], [[2.0]]]])  # ||y||^2 = 5
  np.testing.assert_allclose(langevin.residual_prior_energy(y, 0.5).numpy(), [5 * 2.0])
  np.testing.assert_allclose(langevin.residual_prior_energy(y, None).numpy(), [0.0])


def test_energy_gradient_has_temperature_and_prior():
  w = np.array([1.0, -2.0], np.float32).reshape(1, 1, 2, 1)
  hat = LinearHat(w)
  g_z = tf.zeros([1, 1, 2, 1])
  y = tf.constant(np.array([0.5, 1.0], np.float32).reshape(1, 1, 2, 1))
  settings = langevin.ChainSettings(temperature=0.1, prior_sigma=0.5)
  energy, grad = langevin.residual_energy_and_grad(hat, g_z, y, settings)
  # U = w.y / T + tau ||y||^2, tau = 1 / (2 * 0.25) = 2
  np.testing.assert_allclose(energy.numpy(), [(0.5 - 2.0) / 0.1 + 2 * 1.25], rtol=1e-6)
  np.testing.assert_allclose(grad.numpy().ravel(), w.ravel() / 0.1 + 4 * np.array([0.5, 1.0]),
                             rtol=1e-6)


def test_conditional_sampler_matches_hand_computed_chain():
  w = np.array([1.0, -2.0], np.float32).reshape(1, 1, 2, 1)
  settings = langevin.ChainSettings(steps=2, step_size=0.2, temperature=0.5, max_drift=0.05,
                                    prior_sigma=1.0, noise=True)
  noises = [np.full([1, 1, 2, 1], 0.1, np.float32), np.full([1, 1, 2, 1], -0.2, np.float32)]
  y, diag = langevin.sample_conditional(LinearHat(w), tf.ones([1, 1, 2, 1]), QueueNoise(noises),
                                        settings)
  # Same chain in NumPy: grad = w / T + 2 tau y with tau = 0.5; drift clipped to norm 0.05.
  y_ref, norms = np.zeros(2), []
  for v in noises:
    grad = w.ravel() / 0.5 + y_ref
    norms.append(np.linalg.norm(grad))
    drift = 0.02 * grad
    drift *= min(1.0, 0.05 / np.linalg.norm(drift))
    y_ref = y_ref - drift + 0.2 * v.ravel()
  np.testing.assert_allclose(y.numpy().ravel(), y_ref, rtol=1e-5)
  np.testing.assert_allclose(diag['residual_grad_norm'].numpy(), np.mean(norms), rtol=1e-5)
  np.testing.assert_allclose(diag['residual_abs'].numpy(), np.mean(np.abs(y_ref)), rtol=1e-5)


def test_conditional_sampler_noise_off_and_init_scale():
  w = np.ones([1, 2, 2, 1], np.float32)
  settings = langevin.ChainSettings(steps=3, step_size=0.1, temperature=1.0, max_drift=None,
                                    noise=False, init_scale=0.0)
  y, _ = langevin.sample_conditional(LinearHat(w), tf.zeros([2, 2, 2, 1]),
                                     tf.random.Generator.from_seed(0), settings)
  np.testing.assert_allclose(y.numpy(), np.full([2, 2, 2, 1], -3 * 0.005), rtol=1e-5)
  rng = tf.random.Generator.from_seed(3)
  y0 = langevin.initial_residual(rng, [64, 4, 4, 1], langevin.ChainSettings(init_scale=0.01))
  assert 0.007 < float(tf.math.reduce_std(y0)) < 0.013


@pytest.mark.parametrize('temperature', [1e-3, 1e-8])
def test_lower_temperature_scales_gradient(temperature):
  w = np.ones([1, 1, 1, 1], np.float32)
  settings = langevin.ChainSettings(temperature=temperature)
  _, grad = langevin.residual_energy_and_grad(LinearHat(w), tf.zeros([1, 1, 1, 1]),
                                              tf.zeros([1, 1, 1, 1]), settings)
  np.testing.assert_allclose(grad.numpy().ravel(), [1.0 / temperature], rtol=1e-6)


def test_one_description_of_a_chain_names_each_step_size_it_takes():
  conditional = langevin.ChainSettings(steps=125, step_size=5e-4, temperature=1e-3,
                                       init_scale=0.01, max_drift=None)
  assert conditional.describe() == 'K=125, eps=0.0005, T=0.001, Y0 scale=0.01'
  joint = langevin.ChainSettings(steps=50, step_size=1e-3, latent_step_size=0.02,
                                 temperature=1e-5, max_drift=2.5, prior_sigma=0.1)
  assert joint.describe() == ('K=50, eps_y=0.001, eps_z=0.02, T=1e-05, Y0 scale=0, '
                              'drift clip=2.5, prior sigma=0.1')
