"""tf_hat_ebm.reproduction in-process: the stage table, the runner's done / resume / refuse logic
(commands faked, or tiny `python -c` ones) and the report from made-up records."""
import json
import os
import shutil
import signal
import threading
import time

import ml_collections
import pytest

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import interrupts
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import pipeline
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import report as report_lib
from tf_hat_ebm.reproduction import runner as runner_lib
from tf_hat_ebm.reproduction import stages as stages_lib

from conftest import fid_result


def options(tmp_path, **kwargs):
  return stages_lib.Options(out=str(tmp_path), **kwargs)


def by_name(stages):
  return {s.name: s for s in stages}


# ---- the stage table ---------------------------------------------------------------------------
def test_digits_stages_use_the_papers_names_and_each_configs_own_length(tmp_path):
  stages = stages_lib.build(options(tmp_path, seeds=(0, 1)))
  names = [s.name for s in stages]
  assert names[:7] == ['synthesis_s0', 'sngan_s0', 'refinement_s0', 'refine_own_s0',
                       'autoencoder_s0', 'retrofit_s0', 'ood_s0']
  assert [n for n in names if n.endswith('_s1') and not n.startswith(
      ('synthesis', 'sngan', 'refine', 'autoencoder', 'retrofit', 'ood', 'nearood'))] == [
          'current_s1', 'coop_bn_s1', 'paper_time_s1', 'window_s1']  # coop without BN: current;
  # the arm without Y dropped at this scale
  # The plateau rule's end window: each scored run's kept checkpoints before its end.
  window = by_name(stages)['window_s0']
  assert window.after == ('synthesis_s0', 'sngan_s0', 'refinement_s0', 'refine_own_s0',
                          'retrofit_s0', 'current_s0', 'coop_bn_s0', 'paper_time_s0')
  # Enough kept for the rule's 5 checkpoints in the last third (2/3, three kept, the end), each
  # scored on latents of its own (--seed=its step).
  assert window.outputs[:3] == ['window_s0/synthesis_s0_w1.json', 'window_s0/synthesis_s0_w2.json',
                                'window_s0/synthesis_s0_w3.json']
  assert by_name(stages)['synthesis_s0'].overrides['training.keep_checkpoints'] == 4
  assert window.command_lines()[0].endswith(
      '--checkpoint=synthesis_s0/checkpoints/ckpt-7500 --output=window_s0/synthesis_s0_w1.json '
      '--seed=7500 --nobaselines')
  assert ('--checkpoint=retrofit_s0/checkpoints/ckpt-2200' in window.command_lines()[14]
          and not any(c[-1] == '--nobaselines' for c in window.argvs
                      if '--workdir=sngan_s0' in c))
  assert window.keep_going and window.inputs[0] == 'synthesis_s0/fid.json'
  assert names[-2:] == ['figures', 'calibration']
  assert set(stages[-2].after) == set(names[:-2]) and stages[-1].after == ('figures',)
  lines = [line for s in stages for line in s.command_lines()]
  shortened = ('current', 'coop_bn', 'nearood')  # the scale's shorter arms
  assert not any('num_steps' in line for s in stages if not s.name.startswith(shortened)
                 for line in s.command_lines())  # each config's own length
  assert all(line.startswith('python experiments/') for line in lines)
  assert not any(str(tmp_path) in line or ' /' in line or '=/' in line for line in lines)
  s = by_name(stages)
  assert s['refinement_s1'].after == ('sngan_s1',) and s['retrofit_s0'].after == (
      'autoencoder_s0',) and s['ood_s1'].after == ('synthesis_s1',)
  # a new hat on the synthesis run's own G, after that run; the synthesis at the paper's time
  assert s['refine_own_s1'].after == ('synthesis_s1',) and s['refine_own_s1'].command_lines()[
      0].startswith('python experiments/train_refinement.py --config=experiments/configs/'
                    'digits_refine.py --workdir=refine_own_s1 --config.seed=1 '
                    '--config.generator.source=synthesis --config.generator.path=synthesis_s1')
  assert s['paper_time_s0'].config == 'experiments/configs/digits_synth_paper_time.py'
  assert s['paper_time_s0'].reference == 'synthesis_s0'
  paper_time = stages_lib.resolved_config(s['paper_time_s0'])
  assert paper_time.langevin.step_size == pytest.approx(
      stages_lib.resolved_config(s['synthesis_s0']).langevin.step_size * (50 / 20) ** 0.5)
  assert s['current_s0'].overrides['training.generator_update'] == 'current'
  assert s['coop_bn_s0'].overrides['training.generator_update'] == 'cooperative_bn'
  assert 'noresidual_s0' not in s  # the scale drops it (departures.json says why)
  noresidual = by_name(stages_lib.build(options(tmp_path, seeds=(0,), size='tiny')))[
      'noresidual_s0']  # the tests' size keeps it
  assert noresidual.kind is plan.KINDS['refinement'] and noresidual.reference == 'refinement_s0'
  assert {k: v for k, v in noresidual.overrides.items() if 'residual' in k} == {
      'langevin.use_residual': False, 'sampling.use_residual': False}
  assert noresidual.config == s['refinement_s0'].config + ':tiny' == (
      'experiments/configs/digits_refine.py:tiny')
  assert stages_lib.resolved_config(s['refinement_s0']).training.num_steps == 2000
  # the arm is scored alone: its SN-GAN and DDLS rows would repeat the reference's
  assert noresidual.argvs[1][-1] == '--nobaselines' and '--nobaselines' not in s[
      'refinement_s0'].argvs[1] and '--nobaselines' not in s['current_s0'].argvs[1]
  # Arms whose verdict is made early run shorter, unstable ones with a checkpoint every 250
  # steps; the ETA counts their share of the config's steps.
  short = ('training.num_steps', 'training.checkpoint_every')
  assert {k: s['current_s0'].overrides[k] for k in short} == {
      'training.num_steps': 3000, 'training.checkpoint_every': 250}
  assert s['coop_bn_s1'].length == s['current_s1'].length == pytest.approx(3000 / 9000)
  assert s['nearood_s0'].overrides['training.num_steps'] == 2000 and s['nearood_s0'].length == (
      pytest.approx(2000 / 9000))
  assert s['synthesis_s0'].length == 1.0
  assert s['current_s0'].overrides['training.archive_every'] == 2000  # 2/3 of 3,000
  assert window.outputs[-3:] == ['window_s0/paper_time_s0_w1.json',
                                 'window_s0/paper_time_s0_w2.json',
                                 'window_s0/paper_time_s0_w3.json']
  # the plateau rule's checkpoint at 2/3 of training: archived, scored after the end's FID
  assert s['synthesis_s0'].overrides['training.archive_every'] == 6000
  assert s['sngan_s0'].overrides['training.archive_every'] == 3200  # on the 25-step loop grid
  assert s['retrofit_s1'].command_lines()[0].endswith(
      '--config.training.archive_every=1600 --config.training.keep_checkpoints=4')
  assert s['synthesis_s0'].command_lines()[2] == (
      'python experiments/evaluate_fid.py --workdir=synthesis_s0 --num_samples=1000 --runs=2 '
      '--feature_cache_dir=feature_cache --checkpoint=synthesis_s0/checkpoints/archive/ckpt-6000 '
      '--output=synthesis_s0/fid_plateau.json --seed=6000 --nobaselines')
  assert s['refinement_s0'].outputs == [None, 'refinement_s0/fid.json',
                                        'refinement_s0/fid_plateau.json']
  assert '--nobaselines' not in s['sngan_s0'].argvs[2]  # its one row is the generator
  assert 'archive_every' not in ' '.join(s['autoencoder_s0'].command_lines())  # not scored
  assert not any('perf.precision' in line for line in lines)  # digits: the configs' own
  # Table 3's near-OOD set: a model of digits 0-4 scored on the others.
  assert s['nearood_s1'].command_lines() == [
      'python experiments/train_synthesis.py --config=experiments/configs/digits_synth.py '
      '--workdir=nearood_s1 --config.seed=1 --config.data.classes=0,1,2,3,4 '
      '--config.training.num_steps=2000',
      'python experiments/evaluate_ood.py --workdir=nearood_s1 --sets=other_digits']
  assert s['nearood_s1'].result is plan.OOD and s['nearood_s1'].outputs[-1] == 'nearood_s1/ood.json'
  assert stages_lib.resolved_config(s['nearood_s1']).data.classes == (0, 1, 2, 3, 4)
  figures = s['figures'].command_lines()
  assert sum('compare_baselines.py' in c for c in figures) == 2  # refinement and retrofit
  assert all('--num_samples=500' in c for c in figures if 'sample.py' in c)
  calibrate = s['calibration'].argvs[0]
  assert calibrate[1] == 'experiments/calibrate_fid.py' and '--num=1000' in calibrate
  assert 'retrofit=samples/retrofit/samples.npz' in calibrate[-3]
  # the ETA: a refinement's FID (DDLS's chain too) costs more than a synthesis' FID
  o, seconds = options(tmp_path), stages_lib.SCALES['digits'].seconds
  assert stages_lib.estimate(s['refinement_s0'], o) == seconds['refinement'] + seconds[
      'fid_refinement'] + seconds['fid'] > stages_lib.estimate(s['current_s0'], o) == (
          pytest.approx(seconds['synthesis'] * 3000 / 9000 + 2 * seconds['fid']))
  assert stages_lib.estimate(s['synthesis_s0'], o) == seconds['synthesis'] + 2 * seconds['fid']
  assert stages_lib.estimate(s['autoencoder_s0'], o) == seconds['autoencoder']  # not scored


