"""The runaway guard: a finite divergence (energy difference or hat gradient norm running away by
orders of magnitude while staying finite) stops or rolls back a run instead of training through.

Checked on every chunk's mean metrics (pure python, no TF), beside the trainer's NaN check:
  band    |energy_diff| > max_abs_energy_diff;
  growth  |m| > growth_factor x the median of |m| over the quiet chunks of the last `window` steps,
          for m in growth_metrics, once the guard has watched `warmup` steps;
  trend   |m| doubles faster than every `max_doubling` steps (a least-squares fit of log |m| on
          the step over the last `trend_window` steps) while it is over `min_rise` x its early
          level (the median of the first `early` steps watched): geometric growth, seen hundreds
          of steps before it reaches the band.
A chunk failing any test is suspicious; `patience` suspicious chunks in a row trip the guard.
Only metrics the task reports are watched (SN-GAN and the autoencoder report neither).
"""
import math
import statistics


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
    self.series = {m: [] for m in self.growth}  # every chunk's |m|, for the trend test
    self.early = {}                             # m -> its early level, once known

  @property
  def suspicious(self):
    return self.count > 0

  @property
  def tripped(self):
    return self.count >= self.cfg.patience

  def update(self, step, metrics):
    """Checks one chunk ending at `step`; returns why it is suspicious, or None if quiet."""
    self._record(step, metrics)
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
    trend = self._trend(step, metrics)
    if trend or not self.history or step - self.start < cfg.warmup:
      return trend
    for m in self.growth:
      reference = statistics.median(v[m] for _, v in self.history)
      if reference > 0 and abs(metrics[m]) > cfg.growth_factor * reference:
        return (f'{m} {abs(metrics[m]):.3g} grew x{abs(metrics[m]) / reference:.3g} over its '
                f'median {reference:.3g} of steps {self.history[0][0]}-{self.history[-1][0]} '
                f'(training.guard.growth_factor {cfg.growth_factor:g})')
    return None

  def _record(self, step, metrics):
    cfg = self.cfg
    early_end = self.start + cfg.get('early', 0)
    for m in self.growth:
      series = self.series[m]
      series.append((step, abs(metrics[m])))
      if m not in self.early and step >= early_end:
        self.early[m] = statistics.median([v for s, v in series if s <= early_end] or
                                          [series[0][1]])
      if m in self.early:  # till then the early points are kept for the level
        self.series[m] = [(s, v) for s, v in series if s > step - cfg.get('trend_window', 0)]

  def _trend(self, step, metrics):
    cfg = self.cfg
    if not cfg.get('trend_window') or not cfg.get('max_doubling'):
      return None
    for m in self.growth:
      points = [(s, v) for s, v in self.series[m] if s > step - cfg.trend_window]
      level = self.early.get(m)
      # A fit needs the window mostly covered: 4 points over at least half of it.
      covered = len(points) >= 4 and points[-1][0] - points[0][0] >= cfg.trend_window / 2
      if not level or not covered or abs(metrics[m]) <= cfg.min_rise * level:
        continue
      doubling = doubling_steps(points)
      if doubling < cfg.max_doubling:
        return (f'{m} {abs(metrics[m]):.3g} doubles every {doubling:.0f} steps (fit over steps '
                f'{points[0][0]}-{points[-1][0]}) at x{abs(metrics[m]) / level:.3g} its early '
                f'level {level:.3g} (training.guard.max_doubling {cfg.max_doubling:g})')
    return None


def doubling_steps(points):
  """Steps in which a positive series [(step, value)] doubles, from the least-squares slope of
  log(value) on step; inf when it does not grow."""
  points = [(s, math.log(v)) for s, v in points if v > 0]
  if len(points) < 2:
    return math.inf
  mean_s = sum(s for s, _ in points) / len(points)
  mean_l = sum(l for _, l in points) / len(points)
  var = sum((s - mean_s) ** 2 for s, _ in points)
  slope = sum((s - mean_s) * (l - mean_l) for s, l in points) / var if var else 0.0
  return math.log(2) / slope if slope > 0 else math.inf


def replay(guard_cfg, series):
  """(step, reason) at which the guard would have tripped on logged curves, or None: series
  {metric: [(step, value)]} (e.g. a run's TensorBoard scalars), fed as chunks at the steps where
  every watched metric was logged."""
  guard = RunawayGuard(guard_cfg, series)
  names = [m for m in ('energy_diff', *guard.growth) if m in series]
  values = {m: dict(series[m]) for m in names}
  steps = sorted(set.intersection(*(set(v) for v in values.values()))) if names else []
  for step in steps:
    guard.update(step, {m: values[m][step] for m in names})
    if guard.tripped:
      return step, guard.reason
  return None


def resolve_action(training_cfg):
  """'auto' rolls back when training.rollback_on_divergence allows it, else stops."""
  action = training_cfg.guard.action
  if action == 'auto':
    return 'rollback' if training_cfg.rollback_on_divergence else 'stop'
  return action
