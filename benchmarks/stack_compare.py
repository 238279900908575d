r"""The two stacks (docs/install.md) on the digits default: FIDs of seeds trained and scored on
each, paired by seed.

  # One seed sweep per stack, each from its own virtual environment, scored by one feature
  # classifier (a shared TF_HAT_EBM_CACHE: the first sweep trains it, the other loads it):
  export TF_HAT_EBM_CACHE=$PWD/workdir/stack_compare/fid_cache
  .venv/bin/python benchmarks/seed_sweep.py --seeds=0,1,2 --out=workdir/stack_compare/pinned
  .venv-latest/bin/python benchmarks/seed_sweep.py --seeds=0,1,2 \
      --out=workdir/stack_compare/latest
  python benchmarks/stack_compare.py --a=workdir/stack_compare/pinned \
      --b=workdir/stack_compare/latest

Reads each sweep's sweep.json and prints, per FID (X = G(Z) + Y, G(Z) alone, the test split), the
values per seed on each stack, the paired differences b - a and their 95% Student-t interval
(tf_hat_ebm/reproduction/statistics.py): an interval containing 0 finds no difference between the
stacks at this number of seeds. Also written to --out (default <b>/stack_compare.json).
"""
import json
import os

from absl import app
from absl import flags

from tf_hat_ebm.reproduction import statistics

flags.DEFINE_string('a', None, 'Seed sweep of the first stack (its --out).', required=True)
flags.DEFINE_string('b', None, 'Seed sweep of the second stack (its --out).', required=True)
flags.DEFINE_string('out', None, 'JSON output (default: <b>/stack_compare.json).')
FLAGS = flags.FLAGS

COLUMNS = (('fid_hat_ebm', 'X = G(Z) + Y'), ('fid_generator', 'G(Z)'), ('fid_data', 'test split'))


def per_seed(sweep_dir):
  """{seed: row} of a seed sweep's sweep.json."""
  path = os.path.join(sweep_dir, 'sweep.json')
  try:
    with open(path) as f:
      return {r['seed']: r for r in json.load(f)['rows']}
  except (OSError, ValueError, KeyError) as e:
    raise ValueError(f'{path}: not a finished seed sweep ({e})') from None


def mean_of(cell):
  """A sweep row's value: [mean, sd over its sample sets] (seed_sweep.py) or a number."""
  return float(cell[0] if isinstance(cell, (list, tuple)) else cell)


def compare(a, b):
  """{column: {seeds, a, b, differences, mean, low, high}} over the seeds both sweeps scored."""
  seeds = sorted(set(a) & set(b))
  out = {}
  for key, _ in COLUMNS:
    pairs = [(s, mean_of(a[s][key]), mean_of(b[s][key])) for s in seeds
             if key in a[s] and key in b[s]]
    differences = [y - x for _, x, y in pairs]
    mean, low, high = statistics.t_interval(differences)
    out[key] = dict(seeds=[s for s, _, _ in pairs], a=[x for _, x, _ in pairs],
                    b=[y for _, _, y in pairs], differences=differences, mean=mean, low=low,
                    high=high)
  return out


def table(result):
  def number(v):
    return '-' if v is None else f'{v:.3f}'
  lines = ['| FID | seeds | a | b | b - a | mean (95% interval) |', '|---|---|---|---|---|---|']
  for key, label in COLUMNS:
    r = result[key]
    interval = (f'{number(r["mean"])} ({number(r["low"])} to {number(r["high"])})'
                if r['differences'] else '-')
    lines.append(f'| {label} | {", ".join(map(str, r["seeds"]))} | '
                 f'{" / ".join(map(number, r["a"]))} | {" / ".join(map(number, r["b"]))} | '
                 f'{" / ".join(map(number, r["differences"]))} | {interval} |')
  return '\n'.join(lines)


def main(argv):
  del argv
  from tf_hat_ebm import errors  # pylint: disable=g-import-not-at-top

  def run():
    result = compare(per_seed(FLAGS.a), per_seed(FLAGS.b))
    print(table(result))
    out = FLAGS.out or os.path.join(FLAGS.b, 'stack_compare.json')
    with open(out, 'w') as f:
      json.dump(dict(a=FLAGS.a, b=FLAGS.b, **result), f, indent=2)
    print(f'written to {out}')

  errors.main_guard(run)


if __name__ == '__main__':
  app.run(main)
