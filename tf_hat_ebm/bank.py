"""Persistent bank of past (Z, X) pairs for the historical generator update (paper Alg. 1).

The bank is replica-local: every replica owns N / replicas entries (rounded to whole per-replica
batches) and only ever reads and overwrites its own part, in place, with no cross-replica traffic.
It is one `SyncOnRead` variable per tensor, whose per-replica components are checkpointed one by
one: a SyncOnRead variable saved as a whole would store a single aggregated value, and every
replica's part must survive a save and restore.
"""
import tensorflow as tf


def entries_per_replica(bank_size, num_replicas, per_replica_batch):
  """N / replicas, rounded to whole per-replica batches; at least one batch is required."""
  per_replica = bank_size / num_replicas
  batches = int(round(per_replica / per_replica_batch))
  if batches < 1:
    raise ValueError(f'bank of {bank_size} entries is smaller than one batch per replica '
                     f'({per_replica_batch} x {num_replicas} replicas)')
  return batches * per_replica_batch


class Bank(tf.Module):
  """Replica-local bank of latents Z and samples X. Create inside `strategy.scope()`."""

  def __init__(self, size_per_replica, z_shape, x_shape, name='bank'):
    super().__init__(name=name)
    self.size = int(size_per_replica)

    def local(shape, name):
      return tf.Variable(tf.zeros([self.size, *shape]), trainable=False, name=name,
                         synchronization=tf.VariableSynchronization.ON_READ,
                         aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)

    self.z = local(z_shape, 'z')
    self.x = local(x_shape, 'x')

  def choose(self, rng, batch_size):
    """B distinct random indices of this replica's bank (top-k of uniform keys)."""
    keys = rng.uniform([self.size])
    return tf.math.top_k(keys, k=batch_size, sorted=False).indices

  # SyncOnRead variables offer no sparse ops; in a replica context their `handle` is this replica's
  # own component, so gathers and scatters go to it directly and never copy the whole bank.
  def read(self, indices):
    return tuple(tf.raw_ops.ResourceGather(resource=v.handle, indices=indices, dtype=tf.float32)
                 for v in (self.z, self.x))

  def overwrite(self, indices, z, x):
    """Writes (z, x) at exactly `indices`, in place."""
    for var, value in ((self.z, z), (self.x, x)):
      tf.raw_ops.ResourceScatterUpdate(resource=var.handle, indices=indices,
                                       updates=tf.cast(value, tf.float32))

  def fill(self, generator, rng, batch_size):
    """Initial bank Z ~ N(0, I), X = G(Z; phi_0), generated a batch at a time (replica context)."""
    def body(start):
      z = rng.normal([batch_size, *self.z.shape[1:]])
      self.overwrite(tf.range(start, start + batch_size), z, generator(z))
      return (start + batch_size,)
    tf.while_loop(lambda s: s < self.size, body, (tf.constant(0),))

  def checkpoint_items(self, strategy):
    """{name: variable} with one entry per replica component of Z and X."""
    items = {}
    for name, var in (('z', self.z), ('x', self.x)):
      for i, component in enumerate(strategy.experimental_local_results(var)):
        items[f'bank_{name}_replica{i}'] = component
    return items
