"""The runaway guard: a finite divergence (energy difference or hat gradient norm running away by
orders of magnitude while staying finite) stops or rolls back a run instead of training through.

Checked on every chunk's mean metrics (pure python, no TF), beside the trainer's NaN check:
  band    |energy_diff| > max_abs_energy_diff;
  growth  |m| > growth_factor x the median of |m| over the quiet chunks of the last `window` steps,
          for m in growth_metrics, once the guard has watched `warmup` steps.
A chunk failing either test is suspicious; `patience` suspicious chunks in a row trip the guard.
Only metrics the task reports are watched (SN-GAN and the autoencoder report neither).
"""
import statistics

ACTIONS = ('auto', 'stop', 'rollback', 'warn', 'off')


class RunawayGuard:
  """Feeds on (step, metrics) per chunk; `tripped` after `patience` suspicious chunks in a row."""

  def __init__(self, guard_cfg, metric_names):
    self.cfg = guard_cfg
    names = set(metric_names)
    on = guard_cfg.action != 'off'
    self.band = on and bool(guard_cfg.max_abs_energy_diff) and 'energy_diff' in names
    self.growth = ([m for m in guard_cfg.growth_metrics if m in names]
                   if on and guard_cfg.growth_factor else [])
    self.reset(0)

  @property
  def watching(self):
    return self.band or bool(self.growth)

  def reset(self, step):
    """Forgets the history (after a rollback or resume: the reference starts again at `step`)."""
    self.start, self.history, self.count, self.reason = step, [], 0, None

  @property
  def suspicious(self):
    return self.count > 0

  @property
  def tripped(self):
    return self.count >= self.cfg.patience

  def update(self, step, metrics):
    """Checks one chunk ending at `step`; returns why it is suspicious, or None if quiet."""
    reason = self._check(step, metrics)
    if reason is None:
      self.count = 0
      # Only quiet chunks become the reference, so a runaway never raises its own bar.
      self.history.append((step, {m: abs(metrics[m]) for m in self.growth}))
      self.history = [(s, v) for s, v in self.history if s > step - self.cfg.window]
    else:
      self.count += 1
    self.reason = reason
    return reason

  def _check(self, step, metrics):
    cfg = self.cfg
    if self.band and abs(metrics['energy_diff']) > cfg.max_abs_energy_diff:
      return (f'|energy_diff| {abs(metrics["energy_diff"]):.3g} > '
              f'training.guard.max_abs_energy_diff {cfg.max_abs_energy_diff:g}')
    if not self.history or step - self.start < cfg.warmup:
      return None
    for m in self.growth:
      reference = statistics.median(v[m] for _, v in self.history)
      if reference > 0 and abs(metrics[m]) > cfg.growth_factor * reference:
        return (f'{m} {abs(metrics[m]):.3g} grew x{abs(metrics[m]) / reference:.3g} over its '
                f'median {reference:.3g} of steps {self.history[0][0]}-{self.history[-1][0]} '
                f'(training.guard.growth_factor {cfg.growth_factor:g})')
    return None


def resolve_action(training_cfg):
  """'auto' rolls back when training.rollback_on_divergence allows it, else stops."""
  action = training_cfg.guard.action
  if action == 'auto':
    return 'rollback' if training_cfg.rollback_on_divergence else 'stop'
  return action
