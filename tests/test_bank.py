"""The persistent bank: sizes, distinct choices, exact overwrites, replica-local checkpoints."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import bank as bank_lib
from tf_hat_ebm.keras_compat import keras


def test_entries_per_replica_rounds_to_whole_batches():
  assert bank_lib.entries_per_replica(10_000, 1, 128) == 78 * 128
  assert bank_lib.entries_per_replica(10_000, 8, 16) == 78 * 16  # 1250 / 16 = 78.1
  with pytest.raises(ValueError, match='smaller than one batch'):
    bank_lib.entries_per_replica(10, 2, 16)


def test_choose_is_distinct_and_overwrite_touches_only_those_entries():
  bank = bank_lib.Bank(20, [2], [1, 1, 1])
  rng = tf.random.Generator.from_seed(0)
  for _ in range(20):
    idx = bank.choose(rng, 8).numpy()
    assert len(set(idx.tolist())) == 8 and idx.min() >= 0 and idx.max() < 20
  before_z, before_x = bank.z.numpy().copy(), bank.x.numpy().copy()
  idx = tf.constant([3, 17, 0])
  bank.overwrite(idx, tf.fill([3, 2], 7.0), tf.fill([3, 1, 1, 1], -1.0))
  z, x = bank.z.numpy(), bank.x.numpy()
  changed = np.where(np.any(z != before_z, axis=1))[0]
  assert sorted(changed.tolist()) == [0, 3, 17]
  assert np.all(z[[0, 3, 17]] == 7.0) and np.all(x[[0, 3, 17]] == -1.0)
  untouched = np.setdiff1d(np.arange(20), [0, 3, 17])
  assert np.all(x[untouched] == before_x[untouched])
  rz, rx = bank.read(idx)
  assert np.all(rz.numpy() == 7.0) and np.all(rx.numpy() == -1.0)


def test_fill_is_generator_of_latents():
  bank = bank_lib.Bank(12, [3], [3])
  gen = keras.Sequential([keras.layers.Dense(3)])
  gen.build([None, 3])
  bank.fill(gen, tf.random.Generator.from_seed(1), 4)
  np.testing.assert_allclose(bank.x.numpy(), gen(bank.z).numpy(), rtol=1e-5, atol=1e-6)
  assert 0.5 < float(tf.math.reduce_std(bank.z)) < 1.5


def test_two_replica_banks_are_local_and_survive_checkpoint(two_replicas, tmp_path):
  strategy = two_replicas
  with strategy.scope():
    bank = bank_lib.Bank(8, [2], [1])
    rng = tf.random.Generator.from_seed(0)

  @tf.function
  def write_replica_id():
    def fn():
      rid = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
      idx = bank.choose(rng, 4)
      bank.overwrite(idx, tf.fill([4, 2], rid + 1.0), tf.fill([4, 1], -rid - 1.0))
    strategy.run(fn)

  write_replica_id()
  items = bank.checkpoint_items(strategy)
  assert sorted(items) == ['bank_x_replica0', 'bank_x_replica1', 'bank_z_replica0',
                           'bank_z_replica1']
  z0, z1 = items['bank_z_replica0'].numpy(), items['bank_z_replica1'].numpy()
  # each replica wrote its own id into 4 of its own 8 entries, and nothing into the other's
  assert (z0 == 1.0).all(axis=1).sum() == 4 and not (z0 == 2.0).any()
  assert (z1 == 2.0).all(axis=1).sum() == 4 and not (z1 == 1.0).any()
  before = {k: v.numpy().copy() for k, v in items.items()}
  ckpt = tf.train.Checkpoint(**items)
  path = ckpt.save(str(tmp_path / 'ckpt'))
  for v in items.values():
    v.assign(tf.zeros_like(v))
  ckpt.restore(path).assert_consumed()
  for k, v in items.items():
    np.testing.assert_array_equal(v.numpy(), before[k])
