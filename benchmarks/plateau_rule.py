r"""How often the plateau rule (tf_hat_ebm/reproduction/plateau.py) calls a run converged,
unstable or collapsed, for runs whose truth is known: simulated checkpoint FIDs.

  python benchmarks/plateau_rule.py                  # 4,000 simulated arms of 3 seeds each
  python benchmarks/plateau_rule.py --trials=500 --level=2 --eval_sd=0.3

Each run's last third has checkpoints at the digits synthesis's steps (6,000, then the end window
7,500-9,000); each checkpoint is scored on 2 sample sets with independent latents, each set's FID
drawn around the checkpoint's true FID with sd --eval_sd. The truths: steady (flat), drifting
(a straight line moving by a share of the level over the third) and swinging (the true FID jumps
from checkpoint to checkpoint by k x eval sd). Printed: per seed and per arm of 3 seeds, the share
of each verdict, and the old rule's (|change| < max(window scatter, eval sd)) pass rate beside it.
"""
import argparse

import numpy as np

from tf_hat_ebm.reproduction import plateau
from tf_hat_ebm.reproduction import statistics

STEPS = (6000, 7500, 8000, 8500, 9000)  # the 2/3 checkpoint, the end window, the end
FEW = (6000, 8000, 8500, 9000)  # the committed report's: 4 checkpoints


def truths(level, eval_sd):
  """{name: f(steps, rng) -> true FID per checkpoint}."""
  def drift(share):
    return lambda steps, rng: [level * (1 + share * (steps[-1] - s) / (steps[-1] - steps[0]))
                               for s in steps]

  def swing(k):
    return lambda steps, rng: list(level + k * eval_sd * rng.standard_normal(len(steps)))
  return {'steady': lambda steps, rng: [level] * len(steps), 'drift 5%': drift(0.05),
          'drift 20%': drift(0.2), 'swing 2 eval sd': swing(2.0),
          'swing 4 eval sd': swing(4.0)}


def old_rule(checkpoints):
  """The rule before this one: (change, sd) of |mean(end window) - FID(2/3)| < sd, sd the larger
  of the window's scatter and the eval sd; an arm passed when its mean change was below its mean
  sd."""
  mid, window = checkpoints[0], checkpoints[1:]
  means = [float(np.mean(r)) for _, r in window]
  sd = max(statistics.evaluation_std([mid[1], window[-1][1]]), statistics.sample_std(means))
  return float(np.mean(means) - np.mean(mid[1])), sd


def run_seed(steps, true, eval_sd, rng, runs=2):
  checkpoints = [(s, list(t + eval_sd * rng.standard_normal(runs))) for s, t in zip(steps, true)]
  r = plateau.rule(checkpoints[0][1], checkpoints[-1][1], steps[0], steps[-1],
                   window=checkpoints[1:-1])
  return r, old_rule(checkpoints)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--trials', type=int, default=4000)
  parser.add_argument('--level', type=float, default=10.0, help='the true FID at the end')
  parser.add_argument('--eval_sd', type=float, default=0.5, help="one sample set's FID sd")
  parser.add_argument('--runs', type=int, default=2, help='sample sets per checkpoint')
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args()
  rng = np.random.default_rng(args.seed)
  print(f'level {args.level}, eval sd {args.eval_sd}, {args.runs} sample sets per checkpoint, '
        f'{args.trials} arms of 3 seeds; shares')
  for steps in (STEPS, FEW):
    print(f'\ncheckpoints {", ".join(map(str, steps))}')
    print(f'{"truth":18s} {"seed: yes":>10s} {"unstable":>9s} {"old yes":>8s} '
          f'{"arm: yes":>9s} {"unstable":>9s} {"old yes":>8s}')
    for name, truth in truths(args.level, args.eval_sd).items():
      seed_yes = seed_unstable = seed_old = arm_yes = arm_unstable = arm_old = 0
      for _ in range(args.trials):
        per_seed, olds = [], []
        for seed in range(3):
          r, old = run_seed(steps, truth(steps, rng), args.eval_sd, rng, args.runs)
          per_seed.append(dict(r, seed=seed))
          olds.append(old)
        seed_yes += per_seed[0]['converged']
        seed_unstable += per_seed[0]['verdict'] == plateau.UNSTABLE
        seed_old += abs(olds[0][0]) < olds[0][1]
        summary = plateau.arm(per_seed)
        arm_yes += summary['converged']
        arm_unstable += 'unstable' in summary['verdict']
        arm_old += abs(np.mean([d for d, _ in olds])) < np.mean([sd for _, sd in olds])
      n = args.trials
      print(f'{name:18s} {seed_yes / n:10.3f} {seed_unstable / n:9.3f} {seed_old / n:8.3f} '
            f'{arm_yes / n:9.3f} {arm_unstable / n:9.3f} {arm_old / n:8.3f}')


if __name__ == '__main__':
  main()
