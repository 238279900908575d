"""Statistics of the reproduction's tables: spread over seeds and over FID runs, paired effects.

A row's number is the mean over training seeds with the *sample* std (ddof 1) over seeds, and
beside it the evaluation std: the spread of the FID over independent sample sets of one model
(pooled over seeds). An effect the paper reports is checked as the paired difference over seeds
(each seed shares its SN-GAN, autoencoder and data order between the two arms) with its 95%
Student-t interval; its verdict comes from the interval, never from counting seeds.
"""
import math

from scipy import stats as scipy_stats

from tf_hat_ebm import results as result_lib

CONFIDENCE = 0.95
HOLDS, REVERSED, UNRESOLVED = 'holds', 'reversed', 'not resolved'


def _finite(values):
  return [float(v) for v in values if v is not None and math.isfinite(v)]


sample_std = result_lib.sample_std  # the library's one (results.py): ddof 1, finite values


def evaluation_std(runs_per_seed):
  """The std of one model's FID over its independent sample sets, pooled over seeds: the root of
  the mean per-seed sample variance. None when no seed has two runs."""
  variances = [sample_std(runs) ** 2 for runs in runs_per_seed or () if runs
               and sample_std(runs) is not None]
  return math.sqrt(sum(variances) / len(variances)) if variances else None


def summary(per_seed, runs_per_seed=None):
  """{mean, std (over seeds, ddof 1), n (seeds measured), eval_std, eval_runs, per_seed}.

  per_seed: one value per seed (None where the seed has none); runs_per_seed: the FID of each
  sample set per seed (its mean is the seed's value), for the evaluation std.
  """
  values = _finite(per_seed)
  runs = [list(r) for r in runs_per_seed or () if r]
  return dict(mean=sum(values) / len(values) if values else None, std=sample_std(values),
              n=len(values), eval_std=evaluation_std(runs),
              eval_runs=min((len(r) for r in runs), default=0), per_seed=list(per_seed))


def t_p_value(differences):
  """Two-sided p of the paired t-test of mean difference 0; None below two differences (and 0.0
  for differences all equal and non-zero)."""
  d = _finite(differences)
  if len(d) < 2:
    return None
  mean, sd = sum(d) / len(d), sample_std(d)
  if sd == 0:
    return 1.0 if mean == 0 else 0.0
  return float(2 * scipy_stats.t.sf(abs(mean) / (sd / math.sqrt(len(d))), len(d) - 1))


def holm(p_values):
  """Holm's step-down adjustment of a family's p-values (None left out of the family and kept
  None): each adjusted p is the running max of (m - rank) x p, capped at 1."""
  order = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
  out, running = [None] * len(p_values), 0.0
  for rank, (p, i) in enumerate(order):
    running = max(running, min(1.0, (len(order) - rank) * p))
    out[i] = running
  return out


def relative_gain(effect, reference):
  """(mean, low, high) of a paired effect's FID difference as a share of `reference` (the worse
  arm's mean FID): the relative gain and its interval; Nones where not measured."""
  if not reference or effect.get('mean') is None:
    return None, None, None
  low, high = effect.get('low'), effect.get('high')
  return (effect['mean'] / reference, None if low is None else low / reference,
          None if high is None else high / reference)


def t_interval(differences, confidence=CONFIDENCE):
  """(mean, low, high) of the Student-t interval of the mean difference; low = high = None with
  fewer than two differences (no spread to make an interval from)."""
  d = _finite(differences)
  if not d:
    return None, None, None
  mean = sum(d) / len(d)
  if len(d) < 2:
    return mean, None, None
  half = scipy_stats.t.ppf((1 + confidence) / 2, len(d) - 1) * sample_std(d) / math.sqrt(len(d))
  return mean, mean - half, mean + half


def paired_effect(better, worse, lower_is_better=True, failed_seeds=(), seeds=None,
                  confidence=CONFIDENCE):
  """The paper's claim "`better` beats `worse`" checked on paired per-seed values.

  better, worse: per-seed values in the same seed order (None: not measured). The difference is
  worse - better (better - worse for higher-is-better scores such as AUROC), so a positive
  difference has the paper's sign. failed_seeds: seeds whose `worse` arm stopped (a guard or a
  NaN); such a seed counts for the paper only where `better` finished healthy on it.
  Returns {verdict, text, n, mean, low, high, p (two-sided, paired t), failed_counted,
  failed_not_counted}.
  """
  seeds = list(seeds if seeds is not None else range(len(better)))
  sign = 1.0 if lower_is_better else -1.0
  diffs, counted, not_counted = [], [], []
  for seed, b, w in zip(seeds, better, worse):
    healthy = _finite([b])
    if seed in failed_seeds:
      (counted if healthy else not_counted).append(seed)
    elif healthy and _finite([w]):
      diffs.append(sign * (float(w) - float(b)))
  mean, low, high = t_interval(diffs, confidence)
  out = dict(n=len(diffs), mean=mean, low=low, high=high, failed_counted=counted,
             failed_not_counted=not_counted, p=t_p_value(diffs))
  notes = []
  if counted:
    notes.append(f'the ablated arm stopped on seed(s) {counted} where the reference finished')
  if not_counted:
    notes.append(f'seed(s) {not_counted} not counted: both arms failed')
  if not diffs:
    out['verdict'] = HOLDS if counted else 'not measured'
    out['text'] = '; '.join([out['verdict']] + notes)
    return out
  if low is None:
    out['verdict'] = 'one seed: no interval'
    side = "the paper's sign" if mean > 0 else 'against the paper' if mean < 0 else 'no difference'
    text = f'one seed, no interval: difference {mean:+.2f} ({side})'
  else:
    if low > 0:
      out['verdict'] = HOLDS
    elif high < 0:
      out['verdict'] = REVERSED
    else:
      out['verdict'] = f'{UNRESOLVED} at {len(diffs)} seeds'
    text = (f'{out["verdict"]}: difference {mean:+.2f}, {100 * confidence:.0f}% interval '
            f'[{low:+.2f}, {high:+.2f}] over {len(diffs)} paired seeds')
  out['text'] = '; '.join([text] + notes)
  return out
