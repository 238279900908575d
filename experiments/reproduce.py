r"""The paper in one command: every table and figure as resumable stages, and a report.

  python experiments/reproduce.py                        # digits, 3 seeds, on a CPU (~1 h idle)
  python experiments/reproduce.py --dry_run              # every stage's commands, nothing run
  python experiments/reproduce.py --scale=paper --tpu=my-tpu --data_dir=gs://bucket/tfds \
      --inception_path=/data/inception --out=/data/reproduce   # the paper configs (TPU or GPUs)

Stages (each in <out>/<stage>/, run through the experiment scripts in subprocesses, so each is
exactly what a user runs): synthesis per seed (Table 1); SN-GAN, then refinement with its SN-GAN,
DDLS and Hat EBM rows (Table 2); autoencoder, then retrofit (decoder of N(0, I) vs Hat EBM); OOD
AUROC of the synthesis model (Table 3); the ablations (generator trained on the current samples,
the cooperative-learning baseline of the appendix, refinement without the residual Y); figures
(Langevin paths of each kind, sample grids of each model). A finished stage leaves <stage>/done.json
holding its result and is skipped on the next run; an interrupted one resumes (the training
scripts resume from their checkpoints, a finished evaluation is not redone).

The report: <out>/report.md, report.json, figures/ and the same markdown in TensorBoard's text tab
(<out>/tensorboard). Numbers are mean ± std over --seeds (and over FID runs at the paper scale),
each with the stages whose commands made it; the paper scale puts the paper's numbers beside them.
Digits scale: runs shortened so that the whole pipeline fits about an hour on 2 idle cores with
native bf16 (synthesis 1,000 steps, SN-GAN 600, refinement 300, retrofit 300; FID of 1,000 samples
with the digits classifier).
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

# The report imports TensorFlow (its text summary); its C++ start-up lines are not for people.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPERIMENTS = os.path.join(ROOT, 'experiments')
CONFIGS = os.path.join(EXPERIMENTS, 'configs')
SCALES = ('digits', 'paper', 'tiny')
PARTS = ('synth', 'refine', 'retrofit', 'ood', 'ablations', 'figures')

# Per scale: config file per stage kind, training overrides per kind, evaluation flags, and the
# estimated idle seconds of each stage kind (only for the ETA; rescaled by what is measured).
SCALE = {
    'digits': dict(
        configs=dict(synth='digits_synth', sngan='digits_sngan', refine='digits_refine',
                     autoencoder='digits_autoencoder', retrofit='digits_retrofit'),
        overrides=dict(synth={'training.num_steps': 1000, 'training.checkpoint_every': 250,
                              'training.sample_every': 250},
                       sngan={'training.num_steps': 600},
                       refine={}, autoencoder={},
                       retrofit={'training.num_steps': 300, 'training.checkpoint_every': 100,
                                 'training.sample_every': 100}),
        fid=['--num_samples=1000', '--runs=1'], ood=[], samples=['--num_samples=64'],
        seconds=dict(synth=145, sngan=75, refine=135, autoencoder=75, retrofit=165, fid=40,
                     ood=10, figures=75)),  # measured: 63 min in all on 2 idle EPYC cores
    'tiny': dict(  # the test's: seconds per stage
        configs=dict(synth='digits_synth', sngan='digits_sngan', refine='digits_refine',
                     autoencoder='digits_autoencoder', retrofit='digits_retrofit'),
        overrides={kind: dict({'training.num_steps': 2, 'training.steps_per_loop': 1,
                               'training.log_every': 1, 'training.checkpoint_every': 2,
                               'training.sample_every': 2},
                              **extra) for kind, extra in (
            ('synth', {'langevin.steps': 2, 'sampling.steps': 2, 'training.bank_size': 64}),
            ('sngan', {'training.n_dis': 1}),
            ('refine', {'langevin.steps': 2, 'sampling.steps': 2, 'ddls.steps': 2}),
            ('autoencoder', {'training.eval_every': 2}),
            ('retrofit', {'langevin.steps': 2, 'sampling.steps': 2}))},
        fid=['--num_samples=20', '--runs=1', '--batch_size=10'], ood=['--num=50'],
        samples=['--num_samples=4', '--path_chains=2'],
        seconds=dict(synth=5, sngan=5, refine=5, autoencoder=5, retrofit=5, fid=5, ood=5,
                     figures=5)),
    'paper': dict(
        configs=dict(synth='cifar10_synth', sngan='cifar10_sngan', refine='cifar10_refine',
                     autoencoder='cifar10_autoencoder', retrofit='cifar10_retrofit'),
        overrides=dict(synth={}, sngan={}, refine={}, autoencoder={}, retrofit={}),
        # Table 1's and Table 2's other datasets: (stage prefix, config[, its SN-GAN's config]).
        more_synth=[('synth_celeba', 'celeba_synth'), ('synth_imagenet128', 'imagenet128_synth'),
                    ('synth_imagenet128_large', 'imagenet128_synth_large')],
        more_refine=[('celeba', 'celeba_sngan', 'celeba_refine')],
        fid=['--runs=3'], ood=[], samples=['--num_samples=64'],
        seconds=dict(synth=40 * 3600, sngan=20 * 3600, refine=10 * 3600, autoencoder=5 * 3600,
                     retrofit=15 * 3600, fid=3600, ood=1800, figures=600)),
}
# The paper's synthesis results beyond CIFAR-10 (paper scale only): config -> published FID.
PAPER_SYNTHESIS = {'cifar10_synth': '19.30 ± 0.15', 'celeba_synth': '11.57 ± 0.04',
                   'imagenet128_synth': '40.24 ± 0.18', 'imagenet128_synth_large': '29.37 ± 0.15'}
PAPER_REFINE = {'cifar10': {'generator': '18.58', 'ddls': '14.59', 'hat_ebm': '14.04'},
                'celeba': {'generator': '6.13', 'ddls': '6.06', 'hat_ebm': '5.98'}}
PAPER_RETROFIT = {'hat_ebm': '26.01 ± 0.09'}
PAPER_OOD = {'svhn_cropped': '0.92', 'cifar100': '0.87', 'celeb_a': '0.94'}


class Stage:
  """A named step of the pipeline: commands run in order in <out>/<name>/, then its result.

  `outputs[i]` is the file command i writes last (None: always run, as training, which resumes);
  a command whose output exists is not run again. `result(stage)` reads the stage's numbers.
  `may_fail`: an ablation that the paper reports as unstable records its failure as its result;
  `keep_going`: a failed command does not stop the stage's next ones (figures of failed runs).
  """

  def __init__(self, name, kind, commands, outputs, result, workdir=None, may_fail=False,
               keep_going=False):
    self.name, self.kind, self.commands, self.outputs = name, kind, commands, outputs
    self.result_fn, self.may_fail, self.keep_going = result, may_fail, keep_going
    self.workdir = workdir

  def done_path(self, out):
    return os.path.join(out, self.name, 'done.json')


def script(name):
  return [sys.executable, os.path.join(EXPERIMENTS, name)]


def train_command(train_script, config, workdir, overrides, args):
  cmd = script(train_script) + [f'--config={os.path.join(CONFIGS, config + ".py")}',
                                f'--workdir={workdir}']
  cmd += [f'--config.{k}={v}' for k, v in overrides.items()]
  if args.data_dir and not config.startswith('digits'):
    cmd.append(f'--config.data.data_dir={args.data_dir}')
  if args.tpu:
    cmd.append(f'--tpu={args.tpu}')
  return cmd


def read_json(path):
  with open(path) as f:
    return json.load(f)


def fid_result(workdir):
  """{method: mean FID over its runs, method_runs: [FIDs]} of workdir/fid.json."""
  saved = read_json(os.path.join(workdir, 'fid.json'))
  out = {}
  for method in ('hat_ebm', 'generator', 'ddls'):
    if method in saved:
      out[method] = sum(saved[method]) / len(saved[method])
      out[method + '_runs'] = saved[method]
  out['data'] = saved['data_test_vs_train']
  return out


def build_stages(args):
  """Every stage of the pipeline at args.scale, in order."""
  s, out = SCALE[args.scale], args.out
  cache = os.path.join(out, 'feature_cache')
  fid_flags = s['fid'] + [f'--feature_cache_dir={cache}']
  if args.inception_path:
    fid_flags.append(f'--inception_path={args.inception_path}')
  stages = []

  def overrides(kind, seed, **extra):
    return dict(s['overrides'][kind], seed=seed, **extra)

  def trained_and_scored(name, kind, train_script, seed, extra=None, may_fail=False, config=None):
    workdir = os.path.join(out, name)
    cmds = [train_command(train_script, config or s['configs'][kind], workdir,
                          overrides(kind, seed, **(extra or {})), args),
            script('evaluate_fid.py') + [f'--workdir={workdir}'] + fid_flags]
    stages.append(Stage(name, kind, cmds, [None, os.path.join(workdir, 'fid.json')],
                        lambda st: fid_result(st.workdir), workdir, may_fail))

  parts = set(args.parts)
  for seed in args.seeds:
    gan = os.path.join(out, f'sngan_s{seed}')
    ae = os.path.join(out, f'autoencoder_s{seed}')
    synth = os.path.join(out, f'synth_s{seed}')
    if parts & {'synth', 'ood', 'ablations'}:
      trained_and_scored(f'synth_s{seed}', 'synth', 'train_synthesis.py', seed)
    for prefix, config in s.get('more_synth', []) if 'synth' in parts else ():
      trained_and_scored(f'{prefix}_s{seed}', 'synth', 'train_synthesis.py', seed, config=config)
    if parts & {'refine', 'ablations'}:
      trained_and_scored(f'sngan_s{seed}', 'sngan', 'train_sngan.py', seed)
      trained_and_scored(f'refine_s{seed}', 'refine', 'train_refinement.py', seed,
                         {'generator.path': gan})
    for data, gan_config, config in s.get('more_refine', []) if 'refine' in parts else ():
      trained_and_scored(f'sngan_{data}_s{seed}', 'sngan', 'train_sngan.py', seed,
                         config=gan_config)
      trained_and_scored(f'refine_{data}_s{seed}', 'refine', 'train_refinement.py', seed,
                         {'generator.path': os.path.join(out, f'sngan_{data}_s{seed}')},
                         config=config)
    if 'retrofit' in parts:
      stages.append(Stage(f'autoencoder_s{seed}', 'autoencoder',
                          [train_command('train_autoencoder.py', s['configs']['autoencoder'], ae,
                                         overrides('autoencoder', seed), args)],
                          [None], lambda st: {}, ae))
      trained_and_scored(f'retrofit_s{seed}', 'retrofit', 'train_retrofit.py', seed,
                         {'generator.path': ae})
    if 'ood' not in parts:
      continue
    ood_out = os.path.join(synth, 'ood.json')
    ood_cmd = script('evaluate_ood.py') + [f'--workdir={synth}'] + s['ood']
    if args.data_dir:
      ood_cmd.append(f'--data_dir={args.data_dir}')
    stages.append(Stage(f'ood_s{seed}', 'ood', [ood_cmd], [ood_out],
                        lambda st, p=ood_out: {k: v['auroc']
                                               for k, v in read_json(p)['sets'].items()}))
  for seed in args.seeds if 'ablations' in parts else ():
    gan = os.path.join(out, f'sngan_s{seed}')
    # Ablations: the generator's targets (bank vs current vs cooperative learning), the residual.
    trained_and_scored(f'current_s{seed}', 'synth', 'train_synthesis.py', seed,
                       {'training.generator_update': 'current'}, may_fail=True)
    trained_and_scored(f'coop_s{seed}', 'synth', 'train_synthesis.py', seed,
                       {'training.generator_update': 'cooperative'}, may_fail=True)
    trained_and_scored(f'noresidual_s{seed}', 'refine', 'train_refinement.py', seed,
                       {'generator.path': gan, 'langevin.use_residual': False,
                        'sampling.use_residual': False}, may_fail=True)
  if 'figures' not in parts:
    return stages
  # Figures of the first seed: the Langevin paths of each kind and every model's sample grid.
  seed = args.seeds[0]
  figure_dir = os.path.join(out, 'samples')
  cmds, outputs = [], []
  models = [m for m, part in (('synth', 'synth'), ('refine', 'refine'), ('retrofit', 'retrofit'),
                              ('current', 'ablations'), ('coop', 'ablations'),
                              ('noresidual', 'ablations')) if part in parts]
  for model in models:
    target = os.path.join(figure_dir, model)
    cmds.append(script('sample.py') + [f'--workdir={os.path.join(out, f"{model}_s{seed}")}',
                                       f'--output={target}', '--overwrite'] + s['samples'])
    outputs.append(os.path.join(target, 'langevin_path.png'))  # its last file
  stages.append(Stage('samples', 'figures', cmds, outputs, lambda st: {}, figure_dir,
                      may_fail=True, keep_going=True))
  return stages


def run_stage(stage, out, log):
  """Runs the stage's commands that are not done; returns (exit code, failed command or None)."""
  os.makedirs(os.path.join(out, stage.name), exist_ok=True)
  first_failure = (0, None)
  for cmd, output in zip(stage.commands, stage.outputs):
    if output is not None and os.path.exists(output):
      continue
    log.write(f'$ {shlex.join(cmd)}\n')
    log.flush()
    code = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                               [ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p])))
    if code != 0:
      if not stage.keep_going:
        return code, cmd
      first_failure = first_failure if first_failure[0] else (code, cmd)
  return first_failure


