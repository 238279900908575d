"""The reproduction trusts only what it can check: a stage's record against its workdir, the
figures from the checkpoint the tables were scored at, every stage of the paper scale rerunnable,
and figures/ holding only reproduce.py's files (commands faked in-process, no training)."""
import json
import os

import pytest

from tf_hat_ebm import release_import
from tf_hat_ebm import result_files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import pipeline
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import records as records_lib
from tf_hat_ebm.reproduction import runner as runner_lib
from tf_hat_ebm.reproduction import stages as stages_lib

from test_reproduction import FakeScripts, options, run


class Scripts(FakeScripts):
  """FakeScripts with results at the workdir's latest step, figures (recording the checkpoint
  each was drawn from), the calibration, and the release import's own refusal of a workdir."""

  def __init__(self, out, **kwargs):
    super().__init__(out, **kwargs)
    self.drawn_from = {}

  def latest(self, workdir):
    return records_lib.training_progress(os.path.join(self.out, workdir))[0]

  def __call__(self, argv, log, env):
    script = os.path.basename(argv[1])
    flags = dict(a[2:].split('=', 1) for a in argv[2:] if a.startswith('--') and '=' in a)
    key = (script, flags.get('workdir'))
    if self.codes.get(key, 0) != 0:
      self.calls.append(key)
      return self.codes[key]
    if script == 'sample.py':
      self.calls.append(key)
      self.drawn_from[flags['workdir']] = flags.get('checkpoint')
      os.makedirs(os.path.join(self.out, flags['output']), exist_ok=True)
      for name in ('langevin_path.png', 'samples.npz'):
        with open(os.path.join(self.out, flags['output'], name), 'w') as f:
          f.write(f'{flags["workdir"]} at step {flags.get("checkpoint")}')
      return 0
    if script == 'calibrate_fid.py':
      self.calls.append(key)
      os.makedirs(os.path.join(self.out, 'calibration'), exist_ok=True)
      with open(os.path.join(self.out, flags['output']), 'w') as f:
        json.dump(dict(calibration={}, coverage={}, missing=[]), f)
      return 0
    if script == 'import_release.py':
      self.calls.append(key)
      gen = os.path.join(self.out, flags['generator_workdir'])
      request = dict(hat=flags['hat'])
      if not release_import._imported(gen, request):  # the import's own check of its workdir
        os.makedirs(os.path.join(gen, 'checkpoints'))
        with open(os.path.join(gen, 'config.json'), 'w') as f:
          json.dump(dict(training=dict(num_steps=4)), f)
        with open(os.path.join(gen, 'import.json'), 'w') as f:
          json.dump(request, f)
        for name in ('ckpt-4.index', 'ckpt-4.data-00000-of-00001'):
          open(os.path.join(gen, 'checkpoints', name), 'w').close()
        with open(os.path.join(gen, 'checkpoints', 'checkpoint'), 'w') as f:
          f.write('model_checkpoint_path: "ckpt-4"\n')
      return 0
    code = super().__call__(argv, log, env)
    if script == 'evaluate_fid.py' and code == 0 and 'output' not in flags:  # at the latest step
      path = os.path.join(self.out, flags['workdir'], 'fid.json')
      result = result_lib.read(path)
      result.step = self.latest(flags['workdir'])
      result_files.write_json(path, result.to_json())
    if script == 'evaluate_ood.py' and code == 0:
      path = os.path.join(self.out, flags['workdir'], 'ood.json')
      with open(path) as f:
        result = dict(json.load(f), step=self.latest(flags['workdir']))
      with open(path, 'w') as f:
        json.dump(result, f)
    return code


def train_on(out, workdir, step):
  """A stage's run trained on by hand to `step` (its config.json then asks for that many)."""
  path = os.path.join(out, workdir)
  open(os.path.join(path, 'checkpoints', f'ckpt-{step}.index'), 'w').close()
  with open(os.path.join(path, 'config.json')) as f:
    config = json.load(f)
  config['training']['num_steps'] = step
  with open(os.path.join(path, 'config.json'), 'w') as f:
    json.dump(config, f)


def record(out, stage):
  with open(os.path.join(out, stage, 'done.json')) as f:
    return json.load(f)


def hat_ebm_fid(record):
  """The Hat EBM's mean FID in a stage's record (its typed result)."""
  return result_lib.from_record(record['result']).mean('fid', 'hat_ebm')


