"""The ML loss, the generator loss, data perturbation and the shared optimizer step."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import learning
from tf_hat_ebm.keras_compat import keras

from conftest import TWO_CPUS
from conftest import tiny


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
  opt = keras.optimizers.SGD(1.0)
  loss, norm = learning.apply_gradients(opt, lambda: tf.reduce_sum(v * [30.0, 40.0]), [v], 5.0)
  np.testing.assert_allclose(norm.numpy(), 50.0)
  np.testing.assert_allclose(v.numpy(), [-3.0, -4.0], rtol=1e-6)  # clipped to norm 5
  assert float(loss) == 0.0


@pytest.fixture(scope='module')
def two_replicas_local():
  # One strategy for the module, reducing without collectives: every MirroredStrategy numbers its
  # collective instances from the same start, and a second one in the process would reuse them.
  return tf.distribute.MirroredStrategy(TWO_CPUS,
                                        cross_device_ops=tf.distribute.ReductionToOneDevice())


def _two_replica_step(strategy, clip_mode, clip_norm=5.0):
  """One SGD(1) step from zeros, replica 0's gradients (v: [30, 40], w: [3]), replica 1's
  (v: [6, 8], w: [-20]); returns (v, w, reported norm) and the per-replica gradients."""
  coeffs = {'v': tf.constant([[30.0, 40.0], [6.0, 8.0]]), 'w': tf.constant([[3.0], [-20.0]])}
  with strategy.scope():
    v, w = tf.Variable([0.0, 0.0]), tf.Variable([0.0])
    opt = keras.optimizers.SGD(1.0)
    opt.build([v, w])

  def replica_fn():
    r = tf.distribute.get_replica_context().replica_id_in_sync_group

    def loss_fn():
      return tf.reduce_sum(v * coeffs['v'][r]) + tf.reduce_sum(w * coeffs['w'][r])
    return learning.apply_gradients(opt, loss_fn, [v, w], clip_norm, clip_mode)[1]

  norm = tf.function(lambda: strategy.run(replica_fn))()
  norm = strategy.experimental_local_results(norm)[0]
  return v.numpy(), w.numpy(), float(norm), coeffs


def test_per_variable_per_replica_clip_sums_each_replicas_clipped_gradients(two_replicas_local):
  v, w, norm, coeffs = _two_replica_step(two_replicas_local, 'per_variable_per_replica')
  # the release: tf.clip_by_norm of each variable's gradient on each replica, then the sum
  expected_v = -sum(tf.clip_by_norm(coeffs['v'][r], 5.0).numpy() for r in range(2))
  expected_w = -sum(tf.clip_by_norm(coeffs['w'][r], 5.0).numpy() for r in range(2))
  np.testing.assert_allclose(v, expected_v, rtol=1e-6)
  np.testing.assert_allclose(w, expected_w, rtol=1e-6)
  np.testing.assert_allclose(v, [-6.0, -8.0], rtol=1e-6)  # [3, 4] + [3, 4]
  np.testing.assert_allclose(w, [2.0], rtol=1e-6)         # 3 + (-5)
  # reported: the global norm of the unclipped sum (v [36, 48], w [-17])
  np.testing.assert_allclose(norm, np.sqrt(36**2 + 48**2 + 17**2), rtol=1e-6)


def test_global_clip_differs_from_the_per_variable_per_replica_clip(two_replicas_local):
  v, w, norm, _ = _two_replica_step(two_replicas_local, 'global')
  total = np.sqrt(36**2 + 48**2 + 17**2)
  np.testing.assert_allclose(norm, total, rtol=1e-6)
  np.testing.assert_allclose(v, -np.array([36.0, 48.0]) * 5.0 / total, rtol=1e-6)
  np.testing.assert_allclose(w, [17.0 * 5.0 / total], rtol=1e-6)
  assert not np.allclose(v, [-6.0, -8.0])
  unclipped_v, _, _, _ = _two_replica_step(two_replicas_local, 'per_variable_per_replica', None)
  np.testing.assert_allclose(unclipped_v, [-36.0, -48.0], rtol=1e-6)  # no clip_norm: no clip


def test_unknown_clip_mode_names_the_field():
  from tf_hat_ebm.tasks.synthesis import SynthesisTask  # pylint: disable=g-import-not-at-top
  with pytest.raises(ValueError, match=r"optim.gen_clip_mode must be one of .* not 'local'"):
    SynthesisTask(tiny(**{'optim.gen_clip_mode': 'local'}), tf.distribute.get_strategy())