def hms(seconds):
  seconds = int(max(seconds, 0))
  return f'{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


def run_all(stages, args):
  """Runs every stage not done, a progress line each; returns {stage: done record}."""
  est = SCALE[args.scale]['seconds']

  def estimate(stage):
    return est[stage.kind] + (est['fid'] if len(stage.commands) == 2 else 0)

  records, start = {}, time.time()
  measured, estimated = 0.0, 0.0  # of the stages run in this invocation: rescales the ETA
  for i, stage in enumerate(stages):
    path = stage.done_path(args.out)
    if os.path.exists(path):
      records[stage.name] = read_json(path)
      print(f'[{i + 1}/{len(stages)}] {stage.name}: done (skipped)'
            f'{result_line(records[stage.name].get("result"))}', flush=True)
      continue
    remaining = sum(estimate(s) for s in stages[i:] if not os.path.exists(s.done_path(args.out)))
    ratio = measured / estimated if estimated else 1.0
    print(f'[{i + 1}/{len(stages)}] {stage.name}: running (elapsed {hms(time.time() - start)}, '
          f'ETA {hms(remaining * ratio)}; log {os.path.join(args.out, stage.name, "log.txt")})',
          flush=True)
    t0 = time.time()
    os.makedirs(os.path.join(args.out, stage.name), exist_ok=True)
    with open(os.path.join(args.out, stage.name, 'log.txt'), 'a') as log:
      code, failed = run_stage(stage, args.out, log)
    seconds = time.time() - t0
    measured, estimated = measured + seconds, estimated + estimate(stage)
    record = dict(stage=stage.name, commands=[shlex.join(c) for c in stage.commands],
                  seconds=seconds)
    if code != 0:
      if not stage.may_fail:
        raise StageError(f'stage {stage.name} failed (exit {code}) running {shlex.join(failed)}; '
                         f'see {os.path.join(args.out, stage.name, "log.txt")}; rerun to resume')
      record.update(failed=True, exit_code=code, failed_command=shlex.join(failed))
    else:
      record['result'] = stage.result_fn(stage)
    with open(path + '.tmp', 'w') as f:
      json.dump(record, f, indent=1)
    os.replace(path + '.tmp', path)  # a done marker is whole or absent
    records[stage.name] = record
    print(f'[{i + 1}/{len(stages)}] {stage.name}: '
          f'{"FAILED (recorded)" if code else "done"} in {hms(seconds)}'
          f'{result_line(record.get("result"))}', flush=True)
  return records


