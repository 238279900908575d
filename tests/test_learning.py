"""The ML loss, the generator loss, data perturbation and the shared optimizer step."""
import numpy as np
import tensorflow as tf

from tf_hat_ebm import learning


def test_ml_loss_by_hand():
  pos = tf.constant([1.0, 3.0])
  neg = tf.constant([0.5, 0.5])
  # (mean H+ - mean H-) / T = (2 - 0.5) / 0.01
  np.testing.assert_allclose(learning.ml_loss(pos, neg, 0.01).numpy(), 150.0, rtol=1e-6)
  # per-replica form: sums over the local batch divided by the global batch (4 = 2 replicas x 2)
  np.testing.assert_allclose(learning.ml_loss(pos, neg, 0.01, 4).numpy(), 75.0, rtol=1e-6)


def test_ml_loss_gradient_lowers_data_energy():
  w = tf.Variable(0.0)
  x_pos, x_neg = tf.constant([1.0]), tf.constant([-1.0])
  with tf.GradientTape() as tape:
    loss = learning.ml_loss(w * x_pos, w * x_neg, 1.0)
  # d/dw (w*1 - w*(-1)) = 2: a descent step lowers w, i.e. lowers H(X+) relative to H(X-)
  assert float(tape.gradient(loss, w)) == 2.0


def test_generator_loss_by_hand():
  gen = tf.constant([[[[1.0]], [[0.0]]], [[[2.0]], [[2.0]]]])  # [2, 2, 1, 1]
  tgt = tf.zeros_like(gen)
  # per-sample MSE: 0.5 and 4.0, mean 2.25, times 1000
  np.testing.assert_allclose(learning.generator_loss(gen, tgt, 1000.0).numpy(), 2250.0)
  np.testing.assert_allclose(learning.generator_loss(gen, tgt, 1000.0, 4).numpy(), 1125.0)


def test_perturb_data_scale():
  rng = tf.random.Generator.from_seed(0)
  x = tf.zeros([1000, 4])
  noisy = learning.perturb_data(x, 1e-3, rng)
  assert 0.9e-3 < float(tf.math.reduce_std(noisy)) < 1.1e-3
  assert learning.perturb_data(x, 0.0, rng) is x


def test_apply_gradients_clips_global_norm_and_reports_it():
  v = tf.Variable([0.0, 0.0])
  opt = tf.keras.optimizers.SGD(1.0)
  loss, norm = learning.apply_gradients(opt, lambda: tf.reduce_sum(v * [30.0, 40.0]), [v], 5.0)
  np.testing.assert_allclose(norm.numpy(), 50.0)
  np.testing.assert_allclose(v.numpy(), [-3.0, -4.0], rtol=1e-6)  # clipped to norm 5
  assert float(loss) == 0.0
