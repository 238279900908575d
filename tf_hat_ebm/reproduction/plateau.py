"""Has a run reached its plateau, is it unstable, or did it collapse? Its last third of training.

The rule reads the checkpoints of a run's last third (its end window): the one at 2/3 of the
steps, the ones the run keeps before its end (stages.window_steps), and the end, each scored on
independent sample sets (each checkpoint draws its own latents, so the evaluation sd, pooled over
the window's checkpoints, is the noise between checkpoints too). In this order:

1. collapsed: a checkpoint's FID above COLLAPSE_FID, wherever it is in the window;
2. unstable: the checkpoints scatter about their straight-line trend by more than GATE x the
   evaluation sd (a steady run's checkpoint means scatter by ~0.7 eval sd: two sample sets each);
3. the change over the last third (the trend's slope x the third's length) with its 95% interval
   (the scatter, never below the sample sets' own noise, with n - 2 degrees of freedom): converged
   when the interval lies within +-BAND of the end's FID, still improving or past its best when
   it excludes 0, else not resolved; fewer than MIN_CHECKPOINTS checkpoints never read converged.

Why a gate and a band rather than a change against the larger of the scatter and the eval sd:
that rule passed a run the more easily the more it swung. How often this one calls steady,
drifting and swinging runs converged or unstable is simulated by benchmarks/plateau_rule.py (its
numbers: docs/reproduce.md, "Trained to a plateau?"). A run the runaway guard stopped (or whose FID
is not finite) is scored at its last healthy checkpoint, labelled as such.
"""
import math

from scipy import stats as scipy_stats

from tf_hat_ebm.reproduction import statistics

FRACTION = 2 / 3  # the rule compares the end of training with this fraction of it
MIN_CHECKPOINTS = 5  # in the last third, the 2/3 one and the end included: enough to see a trend
GATE = 3.0  # unstable: checkpoints scatter about their trend by more than GATE x the eval sd
BAND = 0.10  # converged: the change's 95% interval within +-BAND of the end's FID
# A FID above this is a collapse, not a worse model: ~6x the FID of held-out digits missing a
# whole class (13-16 at N = 1,000), and the range of a decoder fed latents it never saw (~200).
COLLAPSE_FID = 100.0
RULE = (f'the checkpoints of the last third (2/3 of the steps to the end, {MIN_CHECKPOINTS} or '
        f'more to call a run converged): collapsed when one scores above {COLLAPSE_FID:.0f}; '
        f'unstable when they scatter about their straight-line trend by more than {GATE:g}x the '
        'evaluation sd (one sample set\'s FID, pooled over them); else the trend\'s change over '
        f'the third with its 95% interval: converged when the interval lies within +-'
        f'{100 * BAND:.0f}% of the end\'s FID, still improving or past its best when it excludes '
        '0, else not resolved')
CONVERGED, IMPROVING, WORSENING, RUNAWAY, UNMEASURED = (
    'yes', 'no: still improving', 'no: past its best', 'ran away', 'not measured')
UNSTABLE, COLLAPSED, UNRESOLVED, TOO_FEW = (
    'no: unstable', 'no: collapsed', 'not resolved', 'steady, too few checkpoints')


def checkpoint_step(num_steps, steps_per_loop=1):
  """The step the rule scores besides the end: FRACTION of `num_steps` on the training loop's
  grid (a checkpoint is written only at a multiple of steps_per_loop)."""
  loop = max(int(steps_per_loop), 1)
  step = int(round(FRACTION * num_steps / loop)) * loop
  return min(max(step, loop), max(num_steps - loop, loop))


def _finite(runs):
  return [float(r) for r in runs or () if r is not None and math.isfinite(r)]


def _mean(runs):
  runs = _finite(runs)
  return sum(runs) / len(runs) if runs else None


def trend(points):
  """Least-squares line through [(step, FID)]: (slope per step, residual sd with n - 2 degrees
  of freedom (None below 3 points), sum of squared step deviations)."""
  n = len(points)
  mx = sum(s for s, _ in points) / n
  my = sum(v for _, v in points) / n
  sxx = sum((s - mx) ** 2 for s, _ in points)
  slope = sum((s - mx) * (v - my) for s, v in points) / sxx if sxx else 0.0
  if n < 3:
    return slope, None, sxx
  ss = sum((v - my - slope * (s - mx)) ** 2 for s, v in points)
  return slope, math.sqrt(ss / (n - 2)), sxx


def band_verdict(change, low, high, level, enough=True):
  """The verdict of a change with its interval [low, high] at an end FID `level`."""
  if low is None:
    return UNRESOLVED
  if -BAND * abs(level) <= low and high <= BAND * abs(level):
    return CONVERGED if enough else TOO_FEW
  if high < 0:
    return IMPROVING
  if low > 0:
    return WORSENING
  return UNRESOLVED