def test_paper_scale_pins_float32_unless_told_and_can_import_the_published_sngan(tmp_path):
  stages = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,))))
  for name in ('synthesis_s0', 'refinement_s0', 'retrofit_s0', 'coop_bn_s0',
               'synthesis_imagenet128_large_s0'):
    assert '--config.perf.precision=float32' in stages[name].argvs[0], name
  assert not any('perf.precision' in a for a in stages['sngan_s0'].argvs[0])  # has no perf
  assert stages['sngan_s0'].label == 'retrained SN-GAN'
  bf16 = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,),
                                          precision='bfloat16')))
  assert '--config.perf.precision=bfloat16' in bf16['synthesis_s0'].argvs[0]
  figures = ' '.join(stages['figures'].command_lines())  # CelebA and ImageNet grids too
  for model in ('synthesis_celeba', 'synthesis_imagenet128_large', 'refinement_celeba',
                'coop_bn'):
    assert f'--workdir={model}_s0 --output=samples/{model} ' in figures, model
  assert '--workdir=refinement_celeba_s0 --out=samples/refinement_celeba_baselines' in figures
  assert 'calibration' not in stages  # the digits classifier's calibration: digits scale only
  release = by_name(stages_lib.build(options(tmp_path, scale='paper', seeds=(0,),
                                             release_sngan='/rel/c10')))
  assert 'sngan_s0' not in release and release['sngan_release'].label == 'published SN-GAN'
  assert release['sngan_release'].argvs[0][:2] == ['python', 'experiments/import_release.py']
  assert '--hat=/rel/c10/ebm.ckpt' in release['sngan_release'].argvs[0]
  assert release['refinement_s0'].after == ('sngan_release',)
  assert '--config.generator.path=sngan_release/generator' in release['noresidual_s0'].argvs[0]
  with pytest.raises(ValueError, match='--release_sngan .* needs --scale=paper'):
    stages_lib.build(options(tmp_path, release_sngan='/rel/c10'))


