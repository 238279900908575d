r"""Seed sweep: train one experiment for several seeds and score every run the same way.

  python benchmarks/seed_sweep.py                                  # digits synthesis, seeds 0-4
  python benchmarks/seed_sweep.py --seeds=0,1 --num_steps=2000     # the first default length
  python benchmarks/seed_sweep.py --chain=refinement --seeds=0,1,2 # SN-GAN, then refinement
  python benchmarks/seed_sweep.py --chain=retrofit --seeds=0,1,2   # autoencoder, then retrofit
  python benchmarks/seed_sweep.py --override=perf.precision=float32 --out=/tmp/sweep_f32

Each seed's runs are stages of the reproduction's runner (tf_hat_ebm/reproduction): the experiment
scripts in subprocesses from --out, resumable, --jobs at a time, a guard stop recorded. Scored with
the small-data FID of the digits classifier:
  synthesis:            experiments/evaluate_fid.py   -> X = G(Z) + Y, G(Z), and the test split
  refinement, retrofit: experiments/compare_baselines.py -> generator, (DDLS,) Hat EBM, test digits
Per seed: the final energy difference, the largest |energy_diff| after warm-up, whether the
runaway guard stopped the run, and the FIDs; the table goes to stdout and to <out>/sweep.json.
"""
import glob
import os

from absl import app
from absl import flags

from tf_hat_ebm import cli  # noqa: F401  (TensorFlow-free; quiets TensorFlow's C++ log first)

# chain -> (the generator's stage kind or None, the Hat EBM's); configs: the digits scale's.
CHAINS = {'synthesis': (None, 'synthesis'), 'refinement': ('sngan', 'refinement'),
          'retrofit': ('autoencoder', 'retrofit')}
flags.DEFINE_enum('chain', 'synthesis', list(CHAINS), 'What to train per seed.')
flags.DEFINE_list('seeds', ['0', '1', '2', '3', '4'], 'Training seeds.')
flags.DEFINE_integer('num_steps', None, 'Training steps of the Hat EBM (default: its config).',
                     lower_bound=1)
flags.DEFINE_multi_string('override', [], 'Config override of the Hat EBM run, e.g. '
                          'perf.precision=float32.')
flags.DEFINE_integer('fid_samples', 2000, 'FID samples per run.', lower_bound=1)
flags.DEFINE_integer('fid_runs', 2, 'FID runs (sample sets).', lower_bound=1)
flags.DEFINE_float('warmup', 0.25, 'Fraction of the run before |energy_diff| is judged.')
flags.DEFINE_string('jobs', 'auto', 'Stages run at once (auto: up to 2).')
flags.DEFINE_string('out', None, 'Output directory (default: workdir/seed_sweep/<chain>).')
FLAGS = flags.FLAGS


def build(seeds):
  """The stages of every seed: its generator (if the chain has one), then the scored Hat EBM."""
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import plan
  from tf_hat_ebm.reproduction import stages as lib
  scale, (generator, kind), stages = lib.SCALES['digits'], CHAINS[FLAGS.chain], []

  def train(of, name, flags):
    return plan.Invocation(plan.KINDS[of].script, name, tuple(flags),
                           config=f'experiments/configs/{scale.configs[of]}.py')
  for seed in seeds:
    flags = ['--config.seed=' + str(seed)]
    if generator:
      name = f'{generator}_s{seed}'
      stages.append(plan.Stage(name, plan.KINDS[generator], 'sweep',
                               [train(generator, name, flags)], [None], workdir=name))
      flags = flags + [f'--config.generator.path={name}']
    name = f'{kind}_s{seed}'
    flags += [f'--config.{o}' for o in FLAGS.override]
    flags += [f'--config.training.num_steps={FLAGS.num_steps}'] if FLAGS.num_steps else []
    score = plan.Invocation('experiments/evaluate_fid.py', name, (
        f'--num_samples={FLAGS.fid_samples}', f'--runs={FLAGS.fid_runs}'))
    if generator:
      score = plan.Invocation('experiments/compare_baselines.py', name, (
          f'--fid_samples={FLAGS.fid_samples}', f'--fid_runs={FLAGS.fid_runs}'))
    stages.append(plan.Stage(
        name, plan.KINDS[kind], 'sweep', [train(kind, name, flags), score],
        [None, f'{name}/compare/scores.json' if generator else f'{name}/fid.json'],
        workdir=name, after=(f'{generator}_s{seed}',) if generator else (),
        result=plan.COMPARE if generator else plan.FID, guard_stop_is_result=True))
  return stages


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


