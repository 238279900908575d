"""tf_hat_ebm.reproduction in-process: the stage table, the runner's done / resume / refuse logic
(commands faked, or tiny `python -c` ones) and the report from made-up records."""
import json
import os
import signal
import threading
import time

import pytest

from tf_hat_ebm import config as config_lib
from tf_hat_ebm.reproduction import pipeline
from tf_hat_ebm.reproduction import report as report_lib
from tf_hat_ebm.reproduction import runner as runner_lib
from tf_hat_ebm.reproduction import stages as stages_lib


def options(tmp_path, **kwargs):
  return stages_lib.Options(out=str(tmp_path), **kwargs)


def by_name(stages):
  return {s.name: s for s in stages}


# ---- the stage table ---------------------------------------------------------------------------
def test_digits_stages_use_the_papers_names_and_each_configs_own_length(tmp_path):
  stages = stages_lib.build(options(tmp_path, seeds=(0, 1)))
  names = [s.name for s in stages]
  assert names[:6] == ['synthesis_s0', 'sngan_s0', 'refinement_s0', 'autoencoder_s0',
                       'retrofit_s0', 'ood_s0']
  assert [n for n in names if n.endswith('_s1') and not n.startswith(
      ('synthesis', 'sngan', 'refinement', 'autoencoder', 'retrofit', 'ood'))] == [
          'current_s1', 'coop_s1', 'coop_bn_s1', 'noresidual_s1']
  assert names[-1] == 'figures' and set(stages[-1].after) == set(names[:-1])
  lines = [line for s in stages for line in s.command_lines()]
  assert not any('num_steps' in line for line in lines)  # each config's own length
  assert all(line.startswith('python experiments/') for line in lines)
  assert not any(str(tmp_path) in line or ' /' in line or '=/' in line for line in lines)
  s = by_name(stages)
  assert s['refinement_s1'].after == ('sngan_s1',) and s['retrofit_s0'].after == (
      'autoencoder_s0',) and s['ood_s1'].after == ('synthesis_s1',)
  assert s['coop_s0'].overrides['training.generator_update'] == 'cooperative'
  assert s['coop_bn_s0'].overrides['training.generator_update'] == 'cooperative_bn'
  noresidual = s['noresidual_s0']
  assert noresidual.kind == 'refinement' and noresidual.reference == 'refinement_s0'
  assert {k: v for k, v in noresidual.overrides.items() if 'residual' in k} == {
      'langevin.use_residual': False, 'sampling.use_residual': False}
  assert noresidual.config == s['refinement_s0'].config == 'experiments/configs/digits_refine.py'
  assert not any('perf.precision' in line for line in lines)  # digits: the configs' own


def test_paper_scale_pins_float32_unless_told_and_can_import_the_published_sngan(tmp_path):
  stages = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,))))
  for name in ('synthesis_s0', 'refinement_s0', 'retrofit_s0', 'coop_bn_s0',
               'synthesis_imagenet128_large_s0'):
    assert '--config.perf.precision=float32' in stages[name].commands[0], name
  assert not any('perf.precision' in a for a in stages['sngan_s0'].commands[0])  # has no perf
  assert stages['sngan_s0'].label == 'retrained SN-GAN'
  bf16 = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,),
                                          precision='bfloat16')))
  assert '--config.perf.precision=bfloat16' in bf16['synthesis_s0'].commands[0]
  release = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,),
                                             release_sngan='/rel/c10')))
  assert 'sngan_s0' not in release and release['sngan_release'].label == 'published SN-GAN'
  assert release['sngan_release'].commands[0][:2] == ['python', 'experiments/import_release.py']
  assert '--hat=/rel/c10/ebm.ckpt' in release['sngan_release'].commands[0]
  assert release['refinement_s0'].after == ('sngan_release',)
  assert '--config.generator.path=sngan_release' in release['noresidual_s0'].commands[0]
  with pytest.raises(ValueError, match='--release_sngan .* needs --scale=paper'):
    stages_lib.build(options(tmp_path, release_sngan='/rel/c10'))


def test_tiny_is_a_config_size_not_a_scale(tmp_path):
  stages = by_name(stages_lib.build(options(tmp_path, seeds=(0,), size='tiny',
                                            parts=('synthesis',))))
  assert list(stages) == ['synthesis_s0']
  assert stages['synthesis_s0'].commands[0][2] == (
      '--config=experiments/configs/digits_synth.py:tiny')
  assert '--num_samples=20' in stages['synthesis_s0'].commands[1]
  config = config_lib.sized(config_lib.load_file(os.path.join(
      os.path.dirname(__file__), '..', 'experiments', 'configs', 'digits_sngan.py')), 'tiny')
  assert (config.training.num_steps, config.training.n_dis) == (2, 1)
  assert 'bank_size' not in config.training  # only the fields the config has
  with pytest.raises(ValueError, match="config size 'huge'"):
    config_lib.sized(config, 'huge')


