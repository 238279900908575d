r"""Seed sweep: train one experiment for several seeds and score every run the same way.

  python benchmarks/seed_sweep.py                                  # digits_synth, seeds 0-4
  python benchmarks/seed_sweep.py --seeds=0,1 --num_steps=6000     # 3x the default length
  python benchmarks/seed_sweep.py --chain=refine --seeds=0,1,2     # SN-GAN, then refinement
  python benchmarks/seed_sweep.py --chain=retrofit --seeds=0,1,2   # autoencoder, then retrofit
  python benchmarks/seed_sweep.py --override=perf.precision=float32 --out=/tmp/sweep_f32

Each seed trains in its own workdir under --out with the experiment scripts (so a run is exactly
what a user gets), then is scored with the small-data FID of the digits classifier:
  synth:             experiments/evaluate_fid.py   -> X = G(Z) + Y, G(Z), and the test split
  refine / retrofit: experiments/compare_baselines.py -> generator, (DDLS,) Hat EBM, test digits
Per seed it reports the final energy difference, the largest |energy_diff| after warm-up, whether
the runaway guard fired (the training command failed or logged a runaway) and the FIDs; the table
goes to stdout and, with every number, to <out>/sweep.json.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, 'experiments', 'configs')
# chain -> [(stage name, training script, config file)]; the last stage is the scored Hat EBM.
CHAINS = {
    'synth': [('hat_ebm', 'train_synthesis.py', 'digits_synth.py')],
    'refine': [('generator', 'train_sngan.py', 'digits_sngan.py'),
               ('hat_ebm', 'train_refinement.py', 'digits_refine.py')],
    'retrofit': [('generator', 'train_autoencoder.py', 'digits_autoencoder.py'),
                 ('hat_ebm', 'train_retrofit.py', 'digits_retrofit.py')],
}


def scalar_series(workdir, tag):
  """[(step, value)] of a scalar summary in workdir/tensorboard (tf.summary writes tensors)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  series = {}
  for path in sorted(glob.glob(os.path.join(workdir, 'tensorboard', 'events.*'))):
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
      event = tf.compat.v1.Event.FromString(record)
      for value in event.summary.value:
        if value.tag == tag:
          series[event.step] = float(tf.make_ndarray(value.tensor))
  return sorted(series.items())


def run(cmd, log_path):
  """Runs cmd with its output in log_path; returns (exit code, seconds)."""
  start = time.time()
  with open(log_path, 'w') as log:
    code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
  return code, time.time() - start


def guard_fired(log_path):
  with open(log_path, errors='replace') as f:
    text = f.read().lower()
  return 'runaway' in text or 'non-finite' in text


def sweep_seed(args, seed):
  seed_dir = os.path.join(args.out, f'seed{seed}')
  os.makedirs(seed_dir, exist_ok=True)
  row = dict(seed=seed)
  overrides = [f'--config.{o}' for o in args.override]
  generator_dir = None
  for stage, script, config in CHAINS[args.chain]:
    workdir = os.path.join(seed_dir, stage)
    cmd = [sys.executable, os.path.join('experiments', script),
           f'--config={os.path.join(CONFIGS, config)}', f'--workdir={workdir}',
           f'--config.seed={seed}']
    if stage == 'hat_ebm':
      cmd += overrides
      if args.num_steps:
        cmd.append(f'--config.training.num_steps={args.num_steps}')
    if generator_dir:
      cmd.append(f'--config.generator.path={generator_dir}')
    log = os.path.join(seed_dir, f'{stage}.log')
    code, seconds = run(cmd, log)
    row[f'{stage}_seconds'] = round(seconds, 1)
    if code != 0:
      row.update(failed=f'{stage} exit {code} (see {log})', guard_fired=guard_fired(log))
      return row
    generator_dir = workdir
  row['guard_fired'] = guard_fired(log)
  diffs = scalar_series(workdir, 'energy/energy_diff')
  if diffs:
    warm = diffs[-1][0] * args.warmup
    row['final_energy_diff'] = diffs[-1][1]
    row['max_abs_energy_diff_after_warmup'] = max(abs(v) for s, v in diffs if s >= warm)
  row.update(score(args, workdir, seed_dir))
  return row