def edited(result, **values):
  """A typed result's JSON with FIDs `values` (method -> sets) changed, as by hand."""
  result = json.loads(json.dumps(result))
  result['values']['fid'].update(values)
  return result


def test_a_record_points_at_its_result_files_and_its_numbers_come_from_them(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  record = run(o, Scripts(str(tmp_path)))['synthesis_s0']
  path = tmp_path / 'synthesis_s0' / 'done.json'
  fid, earlier = (tmp_path / 'synthesis_s0' / n for n in ('fid.json', plan.PLATEAU_FID))
  done = json.loads(path.read_text())
  # done.json holds the files' sha256, never their numbers; the record read holds those numbers
  assert 'result' not in done and 'plateau' not in done
  for file in (fid, earlier):
    assert done['files'][f'synthesis_s0/{file.name}'] == records_lib.file_sha256(str(file))
  assert (record['result'], record['plateau']) == (json.loads(fid.read_text()),
                                                   json.loads(earlier.read_text()))
  # A copy of the numbers in a record (as the runner wrote them before), edited: never read.
  path.write_text(json.dumps(dict(done, result=edited(record['result'], hat_ebm=[0.01, 0.01]),
                                  plateau=edited(record['plateau'], hat_ebm=[0.01, 0.01]))))
  scripts = Scripts(str(tmp_path))
  again = run(o, scripts)['synthesis_s0']
  assert scripts.calls == [] and hat_ebm_fid(again) == 11.0 and again == record
  # Table 2 would print 0.01 and "-100%": a result file edited is refused.
  path.write_text(json.dumps(done))
  fid.write_text(json.dumps(edited(json.loads(fid.read_text()), hat_ebm=[0.01, 0.01])))
  with pytest.raises(runner_lib.StageError, match='synthesis_s0/fid.json changed since .*done.json'
                     ' was written'):
    run(o, Scripts(str(tmp_path)))


def test_records_of_the_runner_before_are_accepted_and_reported_the_same(tmp_path):
  """A reproduction begun by the runner that copied each result into its record is finished by
  this one: its records are read, no stage runs again, and the report is the same."""
  o = options(tmp_path, seeds=(0,), parts=('synthesis', 'ood'), jobs='1')
  say = lambda *a, **k: None  # noqa: E731
  records = pipeline.reproduce(o, run_command=Scripts(str(tmp_path)), print_fn=say)
  report = {n: (tmp_path / n).read_text() for n in ('report.md', 'report.json')}
  for name, record in records.items():  # as that runner wrote them: every number copied in
    path = tmp_path / name / 'done.json'
    assert 'result' not in json.loads(path.read_text()) and 'result' in record
    path.write_text(json.dumps(record, indent=2))
  for name in report:
    (tmp_path / name).unlink()
  scripts = Scripts(str(tmp_path))
  assert pipeline.reproduce(o, run_command=scripts, print_fn=say) == records
  assert scripts.calls == []
  assert {n: (tmp_path / n).read_text() for n in report} == report


def test_a_fid_json_without_a_schema_is_one_line_saying_to_evaluate_again(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  run(o, Scripts(str(tmp_path)))
  path, fid = (tmp_path / 'synthesis_s0' / n for n in ('done.json', 'fid.json'))
  # As evaluate_fid.py wrote it before the schema: {method: [FIDs]}.
  fid.write_text(json.dumps(dict(hat_ebm=[10.0, 12.0], generator=[20.0, 20.0],
                                 data_test_vs_train=3.0, step=4)))
  done = json.loads(path.read_text())
  done['files']['synthesis_s0/fid.json'] = records_lib.file_sha256(str(fid))
  path.write_text(json.dumps(done))
  with pytest.raises(runner_lib.StageError, match=(
      r'^stage synthesis_s0: cannot read its result again \(.*/synthesis_s0/fid.json: an '
      r'evaluation result without a schema \(.*\): run evaluate_fid.py on its workdir again\)')):
    run(o, Scripts(str(tmp_path)))


@pytest.mark.parametrize('deleted, message', [
    ('checkpoints', 'records step 4, but .*synthesis_s0 holds no checkpoint'),
    ('config.json', 'records step 4, but .*synthesis_s0 holds no config.json'),
    ('fid.json', None),  # scored again, nothing else rerun
])
def test_a_stage_whose_files_were_deleted_is_never_reported_with_its_old_numbers(
    tmp_path, deleted, message):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  run(o, Scripts(str(tmp_path)))
  target = tmp_path / 'synthesis_s0' / deleted
  if target.is_dir():
    for name in os.listdir(target):
      os.remove(target / name)
  else:
    target.unlink()
  scripts = Scripts(str(tmp_path))
  if message:
    with pytest.raises(runner_lib.StageError, match=f'stage synthesis_s0: .*{message}'):
      run(o, scripts)
    assert scripts.calls == []
    return
  assert hat_ebm_fid(run(o, scripts)['synthesis_s0']) == 11.0
  assert scripts.calls == [('evaluate_fid.py', 'synthesis_s0')]


def test_a_stage_trained_on_after_done_is_scored_again_and_drawn_from_that_checkpoint(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis', 'ood', 'figures'), jobs='1')
  stages = stages_lib.build(o)
  assert [s.name for s in stages] == ['synthesis_s0', 'ood_s0', 'nearood_s0', 'window_s0',
                                      'figures', 'calibration']
  scripts = Scripts(str(tmp_path))
  records = run(o, scripts, stages)
  assert records['figures']['models'] == {'synthesis_s0': 4}
  assert scripts.drawn_from == {'synthesis_s0': '4'}  # the tables' checkpoint, explicitly
  assert records['calibration']['files']['samples/synthesis/samples.npz']
  train_on(str(tmp_path), 'synthesis_s0', 8)  # by hand, after the stage was done
  scripts = Scripts(str(tmp_path))
  records = run(o, scripts, stages)
  assert records['synthesis_s0']['step'] == 8 and records['figures']['models'] == {
      'synthesis_s0': 8}
  fid = json.loads((tmp_path / 'synthesis_s0' / 'fid.json').read_text())
  assert fid['step'] == 8 and records['synthesis_s0']['exits'][1]['command'].endswith(
      '--overwrite')
  # Figures and the calibration's samples come from the checkpoint the tables were scored at.
  assert scripts.drawn_from == {'synthesis_s0': '8'}
  # The OOD table too: one model, one step.
  assert json.loads((tmp_path / 'synthesis_s0' / 'ood.json').read_text())['step'] == 8
  assert [c for c, _ in scripts.calls] == ['evaluate_fid.py', 'evaluate_ood.py', 'sample.py',
                                           'calibrate_fid.py']
  assert record(str(tmp_path), 'calibration')['files'][
      'samples/synthesis/samples.npz'] == records_lib.file_sha256(
          str(tmp_path / 'samples' / 'synthesis' / 'samples.npz'))
  # Another config (not just further) is refused.
  config = json.loads((tmp_path / 'synthesis_s0' / 'config.json').read_text())
  config['training']['batch_size'] = 99
  (tmp_path / 'synthesis_s0' / 'config.json').write_text(json.dumps(config))
  with pytest.raises(runner_lib.StageError, match='synthesis_s0/config.json changed since .* '
                     r'\(another config\)'):
    run(o, Scripts(str(tmp_path)), stages)


def test_a_failed_figure_is_not_done_and_the_calibration_never_scores_stale_samples(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis', 'figures'), jobs='1')
  stages = stages_lib.build(o)
  # Samples of an earlier model lie where the figures stage writes.
  os.makedirs(tmp_path / 'samples' / 'synthesis')
  (tmp_path / 'samples' / 'synthesis' / 'samples.npz').write_text('stale')
  scripts = Scripts(str(tmp_path), codes={('sample.py', 'synthesis_s0'): 1})
  with pytest.raises(runner_lib.StageError, match=r'stage figures failed \(exit 1\) running '
                     'python experiments/sample.py --workdir=synthesis_s0'):
    run(o, scripts, stages)
  assert not (tmp_path / 'figures' / 'done.json').exists()
  assert ('calibrate_fid.py', 'synthesis_s0') not in scripts.calls
  scripts = Scripts(str(tmp_path))
  run(o, scripts, stages)  # retried, then the calibration of its samples
  assert [c for c, _ in scripts.calls] == ['sample.py', 'calibrate_fid.py']
  # The samples changed since the calibration read them: it runs again.
  (tmp_path / 'samples' / 'synthesis' / 'samples.npz').write_text('other samples')
  scripts = Scripts(str(tmp_path))
  run(o, scripts, stages)
  assert [c for c, _ in scripts.calls] == ['calibrate_fid.py']


def test_figures_alone_is_refused_before_anything_is_recorded(tmp_path):
  with pytest.raises(ValueError, match='--parts=figures draws the models of the other parts.*'
                     '--parts=synthesis,figures'):
    pipeline.reproduce(options(tmp_path / 'out', seeds=(0,), parts=('figures',)),
                       run_command=lambda *a: 0, print_fn=lambda *a, **k: None)
  assert not (tmp_path / 'out').exists()


def test_paper_scale_release_stage_runs_reruns_and_resumes(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  (tmp_path / 'release').mkdir()
  o = pipeline.check_options(options(
      tmp_path / 'out', scale='paper', seeds=(0,), parts=('refinement',), jobs='1',
      release_sngan='release', data_dir='data', inception_path='inception.pb'))
  assert (o.release_sngan, o.data_dir, o.inception_path) == tuple(
      str(tmp_path / p) for p in ('release', 'data', 'inception.pb'))  # from here, not --out
  stages = stages_lib.build(o)
  lines = ' '.join(line for s in stages for line in s.command_lines())
  assert f'--hat={tmp_path}/release/ebm.ckpt' in lines
  assert f'--inception_path={tmp_path}/inception.pb' in lines
  assert f'--config.data.data_dir={tmp_path}/data' in lines
  out = str(tmp_path / 'out')
  os.makedirs(out)
  release = [s for s in stages if s.name == 'sngan_release']
  run(o, Scripts(out), release)
  # Interrupted after the import's log was opened, before its workdir was complete: resumed.
  os.remove(os.path.join(out, 'sngan_release', 'done.json'))
  for name in os.listdir(os.path.join(out, stages_lib.RELEASE_GAN, 'checkpoints')):
    os.remove(os.path.join(out, stages_lib.RELEASE_GAN, 'checkpoints', name))
  for name in os.listdir(os.path.join(out, stages_lib.RELEASE_GAN)):
    path = os.path.join(out, stages_lib.RELEASE_GAN, name)
    os.rmdir(path) if os.path.isdir(path) else os.remove(path)
  os.rmdir(os.path.join(out, stages_lib.RELEASE_GAN))
  assert os.path.exists(os.path.join(out, 'sngan_release', 'log.txt'))
  scripts = Scripts(out)
  records = run(o, scripts, release)
  assert scripts.calls[0][0] == 'import_release.py'
  assert hat_ebm_fid(records['sngan_release']) == 11.0
  os.remove(os.path.join(out, 'sngan_release', 'done.json'))  # rerun: nothing imported again
  scripts = Scripts(out)
  run(o, scripts, release)
  assert scripts.calls == []


def test_a_users_files_in_figures_are_never_deleted_or_overwritten(tmp_path):
  out = tmp_path / 'out'
  os.makedirs(out / 'synthesis_s0')
  (out / 'synthesis_s0' / 'training_curves.png').write_bytes(b'curves')
  stages = [plan.Stage('synthesis_s0', plan.KINDS['synthesis'], 'synthesis', [], [],
                       workdir='synthesis_s0')]
  assert pipeline.collect_figures(str(out), stages, 0) == ['synthesis_s0_training_curves.png']
  (out / 'figures' / 'my_plot.png').write_bytes(b'mine')
  assert pipeline.collect_figures(str(out), [], 0) == []  # its own stale copy goes, not mine
  assert os.listdir(out / 'figures') == ['my_plot.png']
  # A user's file of the name of one of its figures: refused, kept.
  (out / 'figures' / 'synthesis_s0_training_curves.png').write_bytes(b'my curves')
  with pytest.raises(ValueError, match='synthesis_s0_training_curves.png was not written by '
                     'reproduce.py'):
    pipeline.collect_figures(str(out), stages, 0)
  assert (out / 'figures' / 'synthesis_s0_training_curves.png').read_bytes() == b'my curves'
  # figures/ a link to a user's directory: refused before any stage runs, nothing written there.
  (out / 'figures' / 'synthesis_s0_training_curves.png').unlink()
  os.rename(out / 'figures', tmp_path / 'users_figures')
  os.symlink(tmp_path / 'users_figures', out / 'figures')
  with pytest.raises(ValueError, match='figures is a symbolic link'):
    pipeline.collect_figures(str(out), stages, 0)
  assert os.listdir(tmp_path / 'users_figures') == ['my_plot.png']
  again = tmp_path / 'again'  # an --out of reproduce.py's whose figures/ is now a link
  pipeline.mark(str(again), ['figures'])
  os.symlink(tmp_path / 'users_figures', again / 'figures')
  with pytest.raises(ValueError, match='figures is a symbolic link'):
    pipeline.reproduce(options(again, seeds=(0,), parts=('synthesis',)),
                       run_command=lambda *a: 0, print_fn=lambda *a, **k: None)
  assert not (again / 'synthesis_s0').exists()


def test_out_never_lies_in_a_workdirs_checkpoints(tmp_path):
  workdir = tmp_path / 'w'
  os.makedirs(workdir / 'checkpoints')
  (workdir / 'config.json').write_text('{}')
  os.symlink(workdir / 'checkpoints', tmp_path / 'L')
  with pytest.raises(ValueError, match='lies in the training checkpoints'):
    pipeline.claim(str(tmp_path / 'L' / 'out'), ['synthesis_s0'], overwrite=True)


def test_figures_and_samples_of_an_earlier_pipeline_are_drawn_again(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis', 'figures'), jobs='1')
  stages = stages_lib.build(o)
  os.makedirs(tmp_path / 'samples' / 'synthesis')  # an earlier model's, not this pipeline's
  for name in ('langevin_path.png', 'samples.npz'):
    (tmp_path / 'samples' / 'synthesis' / name).write_text('an earlier model')
  scripts = Scripts(str(tmp_path))
  run(o, scripts, stages)
  assert scripts.drawn_from == {'synthesis_s0': '4'}
  assert (tmp_path / 'samples' / 'synthesis' / 'samples.npz').read_text() == (
      'synthesis_s0 at step 4')
  # Stopped after the figures, before their record: nothing is drawn again.
  os.remove(tmp_path / 'figures' / 'done.json')
  os.remove(tmp_path / 'calibration' / 'done.json')
  scripts = Scripts(str(tmp_path))
  run(o, scripts, stages)
  assert scripts.calls == []


class CurvesScripts(Scripts):
  """Scripts whose trainings draw their curves, as train.py does (a figure of the report)."""

  def __call__(self, argv, log, env):
    code = super().__call__(argv, log, env)
    flags = dict(a[2:].split('=', 1) for a in argv[2:] if a.startswith('--') and '=' in a)
    if os.path.basename(argv[1]).startswith('train_'):
      with open(os.path.join(self.out, flags['workdir'], 'training_curves.png'), 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n curves of ' + flags['workdir'].encode())
    return code


def test_a_copy_of_a_finished_reproduction_rebuilds_its_report(tmp_path):
  """`cp -a` (as rsync, tar, a backup's restore or a move across filesystems) gives every file a
  new inode: the copy's figures are still reproduce.py's (by content) and its report rebuilds."""
  import subprocess  # pylint: disable=g-import-not-at-top
  out, copy = tmp_path / 'out', tmp_path / 'copy'
  lines = []
  say = lambda *a, **k: lines.append(a)  # noqa: E731
  pipeline.reproduce(options(out, seeds=(0,), parts=('synthesis',), jobs='1'),
                     run_command=CurvesScripts(str(out)), print_fn=say)
  assert os.listdir(out / 'figures') == ['synthesis_s0_training_curves.png']
  subprocess.run(['cp', '-a', str(out), str(copy)], check=True)
  (copy / 'report.md').unlink()
  (copy / '.figures-staging-k1ll3d').mkdir()  # a killed run's, removed
  again = CurvesScripts(str(copy))
  records = pipeline.reproduce(options(copy, seeds=(0,), parts=('synthesis',), jobs='1'),
                               run_command=again, print_fn=say)
  assert again.calls == [] and 'synthesis_s0' in records
  assert (copy / 'report.md').read_text() == (out / 'report.md').read_text().replace(
      str(out), str(copy))
  assert os.listdir(copy / 'figures') == ['synthesis_s0_training_curves.png']
  assert not (copy / '.figures-staging-k1ll3d').exists()
  # A garbled list of figures is named, the figures kept.
  (copy / '.figures.json').write_text('{"files": ')
  with pytest.raises(ValueError, match=r'copy/\.figures\.json, the list of its figures, is '
                     r'unreadable \(.*\): no file in .*copy/figures is known to be reproduce'):
    pipeline.collect_figures(str(copy), stages_lib.build(options(copy, seeds=(0,),
                                                                 parts=('synthesis',))), 0)
  assert (copy / 'figures' / 'synthesis_s0_training_curves.png').read_bytes().endswith(
      b'curves of synthesis_s0')