def test_dry_run_prints_commands_and_resolved_configs_and_writes_nothing(tmp_path):
  printed = []
  out = tmp_path / 'out'
  pipeline.reproduce(options(out, scale='paper', seeds=(0,), tpu='my-tpu', dry_run=True),
                     print_fn=printed.append)
  configs = [json.loads(p[len('# config: '):]) for p in printed if p.startswith('# config: ')]
  refine = next(c for c in configs if c['name'] == 'cifar10_refine')
  assert refine['generator']['path'] == 'sngan_s0' and refine['perf']['precision'] == 'float32'
  assert sum('--tpu=my-tpu' in p for p in printed) == len(configs) == 14
  assert not out.exists()


# ---- options and --out ------------------------------------------------------------------------
@pytest.mark.parametrize('kwargs, message', [
    (dict(seeds=(0, 1, 0)), '--seeds repeats 0: each seed once'),
    (dict(out=''), '--out is empty'),
    (dict(out='gs://bucket/repro'), '--out must be a local directory'),
    (dict(parts=('synthesis', 'bogus')), 'unknown bogus; known: synthesis, refinement'),
    (dict(jobs='0'), '--jobs=0: give a number >= 1 or auto'),
    (dict(size='huge'), '--size=huge: known sizes are tiny'),
])
def test_bad_options_are_one_line_errors(tmp_path, kwargs, message):
  o = stages_lib.Options(**dict(dict(out=str(tmp_path)), **kwargs))
  with pytest.raises(ValueError, match=message.replace('(', r'\(')):
    pipeline.check_options(o)