def rule(mid_runs, end_runs, mid_step=None, end_step=None, ran_away=False, num_steps=None,
         window=()):
  """The rule on one run: the FID of each sample set at the 2/3 checkpoint and at the end, and
  `window`: [(step, sample sets' FIDs)] of the checkpoints of its end window before the end.

  ran_away: the guard stopped the run (or its end FID is not finite) short of `num_steps`; it is
  then scored at its last healthy checkpoint: the end's result when the runner scored the
  checkpoint the run kept (end_step), else the 2/3 one. Returns {mid, end (the end's FID), sd
  (the noise of one checkpoint's mean the interval uses), eval_sd, scatter (about the trend),
  window_steps, n, difference (the trend's change), low, high, se, df, verdict, converged,
  scored_step, scored, collapsed_at, text}.
  """
  mid, end = _mean(mid_runs), _mean(end_runs)
  end_finite = end_runs and all(r is not None and math.isfinite(r) for r in end_runs)
  out = dict(mid=mid, end=end, sd=None, eval_sd=None, scatter=None, window_steps=[], n=0,
             mid_step=mid_step, end_step=end_step, difference=None, low=None, high=None, se=None,
             df=None, converged=False, scored_step=end_step, scored=end, collapsed_at=None,
             collapsed_fid=None)
  if ran_away or (end_runs and not end_finite):
    healthy = (end, end_step) if ran_away and end_finite else (mid, mid_step)
    out.update(verdict=RUNAWAY, end=None, scored=healthy[0],
               scored_step=healthy[1] if healthy[0] is not None else None)
    where = (f'scored at step {healthy[1]}, its last healthy checkpoint (FID {healthy[0]:.2f})'
             if healthy[0] is not None else 'no healthy checkpoint scored')
    out['text'] = f'{RUNAWAY} before step {num_steps or end_step}; {where}'
    return out
  checkpoints = [(mid_step, mid_runs)] + list(window or ()) + [(end_step, end_runs)]
  checkpoints = [(s, _finite(r)) for s, r in checkpoints if s is not None and _finite(r)]
  eval_sd = statistics.evaluation_std([r for _, r in checkpoints])
  points = [(s, sum(r) / len(r)) for s, r in checkpoints]
  out.update(eval_sd=eval_sd, window_steps=[s for s, _ in points], n=len(points))
  slope, scatter, sxx = trend(points) if points else (0.0, None, 0.0)
  out['scatter'] = scatter  # also of a collapse: the stability checks compare it (tables.py)
  collapsed = [(s, m) for s, m in points if m > COLLAPSE_FID]
  if collapsed:
    s, m = max(collapsed, key=lambda p: p[1])
    out.update(verdict=COLLAPSED, collapsed_at=s, collapsed_fid=m,
               text=f'{COLLAPSED} at step {s:,} (FID {m:.1f} > {COLLAPSE_FID:.0f})')
    return out
  if mid is None or end is None or eval_sd is None:
    out.update(verdict=UNMEASURED, text=f'{UNMEASURED}: needs two sample sets at step '
               f'{mid_step} and at the end')
    return out
  if scatter is not None and scatter > GATE * eval_sd:
    out.update(verdict=UNSTABLE, text=f'{UNSTABLE}: {len(points)} checkpoints scatter by '
               f'{scatter:.2f} about their trend, {scatter / eval_sd:.1f}x the eval sd '
               f'{eval_sd:.2f}')
    return out
  span = points[-1][0] - points[0][0]
  change = slope * span
  runs = min(len(r) for _, r in checkpoints)
  sd = max(scatter or 0.0, eval_sd / math.sqrt(runs))  # never below the sample sets' noise
  out.update(difference=change, sd=sd)
  # Two checkpoints: the sample sets' noise alone, with their degrees of freedom.
  df = len(points) - 2 if scatter is not None else sum(len(r) - 1 for _, r in checkpoints)
  if sxx > 0 and df > 0:
    se = sd * span / math.sqrt(sxx)
    half = scipy_stats.t.ppf((1 + statistics.CONFIDENCE) / 2, df) * se
    out.update(low=change - half, high=change + half, se=se, df=df)
  verdict = band_verdict(change, out['low'], out['high'], end, len(points) >= MIN_CHECKPOINTS)
  out.update(verdict=verdict, converged=verdict == CONVERGED)
  interval = (f'[{out["low"]:+.2f}, {out["high"]:+.2f}]' if out['low'] is not None
              else 'no interval')
  steps = ', '.join(f'{s:,}' for s, _ in points)
  out['text'] = (f'{verdict}: FID {mid:.2f} at step {mid_step:,} -> {end:.2f} at step '
                 f'{end_step:,} (checkpoints {steps}), change {change:+.2f} {interval} against '
                 f'+-{100 * BAND:.0f}% ({BAND * abs(end):.2f}); scatter '
                 + (f'{scatter:.2f}' if scatter is not None else '–')
                 + f', eval sd {eval_sd:.2f}')
  if verdict == TOO_FEW:
    out['text'] += f' ({len(points)} checkpoints of the {MIN_CHECKPOINTS} the rule needs)'
  return out


