"""The joint (Y then Z) Langevin sampler and the DDLS baseline, against NumPy by hand."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import langevin
from tf_hat_ebm.keras_compat import keras

from test_langevin import QueueNoise

# Tiny nets: images [1, 1, 2, 1] (2 pixels), latents [2]; G(z) = A z, H(x) = 0.5 sum(w x^2).
A = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)   # x_i = sum_j A[i, j] z_j
W = np.array([2.0, 0.5], np.float32)


class QuadraticHat(keras.Model):
  """grad_x H = w * x: depends on x, so the order of the Y and Z half-steps is visible."""

  def call(self, x):
    return 0.5 * tf.reduce_sum(tf.reshape(W, [1, 1, 2, 1]) * tf.square(x), axis=[1, 2, 3])


class LinearGenerator(keras.Model):
  latent_shape = (2,)

  def __init__(self):
    super().__init__()
    self.a = tf.Variable(A, trainable=True)

  def call(self, z):
    return tf.reshape(tf.matmul(z, self.a, transpose_b=True), [-1, 1, 2, 1])


class LinearDiscriminator(keras.Model):
  """D(x) = v . x + 1 (a logit)."""

  def call(self, x):
    return tf.reduce_sum(tf.reshape([3.0, -1.0], [1, 1, 2, 1]) * x, axis=[1, 2, 3]) + 1.0


def reference_chain(z, y, noises, t, eps1, eps2, steps, prior_sigma=None, max_drift=None,
                    use_residual=True, z_first=False):
  """The same chain in NumPy: grad_y = w (Az + y)/T + 2 tau y;  grad_z = A^T (w (Az + y))/T."""
  tau = 0.0 if prior_sigma is None else 1.0 / (2 * prior_sigma**2)
  noises = list(noises)

  def y_step(z, y):
    grad_y = W * (A @ z + y) / t + 2 * tau * y
    drift = 0.5 * eps1**2 * grad_y
    if max_drift is not None:
      drift *= min(1.0, max_drift / np.linalg.norm(drift))
    return y - drift + eps1 * noises.pop(0)

  def z_step(z, y):
    return z - 0.5 * eps2**2 * A.T @ (W * (A @ z + y)) / t + eps2 * noises.pop(0)

  for _ in range(steps):
    if z_first:
      z = z_step(z, y)
    if use_residual:
      y = y_step(z, y)
    if not z_first:
      z = z_step(z, y)
  return z, y


def run(settings, noises, z0):
  return langevin.sample_joint(QuadraticHat(), LinearGenerator(), QueueNoise(noises), settings,
                               z0=tf.constant([z0], tf.float32))


@pytest.mark.parametrize('prior_sigma,max_drift', [(None, None), (0.5, None), (None, 0.01)])
def test_joint_chain_y_then_z_matches_hand_computation(prior_sigma, max_drift):
  settings = langevin.ChainSettings(steps=3, step_size=0.3, latent_step_size=0.2, temperature=2.0,
                                    prior_sigma=prior_sigma, max_drift=max_drift)
  rs = np.random.RandomState(0)
  noises = [rs.randn(2).astype(np.float32) for _ in range(6)]   # Y, Z, Y, Z, Y, Z
  z0 = np.array([0.5, -1.0], np.float32)
  tf_noises = [n.reshape(1, 1, 2, 1) if i % 2 == 0 else n.reshape(1, 2)
               for i, n in enumerate(noises)]
  z, y, g_z, diag = run(settings, tf_noises, z0)
  z_ref, y_ref = reference_chain(z0, np.zeros(2, np.float32), noises, 2.0, 0.3, 0.2, 3,
                                 prior_sigma, max_drift)
  np.testing.assert_allclose(z.numpy().ravel(), z_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(y.numpy().ravel(), y_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(g_z.numpy().ravel(), A @ z_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(diag['latent_abs'].numpy(), np.mean(np.abs(z_ref)), rtol=1e-5)
  np.testing.assert_allclose(diag['residual_abs'].numpy(), np.mean(np.abs(y_ref)), rtol=1e-5)


def test_order_is_y_then_z_and_each_eps_acts_on_its_own_state():
  # One noiseless step: Z's gradient must see the *updated* Y (Y first), and eps1 only moves Y.
  z0 = np.array([1.0, 1.0], np.float32)
  settings = langevin.ChainSettings(steps=1, step_size=0.5, latent_step_size=0.1, temperature=1.0,
                                    max_drift=None, noise=False)
  z, y, _, diag = run(settings, [], z0)
  y_ref = -0.125 * W * (A @ z0)
  z_ref = z0 - 0.005 * A.T @ (W * (A @ z0 + y_ref))
  np.testing.assert_allclose(y.numpy().ravel(), y_ref, rtol=1e-6)
  np.testing.assert_allclose(z.numpy().ravel(), z_ref, rtol=1e-6)
  z_first = z0 - 0.005 * A.T @ (W * (A @ z0))   # the other Gibbs order would give this
  assert not np.allclose(z.numpy().ravel(), z_first)
  np.testing.assert_allclose(diag['residual_grad_norm'].numpy(), np.linalg.norm(W * (A @ z0)),
                             rtol=1e-6)
  np.testing.assert_allclose(diag['latent_grad_norm'].numpy(),
                             np.linalg.norm(A.T @ (W * (A @ z0 + y_ref))), rtol=1e-6)


@pytest.mark.parametrize('steps', [1, 3])
def test_release_order_is_z_then_y(steps):
  # The authors' release: each iteration moves Z first (with the old Y), then Y (with the new Z).
  settings = langevin.ChainSettings(steps=steps, step_size=0.3, latent_step_size=0.2,
                                    temperature=2.0, prior_sigma=0.5, max_drift=0.05,
                                    latent_first=True)
  rs = np.random.RandomState(1)
  noises = [rs.randn(2).astype(np.float32) for _ in range(2 * steps)]   # Z, Y, Z, Y, ...
  tf_noises = [n.reshape(1, 2) if i % 2 == 0 else n.reshape(1, 1, 2, 1)
               for i, n in enumerate(noises)]
  z0 = np.array([0.5, -1.0], np.float32)
  z, y, g_z, _ = run(settings, tf_noises, z0)
  z_ref, y_ref = reference_chain(z0, np.zeros(2, np.float32), noises, 2.0, 0.3, 0.2, steps, 0.5,
                                 0.05, z_first=True)
  np.testing.assert_allclose(z.numpy().ravel(), z_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(y.numpy().ravel(), y_ref, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(g_z.numpy().ravel(), A @ z_ref, rtol=1e-5, atol=1e-6)
  y_first, _ = reference_chain(z0, np.zeros(2, np.float32), noises, 2.0, 0.3, 0.2, steps, 0.5,
                               0.05)
  assert not np.allclose(z.numpy().ravel(), y_first, atol=1e-3)


def test_no_residual_switch_samples_h_of_g_z_only():
  settings = langevin.ChainSettings(steps=2, step_size=0.3, latent_step_size=0.2, temperature=2.0,
                                    use_residual=False)
  noises = [np.array([0.3, -0.1], np.float32), np.array([-0.2, 0.4], np.float32)]
  z0 = np.array([0.5, -1.0], np.float32)
  z, y, _, diag = run(settings, [n.reshape(1, 2) for n in noises], z0)  # only Z noise is drawn
  z_ref, _ = reference_chain(z0, np.zeros(2, np.float32), noises, 2.0, 0.3, 0.2, 2,
                             use_residual=False)
  np.testing.assert_allclose(z.numpy().ravel(), z_ref, rtol=1e-5)
  assert np.all(y.numpy() == 0) and float(diag['residual_grad_norm']) == 0.0


def test_fresh_chain_starts_from_standard_normal_latents_and_zero_residual():
  settings = langevin.ChainSettings(steps=0)
  z, y, g_z, _ = langevin.sample_joint(QuadraticHat(), LinearGenerator(),
                                       tf.random.Generator.from_seed(1), settings, batch_size=500)
  assert z.shape == (500, 2) and np.all(y.numpy() == 0)
  assert abs(float(tf.math.reduce_std(z)) - 1.0) < 0.1
  np.testing.assert_allclose(g_z.numpy().reshape(500, 2), z.numpy() @ A.T, rtol=1e-5, atol=1e-6)


def test_ddls_energy_and_gradient():
  z = tf.constant([[0.5, -1.0]])
  energy, grad = langevin.ddls_energy_and_grad(LinearDiscriminator(), LinearGenerator(), z)
  v = np.array([3.0, -1.0])
  z_np = z.numpy()[0]
  np.testing.assert_allclose(energy.numpy(), [0.5 * z_np @ z_np - (v @ (A @ z_np) + 1.0)],
                             rtol=1e-6)
  np.testing.assert_allclose(grad.numpy()[0], z_np - A.T @ v, rtol=1e-6)


def test_ddls_chain():
  settings = langevin.ChainSettings(steps=2, step_size=0.1)
  noises = [np.array([[0.3, -0.1]], np.float32), np.array([[-0.2, 0.4]], np.float32)]
  z0 = np.array([0.5, -1.0])
  z, x = langevin.sample_ddls(LinearDiscriminator(), LinearGenerator(), QueueNoise(noises),
                              settings, z0=tf.constant([z0], tf.float32))
  z_ref = z0
  for n in noises:
    z_ref = z_ref - 0.005 * (z_ref - A.T @ np.array([3.0, -1.0])) + 0.1 * n[0]
  np.testing.assert_allclose(z.numpy()[0], z_ref, rtol=1e-5)
  np.testing.assert_allclose(x.numpy().ravel(), A @ z_ref, rtol=1e-5)


def test_latent_sphere_keeps_the_chain_on_the_sphere_by_projected_steps():
  """latent_sphere: Z0 and each Z step are projected onto the sphere of radius sqrt(m) = sqrt(2)."""
  sphere = LinearGenerator()
  settings = langevin.ChainSettings(steps=1, step_size=0.3, latent_step_size=0.2, temperature=2.0,
                                    latent_sphere=True)
  noises = [np.array([0.3, -0.1], np.float32), np.array([-0.2, 0.4], np.float32)]
  z0 = np.array([3.0, -4.0], np.float32)  # norm 5: projected to sqrt(2) first
  z, y, _, _ = langevin.sample_joint(QuadraticHat(), sphere,
                                     QueueNoise([noises[0].reshape(1, 1, 2, 1),
                                                 noises[1].reshape(1, 2)]), settings,
                                     z0=tf.constant([z0]))
  start = z0 * np.sqrt(2.0) / 5.0
  z_ref, y_ref = reference_chain(start, np.zeros(2, np.float32), noises, 2.0, 0.3, 0.2, 1)
  np.testing.assert_allclose(z.numpy().ravel(), z_ref * np.sqrt(2.0) / np.linalg.norm(z_ref),
                             rtol=1e-5)
  np.testing.assert_allclose(y.numpy().ravel(), y_ref, rtol=1e-5)
  z, _, _, _ = langevin.sample_joint(QuadraticHat(), sphere, tf.random.Generator.from_seed(0),
                                     langevin.ChainSettings(steps=5, latent_step_size=0.5,
                                                            latent_sphere=True),
                                     batch_size=64)
  np.testing.assert_allclose(np.linalg.norm(z.numpy(), axis=1), np.sqrt(2.0), rtol=1e-5)
