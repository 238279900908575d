r"""The runaway guard replayed on the logged curves of finished runs: where it would trip.

  python benchmarks/guard_replay.py workdir/seed_sweep/refine/seed*/hat_ebm workdir/old_refine
  python benchmarks/guard_replay.py --override=max_doubling=50 RUN...

Each run's train/energy_diff and train/hat_grad_norm (TensorBoard, every log_every steps) go
through guard.replay with today's default guard (training.guard of the defaults, with
--override=field=value), or with the band and growth tests alone (--trend=False): a check that
the guard stays silent on healthy runs and catches the runaways, without training anything.
"""
import argparse
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('workdirs', nargs='+')
  parser.add_argument('--override', action='append', default=[],
                      help='a training.guard field, e.g. max_doubling=50')
  parser.add_argument('--trend', default='True', choices=('True', 'False'))
  args = parser.parse_args()
  from tf_hat_ebm import guard  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import registry  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import summaries  # pylint: disable=g-import-not-at-top
  cfg = registry.defaults('joint').training.guard
  for item in args.override:
    key, value = item.split('=', 1)
    cfg[key] = type(cfg[key])(value)
  if args.trend == 'False':
    cfg.trend_window = 0
  for workdir in args.workdirs:
    scalars = summaries.read_scalars(os.path.join(workdir, 'tensorboard'))
    series = {t.split('/', 1)[1]: v for t, v in scalars.items() if t.startswith('train/')}
    last = max((s for s, _ in series.get('energy_diff', [])), default=None)
    trip = guard.replay(cfg, series)
    print(f'{workdir}: logged to step {last}; ' +
          (f'trips at step {trip[0]}: {trip[1]}' if trip else 'silent'), flush=True)


if __name__ == '__main__':
  main()