def score(args, workdir, seed_dir):
  """Small-data FIDs (digits classifier) of the run's samples and of the test split."""
  if args.chain == 'synth':
    cmd = [sys.executable, 'experiments/evaluate_fid.py', f'--workdir={workdir}',
           f'--num_samples={args.fid_samples}', f'--runs={args.fid_runs}']
    code, _ = run(cmd, os.path.join(seed_dir, 'fid.log'))
    if code != 0:
      return dict(failed=f'evaluate_fid exit {code}')
    with open(os.path.join(workdir, 'fid.json')) as f:
      result = json.load(f)
    return dict(fid_x=result['hat_ebm'], fid_g=result['generator'],
                fid_test=result['data_test_vs_train'])
  # The run's config (generator path and overrides included) comes from its workdir.
  cmd = [sys.executable, 'experiments/compare_baselines.py', f'--workdir={workdir}',
         f'--fid_samples={args.fid_samples}', f'--fid_runs={args.fid_runs}']
  code, _ = run(cmd, os.path.join(seed_dir, 'compare.log'))
  if code != 0:
    return dict(failed=f'compare_baselines exit {code}')
  with open(os.path.join(workdir, 'compare', 'scores.json')) as f:
    scores = json.load(f)
  out = {}
  for name, values in scores.items():
    if isinstance(values, dict) and 'fid' in values:
      out[f'fid_{name}'] = [values['fid'], values.get('fid_std')]
  return out


def joint_fid_keys(row):
  """The keys of a row that hold compare_baselines' (mean, std) FIDs (synthesis keeps per-run
  lists under fid_x and fid_g)."""
  return [k for k in row if k.startswith('fid_') and k not in ('fid_x', 'fid_g', 'fid_test')]


def mean(values):
  if isinstance(values, list) and values and isinstance(values[0], (int, float)):
    return sum(v for v in values if v is not None) / len([v for v in values if v is not None])
  return values


def table(rows):
  keys = [k for k in rows[0] if k not in ('seed',)]
  for r in rows[1:]:
    keys += [k for k in r if k not in keys and k != 'seed']
  lines = ['| seed | ' + ' | '.join(keys) + ' |', '|' + '---|' * (len(keys) + 1)]
  for r in rows:
    cells = []
    for k in keys:
      v = r.get(k, '')
      if k in joint_fid_keys(r):  # compare_baselines' [mean, std], not per-run values
        cells.append(f'{v[0]:.4g} ± {v[1]:.2g}' if v[1] is not None else f'{v[0]:.4g}')
        continue
      v = mean(v)
      cells.append(f'{v:.4g}' if isinstance(v, float) else str(v))
    lines.append(f'| {r["seed"]} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--chain', choices=sorted(CHAINS), default='synth')
  parser.add_argument('--seeds', default='0,1,2,3,4', help='comma-separated seeds')
  parser.add_argument('--num_steps', type=int, default=None,
                      help='training steps of the Hat EBM (default: its config)')
  parser.add_argument('--override', action='append', default=[],
                      help='config override of the Hat EBM run, e.g. perf.precision=float32')
  parser.add_argument('--fid_samples', type=int, default=2000)
  parser.add_argument('--fid_runs', type=int, default=2)
  parser.add_argument('--warmup', type=float, default=0.25,
                      help='fraction of the run before |energy_diff| is judged')
  parser.add_argument('--out', default=None, help='default: workdir/seed_sweep/<chain>')
  args = parser.parse_args()
  try:
    seeds = [int(s) for s in args.seeds.split(',') if s.strip()]
  except ValueError:
    parser.error(f'--seeds must be comma-separated integers, not {args.seeds!r}')
  if not seeds or args.fid_samples <= 0 or args.fid_runs <= 0 or (
      args.num_steps is not None and args.num_steps <= 0):
    parser.error('--seeds must name a seed; --fid_samples, --fid_runs, --num_steps must be > 0')
  args.out = os.path.abspath(args.out or os.path.join(ROOT, 'workdir', 'seed_sweep', args.chain))
  os.makedirs(args.out, exist_ok=True)
  rows = []
  for seed in seeds:
    rows.append(sweep_seed(args, seed))
    print(json.dumps(rows[-1]), flush=True)
  print(table(rows))
  with open(os.path.join(args.out, 'sweep.json'), 'w') as f:
    json.dump(dict(chain=args.chain, num_steps=args.num_steps, override=args.override,
                   fid_samples=args.fid_samples, fid_runs=args.fid_runs, rows=rows), f, indent=2)
  print(f'written to {os.path.join(args.out, "sweep.json")}')
  return 1 if any('failed' in r for r in rows) else 0


if __name__ == '__main__':
  sys.exit(main())
