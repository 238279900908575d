"""Has a run reached its plateau? The FID of its last third of training, against its noise.

The rule: a run is converged when its FID changed by less than the sd of one checkpoint's FID
over the last third of training: |FID(end) - FID(2/3 of the steps)| < sd. FID(end) is the mean
over the end window, the last checkpoints the run keeps (its end and the ones before it,
stages.window_steps), and sd is the larger of their scatter (the sample std of the window's
FIDs: from checkpoint to checkpoint the FID moves by more than between sample sets) and the
std of one sample set's FID pooled over the 2/3 and end checkpoints (the report's "eval sd").
Without an end window the end is the last checkpoint and sd the sample sets' alone. A run still
improving by more than sd is not converged; one that got worse by more is past its best. A run
the runaway guard stopped (or whose FID is not finite) is scored at its last healthy checkpoint,
labelled as such.
"""
import math

from tf_hat_ebm.reproduction import statistics

FRACTION = 2 / 3  # the rule compares the end of training with this fraction of it
RULE = ('|FID(end) - FID(2/3 of the steps)| < sd, FID(end) the mean over the last checkpoints the '
        'run keeps (its end window) and sd the larger of their scatter and the evaluation sd (one '
        'sample set\'s FID, pooled over the 2/3 and end checkpoints)')
CONVERGED, IMPROVING, WORSENING, RUNAWAY, UNMEASURED = (
    'yes', 'no: still improving', 'no: past its best', 'ran away', 'not measured')


def checkpoint_step(num_steps, steps_per_loop=1):
  """The step the rule scores besides the end: FRACTION of `num_steps` on the training loop's
  grid (a checkpoint is written only at a multiple of steps_per_loop)."""
  loop = max(int(steps_per_loop), 1)
  step = int(round(FRACTION * num_steps / loop)) * loop
  return min(max(step, loop), max(num_steps - loop, loop))


def _mean(runs):
  runs = [float(r) for r in runs or () if r is not None and math.isfinite(r)]
  return sum(runs) / len(runs) if runs else None


def rule(mid_runs, end_runs, mid_step=None, end_step=None, ran_away=False, num_steps=None,
         window=()):
  """The rule on one run: the FID of each sample set at the 2/3 checkpoint and at the end, and
  `window`: [(step, sample sets' FIDs)] of the checkpoints of its end window before the end.

  ran_away: the guard stopped the run (or its end FID is not finite) short of `num_steps`; it is
  then scored at its last healthy checkpoint: the end's result when the runner scored the
  checkpoint the run kept (end_step), else the 2/3 one. Returns {mid, end, sd, eval_sd,
  scatter, window_steps, difference, verdict, converged, scored_step, scored, text}: end is the
  window's mean, sd the rule's (eval_sd the sample sets', scatter the window's).
  """
  mid, end = _mean(mid_runs), _mean(end_runs)
  end_finite = end_runs and all(r is not None and math.isfinite(r) for r in end_runs)
  sd = statistics.evaluation_std([r for r in (mid_runs, end_runs) if r])
  out = dict(mid=mid, end=end, sd=sd, eval_sd=sd, scatter=None, window_steps=[], mid_step=mid_step,
             end_step=end_step, difference=None, converged=False, scored_step=end_step, scored=end)
  if ran_away or (end_runs and not end_finite):
    healthy = (end, end_step) if ran_away and end_finite else (mid, mid_step)
    out.update(verdict=RUNAWAY, end=None, scored=healthy[0],
               scored_step=healthy[1] if healthy[0] is not None else None)
    where = (f'scored at step {healthy[1]}, its last healthy checkpoint (FID {healthy[0]:.2f})'
             if healthy[0] is not None else 'no healthy checkpoint scored')
    out['text'] = f'{RUNAWAY} before step {num_steps or end_step}; {where}'
    return out
  if mid is None or end is None or sd is None:
    out.update(verdict=UNMEASURED, text=f'{UNMEASURED}: needs two sample sets at step '
               f'{mid_step} and at the end')
    return out
  points = [(step, _mean(runs)) for step, runs in window or ()]
  points = [(step, m) for step, m in points if m is not None] + [(end_step, end)]
  where = f'at step {end_step}'
  if len(points) > 1:
    scatter = statistics.sample_std([m for _, m in points])
    end = sum(m for _, m in points) / len(points)
    sd = max(sd, scatter)
    out.update(end=end, sd=sd, scatter=scatter, window_steps=[st for st, _ in points])
    where = f'over steps {", ".join(f"{st:,}" for st, _ in points)}'
  diff = end - mid
  out['difference'] = diff
  if abs(diff) < sd:
    out.update(verdict=CONVERGED, converged=True)
  else:
    out['verdict'] = IMPROVING if diff < 0 else WORSENING
  out['text'] = (f'{out["verdict"]}: FID {mid:.2f} at step {mid_step}, {end:.2f} {where}, '
                 f'change {diff:+.2f} against sd {sd:.2f}')
  return out


def arm(per_seed):
  """The rule over an arm's seeds: [rule(...) per seed, each with its 'seed'] -> {mid, end,
  difference, sd (means over the healthy seeds), converged, verdict, counts: {verdict: [seeds]}}.

  The arm is converged when its mean change over the seeds is below their mean sd and no seed
  ran away or went unmeasured. One seed's change carries the noise of the 2/3 checkpoint and of
  the end window, and its sd is estimated from 3 checkpoints, so a run at its plateau passes the
  rule about 1 time in 2 and three such seeds all pass 1 time in 7; their mean change, with a
  third of that variance, passes about 4 times in 5 (simulated: checkpoint FIDs i.i.d. normal).
  The verdict names the seeds that ran away or were not measured."""
  measured = [r for r in per_seed if r['verdict'] != UNMEASURED]
  counts = {}  # verdict: [seeds]
  for i, r in enumerate(per_seed):
    counts.setdefault(r['verdict'], []).append(r.get('seed', i))
  healthy = [r for r in measured if r['verdict'] != RUNAWAY and r['difference'] is not None]
  out = dict(mid=_mean([r['mid'] for r in healthy]), end=_mean([r['end'] for r in healthy]),
             sd=_mean([r['sd'] for r in healthy]), counts=counts, n=len(per_seed),
             scatter=_mean([r.get('scatter') for r in healthy]),
             eval_sd=_mean([r.get('eval_sd', r['sd']) for r in healthy]))
  diff = out['difference'] = (out['end'] - out['mid'] if healthy else None)
  within = diff is not None and abs(diff) < out['sd']
  missing = {v: c for v, c in counts.items() if v in (RUNAWAY, UNMEASURED)}
  out['converged'] = within and not missing
  if not measured:
    out['verdict'] = UNMEASURED
  elif out['converged']:
    out['verdict'] = CONVERGED
  else:
    trend = [] if within or diff is None else [(IMPROVING if diff < 0 else WORSENING)[4:]]
    out['verdict'] = 'no: ' + '; '.join(trend + [
        f'{v} (seed{"s" if len(c) > 1 else ""} {", ".join(map(str, c))})'
        for v, c in sorted(missing.items())])
  return out
