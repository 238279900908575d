"""Adam optimizers with the config's piecewise-constant learning-rate schedule."""
import tensorflow as tf


def learning_rate_schedule(base_lr, boundaries, factor):
  """base_lr, multiplied by `factor` at each boundary step (ImageNet: x0.1 late in training)."""
  boundaries = [int(b) for b in boundaries]
  if not boundaries:
    return float(base_lr)
  values = [float(base_lr) * factor**i for i in range(len(boundaries) + 1)]
  return tf.keras.optimizers.schedules.PiecewiseConstantDecay(boundaries, values)


class ScaledSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
  """schedule(step) * scale, with `scale` a checkpointed variable (lowered by a rollback)."""

  def __init__(self, schedule, scale):
    super().__init__()
    self.schedule, self.scale = schedule, scale

  def __call__(self, step):
    base = self.schedule(step) if callable(self.schedule) else self.schedule
    return tf.cast(base, tf.float32) * tf.cast(self.scale, tf.float32)

  def get_config(self):
    return {'schedule': self.schedule, 'scale': float(self.scale.numpy())}


def make_adam(optim_cfg, base_lr, variables, lr_scale=None):
  """Adam(beta1, beta2) with optional weight moving average; slots built now, so that a restore
  fills them immediately rather than deferring. `lr_scale`: a variable multiplying the schedule."""
  ema = optim_cfg.ema_decay
  schedule = learning_rate_schedule(base_lr, optim_cfg.lr_boundaries, optim_cfg.lr_factor)
  if lr_scale is not None:
    schedule = ScaledSchedule(schedule, lr_scale)
  opt = tf.keras.optimizers.Adam(
      learning_rate=schedule,
      beta_1=optim_cfg.beta1, beta_2=optim_cfg.beta2,
      use_ema=ema is not None, ema_momentum=ema if ema is not None else 0.99)
  opt.build(variables)
  return opt


def current_learning_rate(optimizer):
  lr = optimizer.learning_rate
  if isinstance(lr, tf.keras.optimizers.schedules.LearningRateSchedule):
    return float(lr(optimizer.iterations))
  return float(tf.convert_to_tensor(lr))