def test_out_not_made_by_reproduce_is_refused_and_overwrite_keeps_foreign_files(tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  (out / 'notes.txt').write_text('mine')
  entries = ['synthesis_s0', 'report.md', pipeline.MARKER]
  with pytest.raises(ValueError, match='not empty .* not made by reproduce.py'):
    pipeline.claim(str(out), entries, overwrite=False)
  assert pipeline.claim(str(out), entries, overwrite=True) == sorted(entries)
  (out / 'report.md').write_text('the user\'s report')
  with pytest.raises(ValueError, match='report.md exists and was not written by reproduce.py'):
    pipeline.claim(str(out), entries, overwrite=True)
  assert (out / 'report.md').read_text() == 'the user\'s report'
  (out / 'file').write_text('x')
  with pytest.raises(ValueError, match='is a file'):
    pipeline.claim(str(out / 'file'), entries, overwrite=True)
  (out / pipeline.MARKER).write_text('{garbled')
  with pytest.raises(ValueError, match='is not reproduce.py\'s marker'):
    pipeline.claim(str(out), entries, overwrite=True)


def test_own_out_is_resumed_and_lock_that_is_a_directory_is_one_line(tmp_path):
  out = tmp_path / 'out'
  pipeline.mark(str(out), ['synthesis_s0', pipeline.LOCK])
  (out / 'synthesis_s0').mkdir()
  claimed = pipeline.claim(str(out), ['synthesis_s0'], overwrite=False)
  assert claimed == [pipeline.LOCK, 'synthesis_s0']
  (out / pipeline.LOCK).mkdir()
  o = options(out, seeds=(0,), parts=('synthesis',))
  with pytest.raises(PermissionError, match='is a directory, not a lock file'):
    pipeline.reproduce(o, run_command=lambda *a: 0, print_fn=lambda *a, **k: None)


# ---- the runner ---------------------------------------------------------------------------------
class FakeScripts:
  """Stands in for the experiment scripts: training writes config.json and checkpoints up to
  `reach` of `num_steps`; evaluation writes fid.json / ood.json; `codes` forces exit codes."""

  def __init__(self, out, reach=4, num_steps=4, codes=None, errors=None):
    self.out, self.reach, self.num_steps = out, reach, num_steps
    self.codes, self.errors, self.calls = codes or {}, errors or {}, []

  def __call__(self, argv, log, env):
    script = os.path.basename(argv[1])
    flags = dict(a[2:].split('=', 1) for a in argv[2:] if a.startswith('--') and '=' in a)
    workdir = os.path.join(self.out, flags.get('workdir', ''))
    self.calls.append((script, flags.get('workdir')))
    key = (script, flags.get('workdir'))
    if key in self.errors:
      log.write(self.errors[key] + '\n')
      log.flush()
    if script.startswith('train_'):
      os.makedirs(os.path.join(workdir, 'checkpoints'), exist_ok=True)
      with open(os.path.join(workdir, 'config.json'), 'w') as f:
        json.dump(dict(training=dict(num_steps=self.num_steps)), f)
      with open(os.path.join(workdir, 'run_info.json'), 'w') as f:
        json.dump(dict(runs=[dict(precision='float32')]), f)
      open(os.path.join(workdir, 'checkpoints', f'ckpt-{self.reach}.index'), 'w').close()
    elif self.codes.get(key, 0) == 0 and script == 'evaluate_fid.py':
      with open(os.path.join(workdir, 'fid.json'), 'w') as f:
        json.dump(dict(hat_ebm=[10.0, 12.0], generator=[20.0, 20.0], data_test_vs_train=3.0), f)
    elif self.codes.get(key, 0) == 0 and script == 'evaluate_ood.py':
      with open(os.path.join(workdir, 'ood.json'), 'w') as f:
        json.dump(dict(sets=dict(noise=dict(auroc=0.9))), f)
    return self.codes.get(key, 0)


def run(o, fake, stages=None):
  stages = stages if stages is not None else stages_lib.build(o)
  return runner_lib.Runner(stages, o, fake, print_fn=lambda *a, **k: None).run_all()


def test_a_stage_is_done_only_when_training_reached_its_step_and_evaluation_finished(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  # Training exits 0 at step 2 of 4 (SIGTERM saves and exits 0): resumed, never scored.
  fake = FakeScripts(str(tmp_path), reach=2)
  with pytest.raises(runner_lib.StageError, match='synthesis_s0 stopped at step 2 of 4 .* '
                     'rerun to resume'):
    run(o, fake)
  assert not (tmp_path / 'synthesis_s0' / 'done.json').exists()
  # Killed by a signal: the same.
  fake = FakeScripts(str(tmp_path), reach=2, codes={('train_synthesis.py', 'synthesis_s0'): -9})
  with pytest.raises(runner_lib.StageError, match=r'stopped \(signal 9\) .* rerun to resume'):
    run(o, fake)
  fake = FakeScripts(str(tmp_path), reach=4)
  records = run(o, fake)
  record = records['synthesis_s0']
  assert record['result']['hat_ebm'] == 11.0 and record['result']['hat_ebm_runs'] == [10.0, 12.0]
  assert (record['scale'], record['size'], record['step'], record['num_steps']) == (
      'digits', None, 4, 4)
  assert (record['precision'], record['computed_in']) == (None, 'float32')
  assert record['config']['path'] == 'synthesis_s0/config.json' and len(
      record['config']['sha256']) == 64
  assert [e['exit'] for e in record['exits']] == [0, 0]
  assert record['exits'][0]['command'].startswith('python experiments/train_synthesis.py')
  with open(tmp_path / 'synthesis_s0' / 'done.json') as f:
    assert json.load(f) == record
  # Done: nothing runs again.
  again = FakeScripts(str(tmp_path))
  assert run(o, again) == records and again.calls == []


def test_finished_training_and_evaluation_are_not_rerun_on_resume(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  fake = FakeScripts(str(tmp_path), codes={('evaluate_fid.py', 'synthesis_s0'): 1},
                     errors={('evaluate_fid.py', 'synthesis_s0'): 'error: out of samples'})
  with pytest.raises(runner_lib.StageError, match='synthesis_s0 failed \\(exit 1\\) running '
                     'python experiments/evaluate_fid.py .*: out of samples'):
    run(o, fake)
  fake = FakeScripts(str(tmp_path))
  record = run(o, fake)['synthesis_s0']
  assert fake.calls == [('evaluate_fid.py', 'synthesis_s0')]  # trained to its step: skipped
  assert record['exits'][0]['exit'] == 'skipped: trained to step 4'


GUARD_LINE = ('error: runaway at step 500: energy_diff 1e+04 for 3 checks in a row; last good '
              'checkpoint: ckpt-250; lower optim.hat_lr')


def test_ablation_arm_counts_a_guard_stop_but_not_another_failure(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  stages = stages_lib.build(options(tmp_path, seeds=(0,), parts=('ablations',)))
  arms = [s for s in stages if s.name in ('synthesis_s0', 'current_s0')]
  fake = FakeScripts(str(tmp_path), reach=2,
                     codes={('train_synthesis.py', 'current_s0'): 1},
                     errors={('train_synthesis.py', 'current_s0'): GUARD_LINE})
  fake.reach = 4
  records = run(o, fake, arms)
  assert records['current_s0']['failed'] and records['current_s0']['guard'].startswith(
      'runaway at step 500')
  assert 'result' not in records['current_s0']
  # Another error of an arm (or any stage) is a failure, never evidence.
  other = [s for s in stages if s.name == 'coop_s0']
  fake = FakeScripts(str(tmp_path), codes={('train_synthesis.py', 'coop_s0'): 1},
                     errors={('train_synthesis.py', 'coop_s0'): 'error: out of memory'})
  with pytest.raises(runner_lib.StageError, match='coop_s0 failed .*out of memory'):
    run(o, fake, other)
  assert not (tmp_path / 'coop_s0' / 'done.json').exists()


@pytest.mark.parametrize('edit, message', [
    (dict(scale='paper'), 'holds a result of scale paper, not scale digits'),
    (dict(size='tiny'), 'holds a result of scale digits, config size tiny, not scale digits'),
    (dict(commands=['python experiments/train_synthesis.py --config.seed=7']),
     'was made by other commands'),
    (None, 'is not a stage record'),
])
def test_records_of_another_scale_or_config_or_garbled_are_refused(tmp_path, edit, message):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  run(o, FakeScripts(str(tmp_path)))
  path = tmp_path / 'synthesis_s0' / 'done.json'
  record = json.loads(path.read_text())
  path.write_text('{"stage": ' if edit is None else json.dumps(dict(record, **edit)))
  with pytest.raises(runner_lib.StageError, match=message):
    run(o, FakeScripts(str(tmp_path)))


def test_independent_stages_run_concurrently_and_dependencies_wait(tmp_path, monkeypatch):
  monkeypatch.delenv('TF_NUM_INTRAOP_THREADS', raising=False)
  o = options(tmp_path, seeds=(0,), parts=('refinement', 'retrofit'), jobs='2')
  lock, running, log, threads = threading.Lock(), set(), [], []
  fake = FakeScripts(str(tmp_path))

  def slow(argv, out_log, env):
    name = [a for a in argv if a.startswith('--workdir=')][0][len('--workdir='):]
    with lock:
      running.add(name)
      log.append(set(running))
    time.sleep(0.05)
    code = fake(argv, out_log, env)
    with lock:
      running.discard(name)
    threads.append(env.get('TF_NUM_INTRAOP_THREADS'))
    return code

  records = run(o, slow)
  assert set(records) == {'sngan_s0', 'refinement_s0', 'autoencoder_s0', 'retrofit_s0'}
  assert max(len(r) for r in log) == 2  # two at a time, never more
  # The two first-ready stages (the SN-GAN, the autoencoder) share the cores; a stage that runs
  # alone keeps them all.
  assert threads[:2] == [str(max(1, (os.cpu_count() or 1) // 2))] * 2
  assert 'TF_NUM_INTRAOP_THREADS' not in runner_lib.Runner([], o).env(1)
  order = [w for script, w in fake.calls if script.startswith('train_')]
  assert order.index('refinement_s0') > order.index('sngan_s0')
  assert order.index('retrofit_s0') > order.index('autoencoder_s0')
  assert runner_lib.resolve_jobs('auto', 'paper') == 1
  assert runner_lib.resolve_jobs('auto', 'digits', cpus=2) == 2


def test_sigterm_stops_the_running_child_and_leaves_the_stage_resumable(tmp_path):
  stage = stages_lib.Stage('synthesis_s0', 'synthesis', 'synthesis',
                           [['python', '-c', 'import time; time.sleep(60)']], [None],
                           workdir='synthesis_s0')
  o = options(tmp_path, seeds=(0,), jobs='1')
  runner = runner_lib.Runner([stage], o, print_fn=lambda *a, **k: None)

  def terminate_when_started():
    while not runner.children:
      time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)

  threading.Thread(target=terminate_when_started, daemon=True).start()
  start = time.time()
  with pytest.raises(KeyboardInterrupt):
    runner.run_all()
  assert time.time() - start < 30 and not runner.children
  assert not (tmp_path / 'synthesis_s0' / 'done.json').exists()
  assert signal.getsignal(signal.SIGTERM) is not runner_lib._raise_interrupt  # restored


# ---- the report -------------------------------------------------------------------------------
def made_up(fids, failed=(), scale='digits'):
  records = {f'{prefix}_s{seed}': dict(result=r, commands=['cmd'], seconds=1.0, scale=scale)
             for prefix, rows in fids.items() for seed, r in enumerate(rows)}
  records.update({name: dict(failed=True, guard='runaway at step 5', commands=['cmd'])
                  for name in failed})
  return records


def test_report_checks_signs_per_seed_and_counts_guard_stops_beside_a_healthy_reference(
    tmp_path):
  records = made_up({
      'synthesis': [dict(hat_ebm=10.0, generator=20.0)] * 2,
      'sngan': [dict(generator=40.0)] * 3,
      'refinement': [dict(hat_ebm=h, generator=40.0, ddls=d) for h, d in
                     ((14.0, 39.0), (12.0, 11.0), (16.0, 41.0))],
      'retrofit': [dict(hat_ebm=15.0, generator=200.0)] * 3,
      'noresidual': [dict(hat_ebm=h) for h in (13.0, 12.5, 15.0)],
      'coop_bn': [dict(hat_ebm=90.0)] * 3,
  }, failed=('current_s0', 'current_s2', 'coop_s0', 'coop_s1'))
  records['coop_s2'] = dict(result=dict(hat_ebm=9.0), commands=['cmd'])
  markdown, data = report_lib.build_report(records, options(tmp_path, seeds=(0, 1, 2)))
  verdicts = {c['check'].split(' (')[0]: c['verdict'] for c in data['checks']}
  assert verdicts['Hat EBM beats its SN-GAN'] == 'yes (14.00 vs 40.00; on 3 of 3 seeds)'
  assert verdicts['Hat EBM beats DDLS'] == 'yes (14.00 vs 30.33; on 2 of 3 seeds)'
  # current_s2's reference synthesis_s2 never finished: only seed 0 counts.
  assert verdicts['historical bank beats current samples'] == (
      'yes: the ablation was stopped by the guard for seeds [0]')
  ablations = {r['label']: r for r in data['tables']['ablations']}
  assert ablations['current samples']['not_counted_seeds'] == [2]
  assert verdicts['historical bank beats cooperative learning'] == (
      'yes: the ablation was stopped by the guard for seeds [0, 1]')
  assert verdicts['historical bank beats cooperative learning with batch norm'] == (
      'yes (10.00 vs 90.00; on 2 of 2 seeds)')
  assert verdicts['the residual helps refinement'] == (
      'NO (14.00 vs 13.50; on 1 of 3 seeds; the gap is within one std over seeds)')
  assert '| Hat EBM X = G(Z_K) + Y_K | 14.00 ± 1.63 | refinement_s* |' in markdown
  assert markdown.index('## Table 1: refinement') < markdown.index('## Table 2: synthesis')
  assert '| SN-GAN G(Z0) | 40.00 ± 0.00 | refinement_s* |' in markdown
  assert '| retrained SN-GAN scored on its own | 40.00 ± 0.00 | sngan_s* |' in markdown
  assert data['tables']['refinement'][2]['per_seed'] == [14.0, 12.0, 16.0]
  assert '| current samples | – | current_s* (stopped by the guard: seeds [0]) (stopped, ' \
         'reference not healthy: seeds [2]) |' in markdown
  assert 'Training precision: each config\'s own' in markdown
  assert runner_lib.result_line(dict(result=dict(hat_ebm=13.213, hat_ebm_runs=[13.213],
                                                 generator=23.0, data=2.96))) == (
      '; hat_ebm 13.21, generator 23.00')
  assert runner_lib.result_line({}) == ''


def test_paper_report_from_one_seed_is_well_formed_with_the_papers_numbers(tmp_path):
  records = made_up({
      'synthesis': [dict(hat_ebm=20.0, generator=30.0)],
      'refinement': [dict(hat_ebm=15.0, generator=19.0)],
      'current': [dict(hat_ebm=25.0)],
  })
  records['sngan_release'] = dict(result=dict(generator=18.6), commands=['cmd'], seconds=1.0)
  o = options(tmp_path, scale='paper', seeds=(0,), release_sngan='/rel')
  markdown, data = report_lib.build_report(records, o, figures=['synthesis_langevin_path.png'])
  tables = [block for block in markdown.split('## ') if '|---|' in block]
  for block in tables:
    widths = {line.count('|') for line in block.splitlines() if line.startswith('|')}
    assert len(widths) == 1, block  # every row as wide as its header
  assert '| Hat EBM X = G(Z) + Y | 20.00 ± 0.00 | synthesis_s* | 19.30 ± 0.15 |' in markdown
  assert '| published SN-GAN scored on its own, cifar10 | 18.60 ± 0.00 | sngan_release | ' \
         '18.58 |' in markdown
  assert 'Training precision: float32 (pinned for the paper scale' in markdown
  assert data['precision'] == 'float32' and data['sngan'] == 'published'
  assert '![synthesis_langevin_path.png](figures/synthesis_langevin_path.png)' in markdown