def _seeds(seeds):
  return f'seed{"s" if len(seeds) > 1 else ""} {", ".join(map(str, seeds))}'


def arm(per_seed):
  """The rule over an arm's seeds: [rule(...) per seed, each with its 'seed'] -> {mid, end,
  difference, low, high, sd, scatter, eval_sd (means over the healthy seeds), converged, verdict,
  counts: {verdict: [seeds]}}.

  A seed that collapsed, swung (unstable), ran away or went unmeasured keeps the arm from
  "yes" and is named. Otherwise the arm's change is the mean of its seeds' changes, its interval
  from their standard errors (Welch-Satterthwaite degrees of freedom), read against the band as
  one seed's; a seed whose own interval lies outside the band (still improving or past its best)
  is named too."""
  counts = {}  # verdict: [seeds]
  for i, r in enumerate(per_seed):
    counts.setdefault(r['verdict'], []).append(r.get('seed', i))
  healthy = [r for r in per_seed if r['difference'] is not None]
  scored = [r for r in per_seed if r['verdict'] not in (RUNAWAY, UNMEASURED)]
  out = dict(mid=_mean([r['mid'] for r in scored]), end=_mean([r['end'] for r in scored]),
             sd=_mean([r['sd'] for r in healthy]), counts=counts, n=len(per_seed),
             scatter=_mean([r.get('scatter') for r in per_seed]),
             eval_sd=_mean([r.get('eval_sd') for r in per_seed]),
             checkpoints=min((r.get('n', 0) for r in per_seed), default=0),
             difference=_mean([r['difference'] for r in healthy]), low=None, high=None)
  named = [(v, counts[v]) for v in (COLLAPSED, UNSTABLE, RUNAWAY, UNMEASURED, IMPROVING, WORSENING)
           if v in counts]
  if healthy and all(r['se'] is not None for r in healthy):
    se = math.sqrt(sum(r['se'] ** 2 for r in healthy)) / len(healthy)
    df = (sum(r['se'] ** 2 for r in healthy) ** 2
          / sum(r['se'] ** 4 / r['df'] for r in healthy)) if se > 0 else float('inf')
    half = scipy_stats.t.ppf((1 + statistics.CONFIDENCE) / 2, df) * se
    out.update(low=out['difference'] - half, high=out['difference'] + half)
  pooled = band_verdict(out['difference'], out['low'], out['high'], out['end'] or 0.0,
                        out['checkpoints'] >= MIN_CHECKPOINTS) if healthy else UNMEASURED
  out['converged'] = pooled == CONVERGED and not named
  if all(r['verdict'] == UNMEASURED for r in per_seed):
    out['verdict'] = UNMEASURED
  elif out['converged']:
    out['verdict'] = CONVERGED
  elif not named:
    out['verdict'] = pooled + (f' ({out["checkpoints"]} of {MIN_CHECKPOINTS})'
                               if pooled == TOO_FEW else '')
  else:
    trend_ = [pooled[4:] + ' (the mean of the other seeds)'] if pooled in (
        IMPROVING, WORSENING) and pooled not in counts else []
    out['verdict'] = 'no: ' + '; '.join(
        [f'{v[4:] if v.startswith("no: ") else v} ({_named(v, c, per_seed)})' for v, c in named]
        + trend_)
  return out


def _named(verdict, seeds, per_seed):
  """'seeds 0, 2', or for a collapse or a swing each seed with its numbers."""
  by_seed = {r.get('seed', i): r for i, r in enumerate(per_seed)}
  if verdict == COLLAPSED:
    return '; '.join(f's{s}: FID {by_seed[s]["collapsed_fid"]:.1f} at step '
                     f'{by_seed[s]["collapsed_at"]:,}' for s in seeds)
  if verdict == UNSTABLE:
    return '; '.join(f's{s}: scatter {by_seed[s]["scatter"]:.2f}, '
                     f'{by_seed[s]["scatter"] / by_seed[s]["eval_sd"]:.1f}x its eval sd'
                     for s in seeds)
  return _seeds(seeds)