def row(out, seed, record):
  """One seed's row: energy difference, guard, every metric per method, seconds."""
  kind = CHAINS[FLAGS.chain][1]
  r = dict(seed=seed, seconds=record['seconds'], guard_fired=bool(record.get('failed')))
  diffs = scalar_series(os.path.join(out, f'{kind}_s{seed}'), 'energy/energy_diff')
  if diffs:
    warm = diffs[-1][0] * FLAGS.warmup
    r['final_energy_diff'] = diffs[-1][1]
    r['max_abs_energy_diff_after_warmup'] = max(abs(v) for s, v in diffs if s >= warm)
  from tf_hat_ebm import results as result_lib  # pylint: disable=g-import-not-at-top
  evaluation = result_lib.from_record(record.get('result'))
  for metric in evaluation.metrics if evaluation else ():
    for method in (m for m in evaluation.methods if evaluation.sets(metric, m)):
      std = evaluation.std(metric, method)  # None for a compare's grid scores: one set
      r[f'{metric}_{method}'] = ([evaluation.mean(metric, method), std] if std is not None
                                 else evaluation.mean(metric, method))
  if evaluation and 'fid' in evaluation.data:
    r['fid_data'] = evaluation.data['fid']  # the test split against the train split
  return r


def table(rows):
  keys = list(dict.fromkeys(k for r in rows for k in r if k != 'seed'))
  lines = ['| seed | ' + ' | '.join(keys) + ' |', '|' + '---|' * (len(keys) + 1)]
  for r in rows:
    cells = []
    for k in keys:
      v = r.get(k, '')
      if isinstance(v, list):  # [mean, sd over sample sets]
        v = f'{v[0]:.4g} ± {v[1]:.2g}' if v[1] is not None else f'{v[0]:.4g}'
      cells.append(f'{v:.4g}' if isinstance(v, float) else str(v))
    lines.append(f'| {r["seed"]} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def sweep():
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import workdir as workdir_lib
  from tf_hat_ebm.reproduction import runner as runner_lib
  from tf_hat_ebm.reproduction import stages as lib
  try:
    seeds = [int(s) for s in FLAGS.seeds]
  except ValueError:
    raise ValueError(f'--seeds must be comma-separated integers, not {",".join(FLAGS.seeds)}')
  if not seeds or len(set(seeds)) != len(seeds):
    raise ValueError('--seeds must name each seed once')
  out = os.path.abspath(FLAGS.out or os.path.join('workdir', 'seed_sweep', FLAGS.chain))
  options = lib.Options(out=out, seeds=tuple(seeds), jobs=FLAGS.jobs)
  with workdir_lib.WorkdirLock(out, name='seed_sweep.lock', what='another seed sweep'):
    records = runner_lib.Runner(build(seeds), options).run_all()
    kind = CHAINS[FLAGS.chain][1]
    rows = [row(out, s, records[f'{kind}_s{s}']) for s in seeds]
    print(table(rows))
    runner_lib.write_json(os.path.join(out, 'sweep.json'), dict(
        chain=FLAGS.chain, num_steps=FLAGS.num_steps, override=FLAGS.override,
        fid_samples=FLAGS.fid_samples, fid_runs=FLAGS.fid_runs, rows=rows))
  print(f'written to {os.path.join(out, "sweep.json")}')


def main(argv):
  del argv
  from tf_hat_ebm import errors  # pylint: disable=g-import-not-at-top
  errors.main_guard(sweep, interrupted=lambda: 'interrupted; rerun the same command to resume')


if __name__ == '__main__':
  app.run(main)