def test_tiny_is_a_config_size_not_a_scale(tmp_path):
  stages = by_name(stages_lib.build(options(tmp_path, seeds=(0,), size='tiny',
                                            parts=('synthesis',))))
  assert list(stages) == ['synthesis_s0']
  assert stages['synthesis_s0'].argvs[0][2] == (
      '--config=experiments/configs/digits_synth.py:tiny')
  assert '--num_samples=20' in stages['synthesis_s0'].argvs[1]
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
  trained = [s for s in stages_lib.build(options(out, scale='paper', seeds=(0,))) if s.kind.trains]
  assert sum('--tpu=my-tpu' in p for p in printed) == len(configs) == len(trained) > 0
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
    elif self.codes.get(key, 0) == 0 and script == 'evaluate_fid.py' and 'output' in flags:
      with open(os.path.join(self.out, flags['output']), 'w') as f:  # an earlier checkpoint's
        json.dump(fid_result(int(flags['checkpoint'].rsplit('-', 1)[1]), hat_ebm=[12.0, 13.0]), f)
    elif self.codes.get(key, 0) == 0 and script == 'evaluate_fid.py':
      with open(os.path.join(workdir, 'fid.json'), 'w') as f:
        json.dump(fid_result(self.reach, 3.0, hat_ebm=[10.0, 12.0], generator=[20.0, 20.0]), f)
    elif self.codes.get(key, 0) == 0 and script == 'evaluate_ood.py':
      with open(os.path.join(workdir, 'ood.json'), 'w') as f:
        json.dump(dict(sets=dict(noise=dict(auroc=0.9))), f)
    return self.codes.get(key, 0)


@pytest.mark.parametrize('num_steps, every, keep, steps', [
    (6000, 500, 3, [5000, 5500]), (2400, 200, 3, [2000, 2200]), (2500, 1000, 3, [2000]),
    (6000, 500, 1, []), (2, 2, 3, [])])
def test_the_end_window_is_the_kept_checkpoints_before_the_end_past_two_thirds(
    num_steps, every, keep, steps):
  training = ml_collections.ConfigDict(dict(
      num_steps=num_steps, checkpoint_every=every, keep_checkpoints=keep, steps_per_loop=1))
  assert stages_lib.window_steps(training) == steps


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
  evaluation = result_lib.from_record(record['result'])
  assert evaluation.mean('fid', 'hat_ebm') == 11.0
  assert evaluation.sets('fid', 'hat_ebm') == [10.0, 12.0] and evaluation.data == {'fid': 3.0}
  assert (record['scale'], record['size'], record['step'], record['num_steps']) == (
      'digits', None, 4, 4)
  assert (record['precision'], record['computed_in']) == (None, 'float32')
  assert record['config']['path'] == 'synthesis_s0/config.json' and len(
      record['config']['sha256']) == 64
  assert [e['exit'] for e in record['exits']] == [0, 0, 0]
  # the plateau rule's checkpoint (2/3 of the config's 9,000 steps)
  earlier = result_lib.from_record(record['plateau'])  # fid_plateau.json, typed
  assert (earlier.step, earlier.sets('fid', 'hat_ebm')) == (6000, [12.0, 13.0])
  assert record['exits'][0]['command'].startswith('python experiments/train_synthesis.py')
  with open(tmp_path / 'synthesis_s0' / 'done.json') as f:  # the record, its numbers left out
    assert json.load(f) == {k: v for k, v in record.items() if k not in ('result', 'plateau')}
  # Done: nothing runs again.
  again = FakeScripts(str(tmp_path))
  assert run(o, again) == records and again.calls == []


