"""Adam optimizers with a learning-rate schedule per network."""
import tensorflow as tf

from tf_hat_ebm.keras_compat import keras

# Networks with a piecewise-constant schedule in the config's optim section.
SCHEDULED_NETWORKS = ('hat', 'gen')


def piecewise_schedule(base_lr, boundaries, values, field='optim'):
  """base_lr up to step boundaries[0], values[i] after step boundaries[i]; a float when constant.

  `field` names the config fields in errors (e.g. 'optim.hat_lr').
  """
  boundaries, values = [int(b) for b in boundaries], [float(v) for v in values]
  if len(boundaries) != len(values):
    raise ValueError(f'{field}_boundaries has {len(boundaries)} steps but {field}_values has '
                     f'{len(values)} learning rates; give one rate per boundary')
  if any(b <= a for a, b in zip([0] + boundaries, boundaries)):
    raise ValueError(f'{field}_boundaries must be positive and increasing, not {boundaries}')
  if not boundaries:
    return float(base_lr)
  return keras.optimizers.schedules.PiecewiseConstantDecay(boundaries,
                                                           [float(base_lr)] + values)


def network_schedule(optim_cfg, network):
  """The schedule of optim.<network>_lr, _lr_boundaries and _lr_values (network 'hat' or 'gen')."""
  if network not in SCHEDULED_NETWORKS:
    raise ValueError(f'no learning-rate schedule for {network!r}; known: {SCHEDULED_NETWORKS}')
  return piecewise_schedule(optim_cfg[f'{network}_lr'], optim_cfg[f'{network}_lr_boundaries'],
                            optim_cfg[f'{network}_lr_values'], f'optim.{network}_lr')


def linear_decay(base_lr, decay_steps):
  """base_lr decayed linearly to 0 at optimizer step decay_steps (Mimicry's SN-GAN schedule)."""
  return keras.optimizers.schedules.PolynomialDecay(float(base_lr), int(decay_steps), 0.0,
                                                    power=1.0)


class ScaledSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """schedule(step) * scale, with `scale` a checkpointed variable (lowered by a rollback)."""

  def __init__(self, schedule, scale):
    super().__init__()
    self.schedule, self.scale = schedule, scale

  def __call__(self, step):
    base = self.schedule(step) if callable(self.schedule) else self.schedule
    return tf.cast(base, tf.float32) * tf.cast(self.scale, tf.float32)

  def get_config(self):
    return {'schedule': self.schedule, 'scale': float(self.scale.numpy())}


def make_adam(optim_cfg, learning_rate, variables, lr_scale=None):
  """Adam(beta1, beta2); slots built now, so that a restore fills them immediately rather than
  deferring. `learning_rate`: a float or a Keras schedule of the optimizer's step; `lr_scale`: a
  variable multiplying it."""
  schedule = learning_rate
  if lr_scale is not None:
    schedule = ScaledSchedule(schedule, lr_scale)
  opt = keras.optimizers.Adam(
      learning_rate=schedule,
      beta_1=optim_cfg.beta1, beta_2=optim_cfg.beta2)
  opt.build(variables)
  return opt


def current_learning_rate(optimizer):
  lr = optimizer.learning_rate
  if isinstance(lr, keras.optimizers.schedules.LearningRateSchedule):
    return float(lr(optimizer.iterations))
  return float(tf.convert_to_tensor(lr))
