"""experiments/reproduce.py end to end: one-line errors, a quiet report, the tiny pipeline."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tf_hat_ebm import results as result_lib

from conftest import REPO, run_command

SCRIPT = os.path.join(REPO, 'experiments', 'reproduce.py')


def reproduce(*args, timeout=1200, cwd=REPO, env=None):
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                        cwd=cwd, env=env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
                        timeout=timeout)


def stage_fid(out, stage):
  """The Hat EBM's mean FID of a finished stage: its fid.json, which its done.json names by hash
  (the record holds no copy of the numbers)."""
  with open(os.path.join(out, stage, 'done.json')) as f:
    assert f'{stage}/fid.json' in json.load(f)['files']
  return result_lib.read(os.path.join(out, stage, 'fid.json')).mean('fid', 'hat_ebm')


def test_out_that_is_a_file_is_a_one_line_error_not_a_traceback(tmp_path):
  (tmp_path / 'a_file').write_text('x')
  # In this process (the script's one call): the quiet start-up is the test below's.
  result = run_command('reproduce.py', '--parts=synthesis', f'--out={tmp_path / "a_file"}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines() == [
      f'error: --out={tmp_path / "a_file"} is a file; give a directory']
  assert (tmp_path / 'a_file').read_text() == 'x'


@pytest.mark.slow
@pytest.mark.long
def test_tiny_pipeline_reports_skips_when_done_and_resumes(tmp_path):
  out = str(tmp_path)
  args = ('--size=tiny', '--seeds=0,1', '--parts=synthesis', '--jobs=1', f'--out={out}')
  first = reproduce(*args)
  assert first.returncode == 0, first.stderr[-3000:]
  assert '[1/2] synthesis_s0: running' in first.stdout
  assert '[2/2] synthesis_s1: done in' in first.stdout
  with open(os.path.join(out, 'report.json')) as f:
    report = json.load(f)
  per_seed = [stage_fid(out, f'synthesis_s{s}') for s in (0, 1)]
  row = report['tables']['synthesis'][0]
  assert row['per_seed'] == per_seed
  std = np.std(per_seed, ddof=1)  # the sample std over seeds
  np.testing.assert_allclose([row['mean'], row['std']], [np.mean(per_seed), std])
  assert row['eval_runs'] == 2 and row['eval_std'] > 0  # 2 FID runs per seed
  with open(os.path.join(out, 'report.md')) as f:
    markdown = f.read()
  assert (f'| Hat EBM X = G(Z) + Y, digits_synth | {np.mean(per_seed):.2f} ± {std:.2f} | '
          f'{row["eval_std"]:.2f} |') in markdown
  assert '| SN-GAN G(Z0) | – | – |' in markdown  # a part not run is a dash, not a number
  assert 'train_synthesis.py' in markdown and '--config.seed=1' in markdown
  assert os.listdir(os.path.join(out, 'tensorboard'))
  # the plateau rule's checkpoint (step 1 of the tiny 2) was archived and scored
  plateau = report['plateau'][0]
  assert plateau['arm'] == 'synthesis: Hat EBM' and plateau['steps'] == [2]
  assert [s['mid_step'] for s in plateau['seeds']] == [1, 1] and plateau['mid'] is not None
  assert '## Trained to a plateau?' in markdown and '## What this scale does not test' in markdown

  # All done: nothing runs again.
  second = reproduce(*args)
  assert second.returncode == 0, second.stderr[-3000:]
  assert '[1/2] synthesis_s0: done (skipped)' in second.stdout
  assert '[2/2] synthesis_s1: done (skipped)' in second.stdout

  # Interrupted after training and scoring, before its done marker: the training resumes at its
  # last checkpoint and the finished evaluation is kept.
  os.remove(os.path.join(out, 'synthesis_s1', 'done.json'))
  fid_time = os.path.getmtime(os.path.join(out, 'synthesis_s1', 'fid.json'))
  third = reproduce(*args)
  assert third.returncode == 0, third.stderr[-3000:]
  assert '[2/2] synthesis_s1: running' in third.stdout
  assert 'synthesis_s0: done (skipped)' in third.stdout
  with open(os.path.join(out, 'synthesis_s1', 'log.txt')) as f:
    log = f.read()
  # Trained to its step: neither the training nor the evaluation runs again.
  assert log.count('$ python experiments/train_synthesis.py') == 1
  assert log.count('$ python experiments/evaluate_fid.py') == 2  # the end's, the 2/3 checkpoint's
  assert os.path.getmtime(os.path.join(out, 'synthesis_s1', 'fid.json')) == fid_time
  with open(os.path.join(out, 'synthesis_s1', 'done.json')) as f:
    assert json.load(f)['exits'][0]['exit'] == 'skipped: trained to step 2'
  with open(os.path.join(out, 'report.json')) as f:
    assert json.load(f)['tables']['synthesis'][0]['per_seed'] == per_seed


@pytest.mark.slow
@pytest.mark.long
def test_sigkill_mid_stage_then_rerun_finishes_the_stage(tmp_path):
  """SIGKILL of reproduce.py and its children once the stage's training has checkpointed (while
  it scores): the rerun takes over the dead run's lock, resumes the stage and finishes it."""
  import glob  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  out = str(tmp_path)
  args = ('--size=tiny', '--seeds=0', '--parts=synthesis', f'--out={out}')
  proc = subprocess.Popen([sys.executable, SCRIPT, *args], cwd=REPO, start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  deadline = time.time() + 600
  while not glob.glob(os.path.join(out, 'synthesis_s0', '**', 'ckpt-2.index'),
                      recursive=True):
    assert proc.poll() is None and time.time() < deadline, 'the stage never checkpointed'
    time.sleep(0.2)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  assert not os.path.exists(os.path.join(out, 'synthesis_s0', 'done.json'))  # killed mid-stage

  rerun = reproduce(*args)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert '[1/1] synthesis_s0: running' in rerun.stdout
  assert os.path.exists(os.path.join(out, 'synthesis_s0', 'done.json'))
  assert np.isfinite(stage_fid(out, 'synthesis_s0'))
  with open(os.path.join(out, 'report.json')) as f:
    assert len(json.load(f)['tables']['synthesis'][0]['per_seed']) == 1


def test_finished_pipeline_only_rewrites_the_report_quietly(tmp_path):
  from tf_hat_ebm import result_files  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import pipeline  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import plan  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import records  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import stages  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  options = stages.Options(out=str(out), seeds=(0,), parts=('synthesis',), size='tiny')
  stage, = stages.build(options)
  pipeline.mark(str(out), pipeline.own_entries([stage]))
  # A finished stage as the runner records it: its workdir at step 2, its fid.json.
  workdir = out / 'synthesis_s0'
  (workdir / 'checkpoints').mkdir(parents=True)
  (workdir / 'checkpoints' / 'ckpt-2.index').write_bytes(b'')
  (workdir / 'config.json').write_text(json.dumps(dict(training=dict(num_steps=2))))
  evaluation = result_lib.EvalResult(
      methods={'hat_ebm': 'Hat EBM samples X = G(Z) + Y', 'generator': 'generator alone G(Z)'},
      metrics={'fid': result_lib.FID}, values={'fid': {'hat_ebm': [11.0], 'generator': [25.0]}},
      data={'fid': 3.0}, step=2, runs=1)
  result_files.write_json(str(workdir / 'fid.json'), evaluation.to_json())  # as evaluate.py does
  # and the plateau rule's checkpoint's (its --checkpoint's step)
  earlier = result_lib.EvalResult.from_json(dict(evaluation.to_json(),
                                                 step=stage.commands[-1].checkpoint))
  result_files.write_json(str(workdir / plan.PLATEAU_FID), earlier.to_json())
  files = {f'synthesis_s0/{n}': records.file_sha256(str(workdir / n))
           for n in ('config.json', 'fid.json', plan.PLATEAU_FID)}
  done = dict(stage='synthesis_s0', scale='digits', size='tiny', commands=stage.command_lines(),
              seconds=60.0, step=2, num_steps=2, files=files,
              config=dict(sha256=files['synthesis_s0/config.json'],
                          body_sha256=records.config_body_sha256(str(workdir / 'config.json'))),
              result=evaluation.to_json(), plateau=earlier.to_json())
  (out / 'synthesis_s0' / 'done.json').write_text(json.dumps(done))
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  result = reproduce('--size=tiny', '--seeds=0', '--parts=synthesis', f'--out={out}', env=env,
                     timeout=120)
  assert result.returncode == 0, result.stderr
  assert '[1/1] synthesis_s0: done (skipped); hat_ebm 11.00, generator 25.00\n' in result.stdout
  assert ('| Hat EBM X = G(Z) + Y, digits_synth | 11.00 | – | -56.0% | 19.30 ± 0.15 (CIFAR-10) '
          '| synthesis_s* |') in result.stdout
  # Not one line of TensorFlow's C++ start-up (its E lines about CUDA factories, I, W lines).
  assert not re.search(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ', result.stderr, re.M)
  assert sorted(os.listdir(out)) == ['.reproduce.json', 'figures', 'report.json', 'report.md',
                                     'synthesis_s0', 'tensorboard']
  # The same markdown in TensorBoard's text tab.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  texts = [tf.make_ndarray(v.tensor).item().decode()
           for path in (out / 'tensorboard').iterdir()
           for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()
           for v in tf.compat.v1.Event.FromString(record).summary.value if v.tag == 'report']
  assert texts == [(out / 'report.md').read_text()]


@pytest.mark.slow
@pytest.mark.long
def test_sigterm_to_reproduce_stops_its_training_child_and_the_rerun_resumes(tmp_path):
  """SIGTERM to reproduce.py alone (not its process group) while a stage trains: its child is
  stopped too (no orphan holding the workdir's lock), and the same command resumes."""
  import glob  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  out = str(tmp_path)
  args = ('--size=tiny', '--seeds=0', '--parts=synthesis', f'--out={out}')
  proc = subprocess.Popen([sys.executable, SCRIPT, *args], cwd=REPO, start_new_session=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  deadline = time.time() + 600
  while not os.path.exists(os.path.join(out, 'synthesis_s0', 'train.lock')):
    assert proc.poll() is None and time.time() < deadline, 'the stage never started training'
    time.sleep(0.1)
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=300)
  assert proc.returncode == 130, stderr
  assert stderr.strip().splitlines()[-1] == ('error: interrupted: the running stages were '
                                             'stopped; rerun the same command to resume')
  lock = os.path.join(out, 'synthesis_s0', 'train.lock')
  if os.path.exists(lock):  # left by a child killed during start-up: stale, taken over
    with open(lock) as f:
      pid = json.load(f)['pid']
    with pytest.raises(ProcessLookupError):  # no orphan: the training child is gone
      os.kill(pid, 0)
  assert not os.path.exists(os.path.join(out, 'reproduce.lock'))
  assert not os.path.exists(os.path.join(out, 'synthesis_s0', 'done.json'))
  # Stopped in its start-up, not left to finish its 2 steps.
  assert not glob.glob(os.path.join(out, 'synthesis_s0', 'checkpoints', 'ckpt-2.index'))
  assert not glob.glob(os.path.join(out, 'report.*'))

  rerun = reproduce(*args)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  with open(os.path.join(out, 'synthesis_s0', 'done.json')) as f:
    record = json.load(f)
  assert record['step'] == record['num_steps'] == 2
  assert np.isfinite(stage_fid(out, 'synthesis_s0'))