def result_line(result):
  """'; hat_ebm 11.29, generator 26.24' of a stage's numbers (not the per-run lists or the data's
  own FID), or '' when it has none."""
  numbers = [f'{k} {v:.2f}' for k, v in (result or {}).items()
             if isinstance(v, (int, float)) and k != 'data']
  return f'; {", ".join(numbers)}' if numbers else ''


class StageError(RuntimeError):
  pass


# ---- the report --------------------------------------------------------------------------------
def stats(values):
  """'mean ± std' (population std over seeds) of the finite values, or '–'."""
  values = [v for v in values if v is not None]
  if not values:
    return '–', None, None
  mean = sum(values) / len(values)
  std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
  return f'{mean:.2f} ± {std:.2f}', mean, std


def collect(records, prefix, key, seeds):
  values = []
  for seed in seeds:
    rec = records.get(f'{prefix}_s{seed}', {})
    values.append(rec.get('result', {}).get(key))
  return values


def build_report(records, args):
  """(markdown, json-able dict) of the tables."""
  seeds, paper = args.seeds, args.scale == 'paper'
  tables, checks = {}, []
  lines = [f'# Hat EBM reproduction ({args.scale} scale, seeds {", ".join(map(str, seeds))})', '',
           'FID: lower is better (digits scale: small-data FID with the digits classifier, not '
           'comparable with the paper\'s Inception FID); AUROC: higher is better. Each number is '
           f'mean ± std over {len(seeds)} seed(s); its stages list the commands (below).', '']

  def table(title, key, rows, headers):
    lines.extend([f'## {title}', '', '| ' + ' | '.join(headers) + ' |',
                  '|' + '---|' * len(headers)])
    tables[key] = []
    for row in rows:
      lines.append('| ' + ' | '.join(str(c) for c in row['cells']) + ' |')
      tables[key].append(row['json'])
    lines.append('')

  def fid_row(label, prefix, method, paper_value=None):
    text, mean, std = stats(collect(records, prefix, method, seeds))
    cells = [label, text, f'{prefix}_s*'] + ([paper_value or '–'] if paper else [])
    return dict(cells=cells, json=dict(label=label, mean=mean, std=std, stages=f'{prefix}_s*',
                                       per_seed=collect(records, prefix, method, seeds),
                                       paper=paper_value))

  headers = ['', 'FID', 'stages'] + (['paper'] if paper else [])
  synth_cfg = SCALE[args.scale]['configs']['synth']
  synth_rows = [
      fid_row('Hat EBM X = G(Z) + Y', 'synth', 'hat_ebm', PAPER_SYNTHESIS.get(synth_cfg)),
      fid_row('its generator alone G(Z)', 'synth', 'generator')]
  for prefix, config in SCALE[args.scale].get('more_synth', []):
    synth_rows.append(fid_row(f'Hat EBM X = G(Z) + Y, {config}', prefix, 'hat_ebm',
                              PAPER_SYNTHESIS[config]))
  table(f'Table 1: synthesis ({synth_cfg})', 'synthesis', synth_rows, headers)
  refine_rows = []
  for data, suffix in [('cifar10' if paper else 'digits', '')] + [
      (d, f'_{d}') for d, _, _ in SCALE[args.scale].get('more_refine', [])]:
    pr, where = PAPER_REFINE.get(data, {}) if paper else {}, f', {data}' if paper else ''
    refine_rows += [
        fid_row(f'SN-GAN G(Z0){where}', f'refine{suffix}', 'generator', pr.get('generator')),
        fid_row(f'DDLS{where}', f'refine{suffix}', 'ddls', pr.get('ddls')),
        fid_row(f'Hat EBM X = G(Z_K) + Y_K{where}', f'refine{suffix}', 'hat_ebm',
                pr.get('hat_ebm')),
        fid_row(f'SN-GAN scored on its own{where}', f'sngan{suffix}', 'generator',
                pr.get('generator'))]
  table('Table 2: refinement of an SN-GAN', 'refinement', refine_rows, headers)
  table('Retrofit of an autoencoder\'s decoder', 'retrofit', [
      fid_row('decoder of Z ~ N(0, I)', 'retrofit', 'generator'),
      fid_row('Hat EBM X = G(Z_K) + Y_K', 'retrofit', 'hat_ebm', PAPER_RETROFIT['hat_ebm'])],
      headers)
  sets = sorted({k for s in seeds for k in records.get(f'ood_s{s}', {}).get('result', {})})
  ood_rows = []
  for name in sets:
    text, mean, std = stats(collect(records, 'ood', name, seeds))
    cells = [name, text, 'ood_s*'] + ([PAPER_OOD.get(name, '–')] if paper else [])
    ood_rows.append(dict(cells=cells, json=dict(label=name, mean=mean, std=std, stages='ood_s*',
                                                paper=PAPER_OOD.get(name) if paper else None)))
  table('Table 3: OOD detection by the synthesis model\'s energy (AUROC)', 'ood', ood_rows,
        ['OOD set', 'AUROC', 'stages'] + (['paper'] if paper else []))

  def failures(prefix):
    return [s for s in seeds if records.get(f'{prefix}_s{s}', {}).get('failed')]

  ablation_rows = []
  for label, prefix in (('historical bank (the paper)', 'synth'), ('current samples', 'current'),
                        ('cooperative learning (batch-norm generator)', 'coop'),
                        ('refinement with the residual Y (the paper)', 'refine'),
                        ('refinement without the residual, U(z) = H(G(z))', 'noresidual')):
    row = fid_row(label, prefix, 'hat_ebm')
    failed = failures(prefix)
    row['cells'][2] += f' (failed: seeds {failed})' if failed else ''
    row['json']['failed_seeds'] = failed
    ablation_rows.append(row)
  table('Ablations (FID of the Hat EBM samples)', 'ablations', ablation_rows,
        ['', 'FID', 'stages'])

  # The signs the paper reports, checked on the means and seed by seed (said plainly where they
  # do not hold, and when the gap is within the seeds' spread).
  def row(key, label):
    return next(r for r in tables[key] if r['label'].startswith(label))

  def check(text, better, worse, *, failed=()):
    better, worse = row(*better), row(*worse)
    if failed:
      holds = True
      verdict = f'yes: the ablation failed for seeds {list(failed)}'
    elif better['mean'] is None or worse['mean'] is None:
      holds, verdict = None, 'not measured'
    else:
      holds = better['mean'] < worse['mean']
      pairs = [(b, w) for b, w in zip(better['per_seed'], worse['per_seed'])
               if b is not None and w is not None]
      wins = sum(b < w for b, w in pairs)
      spread = max(better['std'] or 0.0, worse['std'] or 0.0)
      verdict = (f'{"yes" if holds else "NO"} ({better["mean"]:.2f} vs {worse["mean"]:.2f}; '
                 f'on {wins} of {len(pairs)} seeds'
                 + ('; the gap is within one std over seeds' if len(pairs) > 1 and abs(
                     better['mean'] - worse['mean']) < spread else '') + ')')
    checks.append(dict(check=text, holds=holds, verdict=verdict))

  check('Hat EBM beats its SN-GAN', ('refinement', 'Hat EBM'), ('refinement', 'SN-GAN G'))
  check('Hat EBM beats DDLS', ('refinement', 'Hat EBM'), ('refinement', 'DDLS'))
  check('retrofit beats the decoder fed N(0, I)', ('retrofit', 'Hat EBM'),
        ('retrofit', 'decoder'))
  check('historical bank beats current samples', ('ablations', 'historical'),
        ('ablations', 'current'), failed=failures('current'))
  check('historical bank beats cooperative learning', ('ablations', 'historical'),
        ('ablations', 'cooperative'), failed=failures('coop'))
  check('the residual helps refinement (the paper: long refinement runs without it become '
        'unstable, its appendix "Importance of Residual Image for Stability")',
        ('ablations', 'refinement with the'),
        ('ablations', 'refinement without'), failed=failures('noresidual'))
  lines.extend(['## Does each effect have the paper\'s sign?', ''])
  lines.extend(f'- {c["check"]}: {c["verdict"]}' for c in checks)
  lines.append('')

  figures = sorted(os.listdir(os.path.join(args.out, 'figures'))) if os.path.isdir(
      os.path.join(args.out, 'figures')) else []
  lines.extend(['## Figures', ''] + [f'![{f}](figures/{f})' for f in figures] + [''])
  lines.extend(['## Commands', ''])
  for name, rec in records.items():
    lines.append(f'- `{name}` ({hms(rec.get("seconds", 0))}'
                 f'{", FAILED" if rec.get("failed") else ""}):')
    lines.extend(f'  - `{c}`' for c in rec['commands'])
  lines.append('')
  report = dict(scale=args.scale, seeds=seeds, tables=tables, checks=checks, figures=figures,
                stages=records)
  return '\n'.join(lines), report