def test_a_resumed_stage_counts_its_earlier_attempts_and_stays_out_of_the_eta(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  fake = FakeScripts(str(tmp_path), reach=2, codes={('train_synthesis.py', 'synthesis_s0'): -9})
  with pytest.raises(runner_lib.StageError, match='rerun to resume'):
    run(o, fake)
  stage_dir = tmp_path / 'synthesis_s0'
  # The killed attempt ran 100 s before its log's last write, after 5 s of attempts before it.
  log_time = os.path.getmtime(stage_dir / 'log.txt')
  (stage_dir / 'attempt.json').write_text(json.dumps(dict(start=log_time - 100, earlier=5)))
  synthesis = [s for s in stages_lib.build(o) if s.name == 'synthesis_s0']
  runner = runner_lib.Runner(synthesis, o, FakeScripts(str(tmp_path)),
                             print_fn=lambda *a, **k: None)
  record = runner.run_all()['synthesis_s0']
  assert record['resumed'] is True and 105 <= record['seconds'] < 125
  assert runner.measured == runner.estimated == 0  # its partial time would skew the ETA
  # The ETA: the table's estimate at the measured pace, the table's own 30 min weighing in.
  runner.stages, runner.records = runner.stages + [
      s for s in stages_lib.build(o) if s.name == 'window_s0'], {}
  table = stages_lib.estimate(runner.stages[0], o) + stages_lib.estimate(runner.stages[1], o)
  assert runner.eta() == runner_lib.hms(table)
  runner.measured, runner.estimated = 9.0, 6.0  # one tiny stage 1.5x slower: barely moves it
  assert runner.eta() == runner_lib.hms(table * 1809 / 1806)
  runner.measured, runner.estimated = 36000.0, 18000.0  # many: the run's pace
  assert runner.eta() == runner_lib.hms(table * 37800 / 19800)
  assert not (stage_dir / 'attempt.json').exists()
  # A stage begun before attempts were kept: resumed, its earlier seconds unknown, and said so.
  shutil.rmtree(stage_dir)
  with pytest.raises(runner_lib.StageError):
    run(o, FakeScripts(str(tmp_path), reach=2, codes={('train_synthesis.py', 'synthesis_s0'): -9}))
  (stage_dir / 'attempt.json').unlink()
  record = run(o, FakeScripts(str(tmp_path)))['synthesis_s0']
  assert record['resumed'] == 'seconds unknown' and record['seconds'] < 20
  lines = report_lib.command_lines({'synthesis_s0': record})
  assert "resumed: the last run's seconds only" in lines[2]
  # A first attempt run to its end is neither.
  shutil.rmtree(tmp_path / 'synthesis_s0')
  runner = runner_lib.Runner(stages_lib.build(o), o, FakeScripts(str(tmp_path)),
                             print_fn=lambda *a, **k: None)
  assert 'resumed' not in runner.run_all()['synthesis_s0'] and runner.estimated > 0


def test_finished_training_and_evaluation_are_not_rerun_on_resume(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  fake = FakeScripts(str(tmp_path), codes={('evaluate_fid.py', 'synthesis_s0'): 1},
                     errors={('evaluate_fid.py', 'synthesis_s0'): 'error: out of samples'})
  with pytest.raises(runner_lib.StageError, match='synthesis_s0 failed \\(exit 1\\) running '
                     'python experiments/evaluate_fid.py .*: out of samples'):
    run(o, fake)
  fake = FakeScripts(str(tmp_path))
  record = run(o, fake)['synthesis_s0']
  # trained to its step: skipped; both FIDs (the end's, then the plateau checkpoint's) run (the
  # fake run keeps no checkpoint before its end: its window has none to score)
  assert fake.calls == [('evaluate_fid.py', 'synthesis_s0')] * 2
  assert record['exits'][0]['exit'] == 'skipped: trained to step 4'


GUARD_LINE = ('error: runaway at step 500: energy_diff 1e+04 for 3 checks in a row; last good '
              'checkpoint: ckpt-250; lower optim.hat_lr')


def test_the_window_stage_scores_kept_checkpoints_and_excuses_a_stopped_run(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('ablations',), jobs='1')
  stages = [s for s in stages_lib.build(o) if s.name in ('synthesis_s0', 'current_s0')]
  window = next(s for s in stages_lib.build(o) if s.name == 'window_s0')
  window.commands = [c for c in window.commands if c.workdir in ('synthesis_s0', 'current_s0')]
  window.outputs = [o_ for o_ in window.outputs if '/synthesis_s0_' in o_ or '/current_s0_' in o_]
  window.after = window.after[:1] + ('current_s0',)
  window.inputs = ['synthesis_s0/fid.json', 'current_s0/fid.json']
  fake = FakeScripts(str(tmp_path), codes={('train_synthesis.py', 'current_s0'): 1},
                     errors={('train_synthesis.py', 'current_s0'): GUARD_LINE})

  def no_kept_checkpoint(argv, log, env):  # the stopped run kept none of its window's
    if any(a.startswith('--output=window_s0/current_s0_') for a in argv):
      log.write('error: no checkpoint ckpt-8000\n')
      return 1
    return fake(argv, log, env)
  run(o, fake, stages[:1])
  for step in (7500, 8000, 8500, 9000):  # the checkpoints a finished 9,000-step run keeps
    (tmp_path / 'synthesis_s0' / 'checkpoints' / f'ckpt-{step}.index').write_text('')
  records = run(o, no_kept_checkpoint, stages + [window])
  record = records['window_s0']
  assert sorted(record['result']) == ['window_s0/synthesis_s0_w1.json',
                                      'window_s0/synthesis_s0_w2.json',
                                      'window_s0/synthesis_s0_w3.json']
  # the stopped run kept no checkpoint between 2/3 and its end: nothing of it to score
  assert [e['exit'] for e in record['exits'][3:]] == [
      'not run: its run kept too few checkpoints before its end'] * 3
  assert sorted(record['files']) == [  # its inputs: a rerun arm's new FID redoes the window
      'current_s0/fid.json', 'synthesis_s0/fid.json', 'window_s0/synthesis_s0_w1.json',
      'window_s0/synthesis_s0_w2.json', 'window_s0/synthesis_s0_w3.json']
  _, out = report_lib.tables.plateau_table(records, [0])
  # the 2/3 checkpoint, the window's, the end (the fake scores it at 4)
  assert out[0]['seeds'][0]['window_steps'] == [6000, 7500, 8000, 8500, 4]
  # The run scored again (its fid.json deleted): its window's slots are scored again with it.
  (tmp_path / 'synthesis_s0' / 'fid.json').unlink()
  again = FakeScripts(str(tmp_path))
  run(o, again, stages + [window])
  assert again.calls == [('evaluate_fid.py', 'synthesis_s0')] * 4
  # An interrupted run's own save (step 8,100) pruned ckpt-7500 and 8000: the newest slots score
  # 8,100 and 8,500, the oldest none; a run that kept only one checkpoint before its end fills
  # the newest slot only.
  shutil.rmtree(tmp_path / 'window_s0')
  kept = tmp_path / 'synthesis_s0' / 'checkpoints'
  (kept / 'ckpt-7500.index').unlink()
  (kept / 'ckpt-8000.index').unlink()
  (kept / 'ckpt-8100.index').write_text('')
  fake = FakeScripts(str(tmp_path), reach=9000)
  record = run(o, fake, stages + [window])['window_s0']
  assert [json.loads((tmp_path / 'window_s0' / f'synthesis_s0_w{i}.json').read_text())['step']
          for i in (2, 3)] == [8100, 8500]
  assert [e['command'].split()[-4] for e in record['exits'][1:3]] == [
      '--checkpoint=synthesis_s0/checkpoints/ckpt-8100',
      '--checkpoint=synthesis_s0/checkpoints/ckpt-8500']
  shutil.rmtree(tmp_path / 'window_s0')
  (kept / 'ckpt-8100.index').unlink()
  record = run(o, fake, stages + [window])['window_s0']
  assert [e['exit'] for e in record['exits'][:2]] == [
      'not run: its run kept too few checkpoints before its end'] * 2
  assert sorted(record['result']) == ['window_s0/synthesis_s0_w3.json']
  # A run that is not stopped failing its window's scoring fails the stage.
  shutil.rmtree(tmp_path / 'window_s0')
  broken = FakeScripts(str(tmp_path), codes={('evaluate_fid.py', 'synthesis_s0'): 1})
  with pytest.raises(runner_lib.StageError, match='window_s0 failed'):
    run(o, broken, stages + [window])


def test_ablation_arm_counts_a_guard_stop_but_not_another_failure(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  stages = stages_lib.build(options(tmp_path, seeds=(0,), parts=('ablations',)))
  arms = [s for s in stages if s.name in ('synthesis_s0', 'current_s0')]
  run(o, FakeScripts(str(tmp_path)), arms[:1])  # the reference, trained to its step
  fake = FakeScripts(str(tmp_path), reach=3,
                     codes={('train_synthesis.py', 'current_s0'): 1},
                     errors={('train_synthesis.py', 'current_s0'): GUARD_LINE})
  records = run(o, fake, arms)
  record = records['current_s0']
  assert record['failed'] and record['guard'].startswith('runaway at step 500')
  # Scored at its last healthy checkpoint (the latest it kept, step 3 of 4); the plateau rule's
  # checkpoint (2/3 of 6,000) was never reached, so not scored.
  assert fake.calls.count(('evaluate_fid.py', 'current_s0')) == 1
  evaluation = result_lib.from_record(record['result'])
  assert (evaluation.step, evaluation.mean('fid', 'hat_ebm')) == (3, 11.0)
  assert 'plateau' not in record and record['exits'][2]['exit'].startswith('not run: the guard')
  assert sorted(record['files']) == ['current_s0/config.json', 'current_s0/fid.json']
  # Recorded: nothing runs again; its file edited is refused.
  again = FakeScripts(str(tmp_path))
  assert run(o, again, arms)['current_s0'] == record and again.calls == []
  (tmp_path / 'current_s0' / 'fid.json').write_text(json.dumps(fid_result(3, hat_ebm=[1.0, 1.0])))
  with pytest.raises(runner_lib.StageError, match='current_s0: .*fid.json is not the file'):
    run(o, FakeScripts(str(tmp_path)), arms)
  # Its rescore failing is a failure of the stage.
  shutil.rmtree(tmp_path / 'current_s0')
  fake = FakeScripts(str(tmp_path), reach=3,
                     codes={('train_synthesis.py', 'current_s0'): 1,
                            ('evaluate_fid.py', 'current_s0'): 1},
                     errors={('train_synthesis.py', 'current_s0'): GUARD_LINE})
  with pytest.raises(runner_lib.StageError, match='current_s0 failed .*evaluate_fid.py'):
    run(o, fake, arms)
  # Another error of an arm (or any stage) is a failure, never evidence.
  other = [s for s in stages if s.name == 'coop_bn_s0']
  fake = FakeScripts(str(tmp_path), codes={('train_synthesis.py', 'coop_bn_s0'): 1},
                     errors={('train_synthesis.py', 'coop_bn_s0'): 'error: out of memory'})
  with pytest.raises(runner_lib.StageError, match='coop_bn_s0 failed .*out of memory'):
    run(o, fake, other)
  assert not (tmp_path / 'coop_bn_s0' / 'done.json').exists()


def test_a_hat_ebm_the_guard_stops_is_scored_at_its_last_healthy_checkpoint_and_the_rest_runs(
    tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis', 'ood', 'retrofit'), jobs='1')
  fake = FakeScripts(str(tmp_path), reach=3, codes={('train_synthesis.py', 'synthesis_s0'): 1},
                     errors={('train_synthesis.py', 'synthesis_s0'): GUARD_LINE})
  fake.reach = 3
  stages = [s for s in stages_lib.build(o) if s.name in ('synthesis_s0', 'ood_s0')]
  records = run(o, fake, stages)
  record = records['synthesis_s0']
  assert record['failed'] and result_lib.from_record(record['result']).step == 3
  assert 'ood_s0' in records  # its OOD stage ran on the kept checkpoint
  # A stage that is not a scored Hat EBM (the near-OOD model) still fails on a guard stop.
  near = [s for s in stages_lib.build(o) if s.name == 'nearood_s0']
  fake = FakeScripts(str(tmp_path), codes={('train_synthesis.py', 'nearood_s0'): 1},
                     errors={('train_synthesis.py', 'nearood_s0'): GUARD_LINE})
  with pytest.raises(runner_lib.StageError, match='nearood_s0 failed'):
    run(o, fake, near)


@pytest.mark.parametrize('edit, message', [
    (dict(scale='paper'), 'holds a result of scale paper, not scale digits'),
    (dict(size='tiny'), 'holds a result of scale digits, config size tiny, not scale digits'),
    (dict(commands=['python experiments/train_synthesis.py --config.seed=7']),
     'was made by other commands'),
    (None, 'is not a stage record'),
    # edited by hand: the field named, not 'records step 4, but the latest checkpoint is step 4'
    (dict(step='4'), r'done.json is not a stage record \(field step is "4", not a whole number '
                     r'of steps\): delete it to rerun the stage'),
    (dict(seconds=float('nan')), 'field seconds is NaN, not a number of seconds'),
    (dict(files=['fid.json']), 'field files is \\["fid.json"\\], not an object of file'),
])
def test_records_of_another_scale_or_config_or_garbled_are_refused(tmp_path, edit, message):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  run(o, FakeScripts(str(tmp_path)))
  path = tmp_path / 'synthesis_s0' / 'done.json'
  record = json.loads(path.read_text())
  path.write_text('{"stage": ' if edit is None else json.dumps(dict(record, **edit)))
  with pytest.raises(runner_lib.StageError, match=message):
    run(o, FakeScripts(str(tmp_path)))


def test_a_config_json_reformatted_with_the_same_values_is_the_same_config(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  records = run(o, FakeScripts(str(tmp_path)))
  path = tmp_path / 'synthesis_s0' / 'config.json'
  path.write_text(json.dumps(json.loads(path.read_text()), indent=4, sort_keys=True) + '\n')
  again = FakeScripts(str(tmp_path))
  assert run(o, again)['synthesis_s0']['result'] == records['synthesis_s0']['result']
  assert again.calls == []  # done: skipped, not refused as another config
  path.write_text(json.dumps(dict(training=dict(num_steps=4, batch_size=8))))  # another value
  with pytest.raises(runner_lib.StageError, match='changed since .* \\(another config\\)'):
    run(o, FakeScripts(str(tmp_path)))


def test_independent_stages_run_concurrently_and_dependencies_wait(tmp_path, monkeypatch):
  monkeypatch.delenv('TF_NUM_INTRAOP_THREADS', raising=False)
  monkeypatch.delenv('TF_NUM_INTEROP_THREADS', raising=False)
  monkeypatch.setattr(os, 'cpu_count', lambda: 2)
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
    threads.append((env.get('TF_NUM_INTRAOP_THREADS'), env.get('TF_NUM_INTEROP_THREADS')))
    return code

  records = run(o, slow)
  assert set(records) == {'sngan_s0', 'refinement_s0', 'autoencoder_s0', 'retrofit_s0',
                          'window_s0'}
  assert max(len(r) for r in log) == 2  # two at a time, never more
  # The two first-ready stages (the SN-GAN, the autoencoder) share the cores; a stage that runs
  # alone keeps them all.
  # (one intra-op and one inter-op thread each on 2 cores)
  assert threads[:2] == [('1', '1')] * 2
  alone = runner_lib.Runner([], o).env(1)
  assert 'TF_NUM_INTRAOP_THREADS' not in alone and 'TF_NUM_INTEROP_THREADS' not in alone
  monkeypatch.setattr(os, 'cpu_count', lambda: 8)  # a pool of 4 each: inter-op left to TF
  shared = runner_lib.Runner([], o).env(2)
  assert shared['TF_NUM_INTRAOP_THREADS'] == '4' and 'TF_NUM_INTEROP_THREADS' not in shared
  order = [w for script, w in fake.calls if script.startswith('train_')]
  assert order.index('refinement_s0') > order.index('sngan_s0')
  assert order.index('retrofit_s0') > order.index('autoencoder_s0')
  assert runner_lib.resolve_jobs('auto', 'paper') == 1
  assert runner_lib.resolve_jobs('auto', 'digits', cpus=2) == 2


def test_sigterm_stops_the_running_child_and_leaves_the_stage_resumable(tmp_path):
  stage = plan.Stage('synthesis_s0', plan.KINDS['synthesis'], 'synthesis',
                     [plan.Invocation('-c', flags=('import time; time.sleep(60)',))], [None],
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
  assert signal.getsignal(signal.SIGTERM) is not interrupts._raise_interrupt  # restored


# ---- the report -------------------------------------------------------------------------------
def made_up(fids, failed=(), scale='digits'):
  """Records {<prefix>_s<seed>: done record}: fids {prefix: per seed {method: FID runs}}."""
  records = {}
  for prefix, rows in fids.items():
    for seed, methods in enumerate(rows):
      records[f'{prefix}_s{seed}'] = dict(result=fid_result(**methods), commands=['cmd'],
                                          seconds=1.0, scale=scale)
  records.update({name: dict(failed=True, guard='runaway at step 5', commands=['cmd'])
                  for name in failed})
  return records


def table(markdown, title):
  """(header cells, rows) of the markdown table under the heading that starts with `title`."""
  block = markdown.split('## ' + title, 1)[1].split('\n## ', 1)[0]
  rows = [[c.strip() for c in line.strip().strip('|').split('|')]
          for line in block.splitlines() if line.startswith('|')]
  return rows[0], rows[2:]


def test_report_checks_are_paired_intervals_and_guard_stops_count_beside_a_healthy_reference(
    tmp_path):
  records = made_up({
      'synthesis': [dict(hat_ebm=[10.0, 10.2], generator=[20.0, 20.2])] * 2,
      'sngan': [dict(generator=[40.0, 40.2])] * 3,
      'refinement': [dict(hat_ebm=[h, h + 0.2], generator=[40.0, 40.2], ddls=[d, d + 0.2])
                     for h, d in ((14.0, 39.0), (12.0, 11.0), (16.0, 41.0))],
      'retrofit': [dict(hat_ebm=[15.0, 15.2], generator=[200.0, 200.2])] * 3,
      'noresidual': [dict(hat_ebm=[h, h]) for h in (13.0, 12.5, 15.0)],
      'coop_bn': [dict(hat_ebm=[90.0, 90.0])] * 3,
  }, failed=('current_s0', 'current_s2', 'coop_bn_s0', 'coop_bn_s1'))
  records['calibration'] = dict(commands=['cmd'], result=dict(calibration=CALIBRATION, coverage={
      'synthesis': dict(COVERAGE, rarest_share=0.02)}, missing=['current']))
  markdown, data = report_lib.build_report(records, options(tmp_path, seeds=(0, 1, 2)),
                                           figures=['synthesis_s0_training_curves.png'])
  checks = {c['check']: c for c in data['checks']}
  sngan = checks['Hat EBM beats its SN-GAN (Table 1)']
  # Paired over 3 seeds: differences 26, 28, 24 -> mean 26, sd 2, t(0.975, 2) = 4.303.
  assert sngan['verdict'] == 'holds' and sngan['n'] == 3
  assert (sngan['low'], sngan['high']) == pytest.approx((26 - 4.303 * 2 / 3 ** 0.5,
                                                         26 + 4.303 * 2 / 3 ** 0.5), abs=1e-3)
  assert checks['Hat EBM beats DDLS (Table 1)']['verdict'] == 'not resolved at 3 seeds'
  current = checks['historical bank beats current samples']
  assert 'cooperative learning fails without batch norm' in current['paper']
  # current_s2's reference synthesis_s2 never finished: only seed 0 counts.
  assert current['failed_counted'] == [0] and current['failed_not_counted'] == [2]
  assert checks['historical bank beats cooperative learning with batch norm']['verdict'] == 'holds'
  # 7 FID checks (cooperative learning without batch norm: the 'current' row) and the two
  # generator-update arms' stability, not measured without checkpoints to scatter
  assert len(checks) == 9
  assert checks['historical bank trains stabler than current samples (checkpoint scatter)'][
      'verdict'] == 'not measured'
  # What the interval says of the paper's relative gain: [21.03, 30.97] of the SN-GAN's 40.1
  assert sngan['bound'] == (
      "gain at least 52.4% and at most 77.2% of the worse arm's FID (95% interval): rules out "
      "the paper's 24.4% on CIFAR-10 (ours larger) and 2.4% on CelebA (ours larger)")
  # Holm over the checks with an interval: "not shown" is not a verdict of one
  ps = sorted(c['p'] for c in data['checks'] if c['p'] is not None)
  assert sngan['p_holm'] == pytest.approx(max(min(1, (len(ps) - i) * p)
                                              for i, p in enumerate(ps[:ps.index(sngan['p']) + 1])))
  assert checks['the residual Y keeps refinement stable']['p_holm'] is None
  assert f'the family is the {len(ps)} checks above' in markdown
  residual = checks['the residual Y keeps refinement stable']  # both arms healthy: FID alone
  assert residual['verdict'] == 'not shown at this scale' and residual['n'] == 3
  assert 'not resolved at 3 seeds' in residual['text']  # the FID's own interval, still told
  head, rows = table(markdown, 'Table 1')
  assert head[1:3] == ['ours: FID ± sd over 3 seeds', 'eval sd (2 FID runs)']
  hat = next(r for r in rows if r[0] == 'Hat EBM X = G(Z_K) + Y_K')
  assert hat[1:3] == ['14.10 ± 2.00', '0.14']  # sample std (ddof 1) and the FID runs' std
  assert hat[4] == '14.04 ± 0.11 (CIFAR-10); 5.98 ± 0.02 (CelebA)'
  assert markdown.index('## Table 1') < markdown.index('## Table 2') < markdown.index(
      '## Table 3')
  assert ' of 3 seeds' not in markdown and 'within one std' not in markdown  # no counts
  _, rows = table(markdown, 'How far this FID can go')
  assert rows[0][1] == '2.96 ± 0.10' and rows[1][1] == '0.25 ± 0.02'
  assert 'held-out digits without class 8 2.00' in markdown  # the gap paragraph's numbers
  assert '| synthesis | 2.0% (class 3) |' in markdown
  assert 'No samples to check of: current.' in markdown
  assert '### Training curves' in markdown
  assert '![synthesis_s0_training_curves.png](figures/synthesis_s0_training_curves.png)' in markdown
  assert data['calibration']['calibration']['num'] == 1000
  assert 'Precision: each config\'s own' in markdown


CALIBRATION = dict(num=1000, test_size=297,
                   floor=dict(mean=2.96, std=0.1, runs=3, method='measured'),
                   memorisation=dict(mean=0.25, std=0.02, runs=3, method='measured'),
                   dropped_class=dict(mean=2.0, std=0.1, runs=3, label=8),
                   test=dict(counts=[30] * 9 + [27], rarest_class=9, rarest_share=27 / 297,
                             nn_mean=4.0, nn_p5=2.5))
COVERAGE = dict(counts=[50] * 10, rarest_class=3, rarest_share=0.1, nn_mean=3.9,
                share_closer_than_test_p5=0.06)


def test_paper_report_of_one_seed_with_three_fid_runs_prints_the_evaluation_std(tmp_path):
  runs = dict(hat_ebm=[19.1, 19.3, 19.5], generator=[25.0, 25.5, 26.0])
  records = made_up({
      'synthesis': [runs], 'refinement': [dict(hat_ebm=[14.0, 14.1, 14.2],
                                               generator=[18.5, 18.6, 18.7],
                                               ddls=[14.5, 14.6, 14.7])],
      'current': [dict(hat_ebm=[25.0, 25.0, 25.0])], 'coop_bn': [dict(hat_ebm=[30.0, 31, 32])],
  }, scale='paper', failed=('coop_bn_s0',))
  records['sngan_release'] = dict(result=fid_result(generator=[18.5, 18.7]),
                                  commands=['cmd'], seconds=1.0)
  records['synthesis_s0']['computed_in'] = 'float32'
  o = options(tmp_path, scale='paper', seeds=(0,), release_sngan='/rel')
  configs = {'cifar10_synth': config_lib.load_file(os.path.join(
      os.path.dirname(__file__), '..', 'experiments', 'configs', 'cifar10_synth.py'))}
  configs['cifar10_synth'].perf.precision = 'float32'
  markdown, data = report_lib.build_report(records, o, ['synthesis_langevin_path.png'], configs)
  for block in markdown.split('\n## '):
    widths = {line.count('|') for line in block.splitlines() if line.startswith('|')}
    assert len(widths) <= 1, block  # every row as wide as its header
  head, rows = table(markdown, 'Table 2')
  assert head[1:3] == ['ours: FID (1 seed: no sd)', 'eval sd (3 FID runs)']
  assert rows[0][:5] == ['Hat EBM X = G(Z) + Y, cifar10_synth', '19.30', '0.20', '-24.3%',
                         '19.30 ± 0.15']
  head, rows = table(markdown, 'Table 1')
  published = next(r for r in rows if r[0].startswith('published SN-GAN'))
  assert published[1:3] == ['18.60', '0.14'] and published[4] == '18.58 ± 0.08'
  assert published[-1] == 'sngan_release'
  head, rows = table(markdown, 'Ablations')
  assert head == ['', 'ours: FID (1 seed: no sd)', 'eval sd (3 FID runs)', 'per seed', 'paper',
                  'stages']
  assert [len(r) for r in rows] == [6] * 5 and rows[2][-1] == (
      'coop_bn_s* (ran away: seed 0, scored at the last healthy checkpoint)')
  assert rows[1][0] == 'current samples = cooperative learning without batch norm'
  assert 'Precision: float32, pinned for the paper scale; the runs computed in float32' in markdown
  _, rows = table(markdown, 'Settings')
  assert ['cifar10_synth', 'cifar10_synth', 'precision', '`perf.precision`', 'float32',
          'float32', ''] in rows
  assert data['precision'] == 'float32' and data['sngan'] == 'published'
  assert data['tables']['synthesis'][0]['eval_std'] == pytest.approx(0.2)
  assert data['tables']['synthesis'][0]['paper'] == [19.30, 0.15]
  assert '![synthesis_langevin_path.png](figures/synthesis_langevin_path.png)' in markdown
  assert '± 0.00' not in markdown  # one seed never prints a zero spread


def test_report_figures_are_collected_by_kind_with_the_historical_update_montage(tmp_path):
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  png = tf.io.encode_png(np.zeros([8, 8, 3], np.uint8)).numpy()

  def draw(*parts):
    path = tmp_path.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)

  # An earlier pipeline's: a stage it no longer has left a copied figure (and samples, below).
  draw('coop_s0', 'training_curves.png')
  earlier = [plan.Stage('coop_s0', plan.KINDS['synthesis'], 'ablations', [], [], workdir='coop_s0')]
  assert pipeline.collect_figures(str(tmp_path), earlier, 0) == ['coop_s0_training_curves.png']
  for arm in ('synthesis', 'current', 'coop_bn'):
    draw(f'{arm}_s0', 'training_curves.png')
    for step in (250, 500, 750, 1000):
      if not (arm == 'current' and step == 1000):  # stopped before step 1000
        draw(f'{arm}_s0', 'samples', f'samples_{step:07d}.png')
  draw('synthesis_s0', 'ood_energies.png')
  for name in ('langevin_path.png', 'samples_grid_000.png', 'samples_grid_001.png'):
    draw('samples', 'synthesis', name)
  draw('samples', 'refinement_baselines', 'side_by_side.png')
  draw('samples', 'refinement_baselines', 'ddls.png')  # the same grid as in side_by_side.png
  draw('samples', 'coop', 'langevin_path.png')
  stages = stages_lib.build(options(tmp_path, seeds=(0,), parts=('synthesis', 'ood',
                                                                 'ablations', 'figures')))
  names = pipeline.collect_figures(str(tmp_path), stages, 0)
  assert {*(f'{arm}_s0_training_curves.png' for arm in ('synthesis', 'current', 'coop_bn')),
          'ood_s0_ood_energies.png', 'synthesis_langevin_path.png',
          'synthesis_samples_grid_000.png', 'refinement_baselines_side_by_side.png',
          'historical_generator_update.png'} == set(names)  # one sample grid per model
  assert sorted(os.listdir(tmp_path / 'figures')) == sorted(names)  # the stale copy is gone
  meta = pipeline.historical_figure(str(tmp_path), 0, None)
  assert meta['panels'] == ['historical bank (the paper)',
                            'current samples = cooperative, no batch norm',
                            'cooperative, batch-norm generator']
  assert 'at step 500' in meta['title']
  (tmp_path / 'coop_bn_s0' / 'samples' / 'samples_0000500.png').unlink()
  # Without step 500 in every arm: the last step all of them reached.
  assert 'at step 750' in pipeline.historical_figure(str(tmp_path), 0, None)['title']
  markdown, _ = report_lib.build_report({}, options(tmp_path, seeds=(0,)), names)
  sections = markdown.split('\n### ')
  assert [s.split('\n')[0].split(' ')[0] for s in sections[1:]] == [
      'Training', 'Baselines', 'The', 'OOD:', 'Samples']
  assert 'historical_generator_update.png' in sections[3]


def test_previous_reports_are_read_before_any_stage_and_a_bad_one_is_one_line(tmp_path):
  good = tmp_path / 'before.json'
  good.write_text(json.dumps(dict(checks=[dict(check='x', verdict='holds')])))
  assert pipeline.read_previous_reports([str(good)]) == [
      dict(checks=[dict(check='x', verdict='holds')], path=str(good))]
  garbled = tmp_path / 'garbled.json'
  garbled.write_text('{"tables": {}}')
  calls = []
  for path in (garbled, tmp_path / 'missing.json'):
    o = options(tmp_path / 'out', seeds=(0,), parts=('synthesis',),
                previous_reports=(str(path),))
    with pytest.raises(ValueError, match=f'--previous_reports: {path} is not a readable'):
      pipeline.reproduce(o, run_command=lambda *a: calls.append(a) or 0,
                         print_fn=lambda *a, **k: None)
  assert not calls and not (tmp_path / 'out').exists()
