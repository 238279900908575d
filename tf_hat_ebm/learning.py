"""Learning updates of the Hat EBM (paper eqs. 4/8 and 11) and the shared optimizer step.

Every loss here is written per replica so that summing gradients over replicas gives the gradient
of the loss on the global batch: means divide by the *global* batch size (tf.distribute convention).
"""
import tensorflow as tf

from tf_hat_ebm import validation


def perturb_data(x, data_eps, rng):
  """Positive samples X+ = data + data_eps * N(0, I)."""
  if data_eps <= 0:
    return x
  return x + data_eps * rng.normal(tf.shape(x))


def ml_loss(energy_pos, energy_neg, temperature, global_batch_size=None):
  """Maximum-likelihood loss (mean H(X+) - mean H(X-)) / T; its gradient is the ML gradient.

  energy_* are raw H values [batch]; with global_batch_size the means are over the global batch.
  """
  n = tf.cast(global_batch_size or tf.shape(energy_pos)[0], tf.float32)
  diff = tf.reduce_sum(tf.cast(energy_pos, tf.float32)) - tf.reduce_sum(
      tf.cast(energy_neg, tf.float32))
  return diff / n / temperature


def generator_loss(generated, target, factor=1000.0, global_batch_size=None):
  """factor * mean((G(Z) - X)^2) over the batch and every pixel (paper eq. 11, 1/(2 tau^2) =
  1000)."""
  sq = tf.square(tf.cast(generated, tf.float32) - tf.cast(target, tf.float32))
  per_sample = tf.reduce_mean(tf.reshape(sq, [tf.shape(sq)[0], -1]), axis=1)
  n = tf.cast(global_batch_size or tf.shape(sq)[0], tf.float32)
  return factor * tf.reduce_sum(per_sample) / n


CLIP_MODES = validation.CLIP_MODES


def check_clip_mode(mode, field='clip_mode'):
  if mode not in CLIP_MODES:
    raise ValueError(f'{field} must be one of {CLIP_MODES}, not {mode!r}')


def apply_gradients(optimizer, loss_fn, variables, clip_norm=None, clip_mode='global'):
  """One optimizer step on loss_fn() for variables, inside a replica context.

  Gradients are summed over replicas explicitly, so that the clip acts where the config says and
  the norm of the true global gradient can be reported. clip_mode 'global': the global norm of the
  sum is clipped to clip_norm; 'per_variable_per_replica': each replica clips each variable's
  gradient to clip_norm (tf.clip_by_norm) before the sum, as the authors' release does for
  ImageNet. Returns (loss, global norm of the unclipped summed gradient).
  """
  check_clip_mode(clip_mode)
  with tf.GradientTape() as tape:
    loss = loss_fn()
  grads = tape.gradient(loss, variables)
  local_clip = bool(clip_norm) and clip_mode == 'per_variable_per_replica'
  if local_clip:
    # The unclipped gradients travel too, only to report their global norm.
    grads = grads + [tf.clip_by_norm(g, clip_norm) for g in grads]
  ctx = tf.distribute.get_replica_context()
  if ctx is not None and ctx.num_replicas_in_sync > 1:
    grads = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
  if local_clip:
    grads, applied = grads[:len(variables)], grads[len(variables):]
  grad_norm = tf.linalg.global_norm(grads)
  if local_clip:
    grads = applied
  elif clip_norm:
    grads, _ = tf.clip_by_global_norm(grads, clip_norm, use_norm=grad_norm)
  optimizer.apply_gradients(zip(grads, variables), skip_gradients_aggregation=True)
  return loss, grad_norm


def ebm_update(hat, optimizer, x_pos, x_neg, temperature, global_batch_size, clip_norm=None,
               clip_mode='global'):
  """One ML step of the hat network on positives X+ and negatives X- (paper eq. 4/8).

  Returns (loss as this replica's share, global gradient norm, mean H(X+), mean H(X-)).
  """
  energies = {}

  def loss_fn():
    energies['pos'], energies['neg'] = hat(x_pos), hat(x_neg)
    return ml_loss(energies['pos'], energies['neg'], temperature, global_batch_size)

  loss, grad_norm = apply_gradients(optimizer, loss_fn, hat.trainable_variables, clip_norm,
                                    clip_mode)
  return (loss, grad_norm, tf.reduce_mean(tf.cast(energies['pos'], tf.float32)),
          tf.reduce_mean(tf.cast(energies['neg'], tf.float32)))


def ema_decay(decay, num_updates):
  """The decay of update `num_updates` (counted from 0): min(decay, (1 + n) / (10 + n)), as
  tf.train.ExponentialMovingAverage's num_updates, so the average follows the early, fast-moving
  weights instead of remembering their initialisation."""
  n = tf.cast(num_updates, tf.float32)
  return tf.minimum(tf.cast(decay, tf.float32), (1.0 + n) / (10.0 + n))


def ema_update(average, model, decay):
  """average's trainable weights <- decay * average + (1 - decay) * model's, and its other weights
  (batch-norm statistics) copied from model, as StyleGAN2-ADA keeps G_ema's buffers. Inside a
  replica context: average's variables aggregate ONLY_FIRST_REPLICA (ema_variables)."""
  for a, w in zip(average.trainable_weights, model.trainable_weights):
    a.assign(decay * a + (1.0 - decay) * tf.cast(w, a.dtype))
  for a, w in zip(average.non_trainable_weights, model.non_trainable_weights):
    a.assign(tf.cast(w, a.dtype))


def ema_variables(build):
  """build() with its mirrored variables aggregating ONLY_FIRST_REPLICA, so that ema_update can
  assign them inside `strategy.run` (every replica computes the same average)."""
  def creator(next_creator, **kwargs):
    if kwargs.get('synchronization') != tf.VariableSynchronization.ON_READ:
      kwargs['aggregation'] = tf.VariableAggregation.ONLY_FIRST_REPLICA
    return next_creator(**kwargs)

  with tf.variable_creator_scope(creator):
    return build()