def collect_figures(out):
  """Copies the Langevin paths and sample grids of the figures stage into out/figures/."""
  source, target = os.path.join(out, 'samples'), os.path.join(out, 'figures')
  os.makedirs(target, exist_ok=True)
  if not os.path.isdir(source):
    return
  for model in sorted(m for m in os.listdir(source)
                      if os.path.isdir(os.path.join(source, m))):
    for name in sorted(os.listdir(os.path.join(source, model))):
      if name == 'langevin_path.png' or (name.startswith('samples_') and name.endswith('.png')):
        shutil.copyfile(os.path.join(source, model, name),
                        os.path.join(target, f'{model}_{name}'))


def write_report(records, args):
  collect_figures(args.out)
  markdown, report = build_report(records, args)
  with open(os.path.join(args.out, 'report.md'), 'w') as f:
    f.write(markdown)
  with open(os.path.join(args.out, 'report.json'), 'w') as f:
    json.dump(report, f, indent=1)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  writer = tf.summary.create_file_writer(os.path.join(args.out, 'tensorboard'))
  with writer.as_default():
    tf.summary.text('report', markdown, step=0)
  writer.close()
  return markdown, report


def take_lock(path):
  """One reproduction per output directory: two would run the same stages at once."""
  if os.path.exists(path):
    with open(path) as f:
      pid = f.read().strip()
    try:
      os.kill(int(pid), 0)
      raise StageError(f'{os.path.dirname(path)} is in use by reproduce.py pid {pid}')
    except (ProcessLookupError, ValueError):
      pass  # left by a process that is gone
  with open(path, 'w') as f:
    f.write(str(os.getpid()))


