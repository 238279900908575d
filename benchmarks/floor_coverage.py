r"""How often the floor's interval covers the truth: the calibration's fit a + b/n over subsamples
of one small pool, extrapolated to N, with the fit's standard error alone, with the pool's
delete-d jackknife (tf_hat_ebm/evaluation/calibration.py) and, for comparison, with a bootstrap of
the pool, on simulated features whose truth is known.

  python benchmarks/floor_coverage.py                     # 30 pools, 50 replicates each
  python benchmarks/floor_coverage.py --pools=100 --dim=16

Features: Gaussian in --dim dimensions with a 1/k eigenvalue spectrum; a fixed train split of
--train images (the FID's reference, as the digits' 1,500); each trial draws a new pool of
--pool held-out images (the digits' 297 test digits) and extrapolates its FID to --num. The
truth: the mean FID of --num fresh held-out images over 200 draws. Printed: the coverage of the
95% interval mean +- 1.96 sd with each sd, the mean of each sd, and the sd of the estimate over
the pools (what they estimate).
"""
import argparse

import numpy as np

from tf_hat_ebm.evaluation import calibration


def frechet(reference):
  """A numpy FID against `reference`'s statistics (float64, unbiased covariances)."""
  mu = reference.mean(0)
  cov = np.cov(reference, rowvar=False)
  w, v = np.linalg.eigh(cov)
  root = (v * np.sqrt(np.maximum(w, 0))) @ v.T

  def distance(_, acts):
    m, c = acts.mean(0), np.cov(acts, rowvar=False)
    inner = np.linalg.eigvalsh(root @ c @ root)
    return float(np.sum((m - mu) ** 2) + np.trace(cov) + np.trace(c)
                 - 2 * np.sum(np.sqrt(np.maximum(inner, 0))))
  return distance


def bootstrap_sd(train, acts, rows, num, rng, replicates, distance):
  """The fit's sd over bootstrap pools (rows drawn with replacement): what the calibration does not
  use, as a pool drawn with replacement repeats images."""
  return float(np.std([calibration.fit_inverse_n(*calibration.subsample_values(
      train, acts, rng.choice(rows, len(rows), replace=True), rng, distance), num)['mean']
                       for _ in range(replicates)], ddof=1))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--pools', type=int, default=30)
  parser.add_argument('--replicates', type=int, default=calibration.POOL_REPLICATES)
  parser.add_argument('--dim', type=int, default=64)
  parser.add_argument('--train', type=int, default=1500)
  parser.add_argument('--pool', type=int, default=297)
  parser.add_argument('--num', type=int, default=1000)
  parser.add_argument('--scale', type=float, default=3.6,
                      help='feature scale (3.6: a truth near the digits floor, ~1 at N = 1,000)')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  rng = np.random.RandomState(args.seed)
  scale = args.scale / np.sqrt(np.arange(1, args.dim + 1))

  def draw(n):
    return rng.standard_normal([n, args.dim]) * scale
  train = draw(args.train)
  distance = frechet(train)
  truth = np.mean([distance(train, draw(args.num)) for _ in range(200)])
  rows = np.arange(args.pool)
  hits = {'fit se': 0, 'jackknife sd': 0, 'bootstrap sd': 0}
  sds = {name: [] for name in hits}
  estimates = []
  for _ in range(args.pools):
    pool = draw(args.pool)
    fit = calibration.fit_inverse_n(*calibration.subsample_values(train, pool, rows, rng,
                                                                  distance), args.num)
    found = {'fit se': fit['std'],
             'jackknife sd': calibration.pool_spread(train, pool, rows, args.num, rng,
                                                     args.replicates, distance)['std'],
             'bootstrap sd': bootstrap_sd(train, pool, rows, args.num, rng, args.replicates,
                                          distance)}
    for name, sd in found.items():
      hits[name] += abs(fit['mean'] - truth) <= 1.96 * sd
      sds[name].append(sd)
    estimates.append(fit['mean'])
  print(f'truth {truth:.3f} (FID of {args.num} fresh images, mean of 200); {args.pools} pools of '
        f'{args.pool}, {args.replicates} replicates each, {args.dim}-d features; the '
        f'estimate over pools: mean {np.mean(estimates):.3f}, sd {np.std(estimates, ddof=1):.3f} '
        '(what an sd should say)')
  for name, hit in hits.items():
    sd = f', mean sd {np.mean(sds[name]):.3f}'
    print(f'  95% interval from the {name}: covers the truth {hit / args.pools:.2f}{sd}')


if __name__ == '__main__':
  main()