def release_lock(path):
  try:
    with open(path) as f:
      mine = f.read().strip() == str(os.getpid())
    if mine:
      os.remove(path)
  except OSError:
    pass


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--scale', choices=SCALES, default='digits',
                      help='digits (CPU, ~1 h), paper (the paper configs), tiny (the tests)')
  parser.add_argument('--seeds', default=None,
                      help='comma-separated seeds (default: 0,1,2; paper scale: 0)')
  parser.add_argument('--out', default=None, help='output directory (default: reproduce/<scale>)')
  parser.add_argument('--tpu', default=None, help='TPU name or "local", for the training scripts')
  parser.add_argument('--data_dir', default=None, help='tfds data_dir of the paper datasets')
  parser.add_argument('--inception_path', default=None, help='local TF-GAN Inception for FID')
  parser.add_argument('--parts', default=','.join(PARTS),
                      help='comma-separated parts to run (with the stages they need): '
                      + ', '.join(PARTS))
  parser.add_argument('--dry_run', action='store_true',
                      help="print every stage's commands (and configs) and exit")
  args = parser.parse_args(argv)
  try:
    default = '0' if args.scale == 'paper' else '0,1,2'
    args.seeds = [int(s) for s in (args.seeds or default).split(',') if s.strip()]
  except ValueError:
    parser.error(f'--seeds must be comma-separated integers, not {args.seeds!r}')
  if not args.seeds or min(args.seeds) < 0:
    parser.error('--seeds needs at least one seed >= 0')
  args.parts = [p.strip() for p in args.parts.split(',') if p.strip()]
  unknown = sorted(set(args.parts) - set(PARTS))
  if unknown or not args.parts:
    parser.error(f'--parts: unknown {", ".join(unknown) or "(none given)"}; known: '
                 f'{", ".join(PARTS)}')
  if args.out and '://' in args.out:
    # Locks, logs and done markers are local files, and subprocess logs need a real file handle.
    parser.error(f'--out must be a local directory (it holds the stages\' logs, locks and done '
                 f'markers), not {args.out}')
  args.out = os.path.abspath(args.out or os.path.join('reproduce', args.scale))
  return args


def main(argv=None):
  args = parse_args(argv)
  stages = build_stages(args)
  if args.dry_run:
    for i, stage in enumerate(stages):
      print(f'# [{i + 1}/{len(stages)}] {stage.name}')
      for cmd in stage.commands:
        print(shlex.join(cmd))
    return 0
  os.makedirs(args.out, exist_ok=True)
  lock = os.path.join(args.out, 'reproduce.pid')
  try:
    take_lock(lock)
    records = run_all(stages, args)
  except StageError as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  except KeyboardInterrupt:
    print('error: interrupted; rerun the same command to resume', file=sys.stderr)
    return 130
  finally:
    release_lock(lock)
  markdown, _ = write_report(records, args)
  print(markdown)
  print(f'\nreport: {os.path.join(args.out, "report.md")} (and report.json, figures/, '
        f'TensorBoard text in {os.path.join(args.out, "tensorboard")})')
  return 0


if __name__ == '__main__':
  sys.exit(main())
