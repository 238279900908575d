"""Resume that never guesses, the workdir lock, range checks, orphan clean-up, finite saves."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm.tasks.synthesis import SynthesisTask
from tf_hat_ebm.trainer import DivergenceError, Trainer
from tf_hat_ebm import workdir as workdir_lib

from conftest import copy_of, run_command, tiny

STRATEGY = tf.distribute.get_strategy()


def make_trainer(workdir, config=None, **kwargs):
  config = config or tiny()
  return Trainer(SynthesisTask(config, STRATEGY), config, str(workdir), STRATEGY, verbose=False,
                 **kwargs)


def listing(workdir):
  return {d: sorted(os.listdir(workdir / d)) for d in ('checkpoints', 'samples')
          if (workdir / d).is_dir()}


def damage(ckpt, how):
  if how == 'missing state file':
    os.remove(ckpt / 'checkpoint')
  elif how == 'garbled state file':
    (ckpt / 'checkpoint').write_text('model_checkpoint_path: \x00\x01 {{{')
  elif how == 'deleted index':
    os.remove(ckpt / 'ckpt-4.index')
  elif how == 'truncated data':
    data = [p for p in os.listdir(ckpt) if p.startswith('ckpt-4.data')][0]
    with open(ckpt / data, 'r+b') as f:
      f.truncate(50)


@pytest.mark.parametrize('how', ['missing state file', 'garbled state file', 'deleted index',
                                 'truncated data'])
def test_damaged_latest_checkpoint_stops_without_touching_anything(four_steps, tmp_path, how):
  workdir = copy_of(four_steps, tmp_path)
  damage(workdir / 'checkpoints', how)
  before = listing(workdir)
  config_before = (workdir / 'config.json').read_text()
  with pytest.raises(ValueError, match=r'cannot resume from .*checkpoints found: ckpt-4, ckpt-2; '
                     r'nothing was deleted; .*--checkpoint=STEP.*--checkpoint=latest_intact'):
    make_trainer(workdir).train(6)
  assert listing(workdir) == before
  assert (workdir / 'config.json').read_text() == config_before
  # on request: the newest checkpoint that restores (trained on from there once: a training
  # traces its loop, seconds of CPU, and what follows the restore is every kind's)
  trainer = make_trainer(workdir, resume_from='latest_intact')
  intact = 4 if 'state file' in how else 2
  if how == 'deleted index':
    trainer.train(6)
    assert trainer.checkpoints.last_good.endswith('ckpt-6')
  else:
    assert trainer.restore_or_initialize() and int(trainer.step.numpy()) == intact
  assert trainer.resume.resumed_at == intact


def test_explicit_checkpoint_resumes_that_exact_state(four_steps, tmp_path):
  workdir = copy_of(four_steps, tmp_path)
  ckpt2 = str(workdir / 'checkpoints' / 'ckpt-2')
  trainer = make_trainer(workdir, resume_from='2')
  assert trainer.restore_or_initialize()
  assert int(trainer.step.numpy()) == 2
  reference = SynthesisTask(tiny(), STRATEGY)
  tf.train.Checkpoint(hat=reference.hat).read(ckpt2).expect_partial()
  for a, b in zip(reference.hat.variables, trainer.task.hat.variables):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  with pytest.raises(ValueError, match=r'cannot restore checkpoint .*ckpt-3.*checkpoints found'):
    make_trainer(workdir, resume_from='3').restore_or_initialize()


def test_config_json_is_written_only_after_the_restore(four_steps, tmp_path):
  workdir = copy_of(four_steps, tmp_path)
  before = (workdir / 'config.json').read_text()
  other = tiny(**{'model.hat_width': 16})
  with pytest.raises(ValueError, match='cannot restore checkpoint'):
    make_trainer(workdir, other, allow_config_change=True).train(6)
  assert (workdir / 'config.json').read_text() == before


def test_config_check_runs_when_the_state_file_is_missing(four_steps, tmp_path):
  workdir = copy_of(four_steps, tmp_path)
  os.remove(workdir / 'checkpoints' / 'checkpoint')
  other = tiny(**{'model.hat_width': 16})
  with pytest.raises(ValueError, match=r'different config \(model: '):
    make_trainer(workdir, other).train(6)


@pytest.mark.parametrize('toggled', [False, True])
def test_checkpoint_data_iterator_toggled_on_resume_names_the_field(four_steps, tmp_path, toggled):
  workdir = copy_of(four_steps, tmp_path)
  saved = tiny().training.checkpoint_data_iterator
  if toggled:  # the checkpoints were written with the other value
    config = json.loads((workdir / 'config.json').read_text())
    config['training']['checkpoint_data_iterator'] = not saved
    (workdir / 'config.json').write_text(json.dumps(config))
    saved = not saved
  other = tiny(**{'training.checkpoint_data_iterator': not saved})
  before = listing(workdir)
  with pytest.raises(ValueError, match=rf'training.checkpoint_data_iterator was {saved} when the '
                     rf'checkpoints .* --config.training.checkpoint_data_iterator={saved}$'):
    make_trainer(workdir, other, allow_config_change=True).train(6)
  assert listing(workdir) == before


def test_a_resume_takes_over_a_stale_lock_clears_orphans_and_reads_an_older_config_json(
    four_steps, tmp_path):
  """One resumed run on a workdir as a killed run leaves it: a live lock refuses, a stale lock is
  taken over, a killed save's orphans are removed (and nothing else), and a config.json without a
  field added since (optim.hat_clip_mode) is read as its default."""
  workdir = copy_of(four_steps, tmp_path)
  lock = workdir / workdir_lib.LOCK_NAME
  # A live Python process of this host holds it (not the parent: under a shell it is not Python).
  holder = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])
  try:
    lock.write_text(json.dumps(dict(pid=holder.pid, host=socket.gethostname())))
    with pytest.raises(workdir_lib.WorkdirLockedError,
                       match=rf'in use .*train.lock holds pid {holder.pid} on host '):
      make_trainer(workdir).train(6)
  finally:
    holder.kill()
    holder.wait()
  assert lock.exists()
  gone = subprocess.Popen(['true'])
  gone.wait()
  lock.write_text(json.dumps(dict(pid=gone.pid, host=socket.gethostname())))
  ckpt = workdir / 'checkpoints'
  (ckpt / 'ckpt-5_temp').mkdir()
  (ckpt / 'ckpt-5_temp' / 'part-00000-of-00001.index').write_text('x')
  (ckpt / 'notes_temp').write_text('keep')
  (workdir / 'config.json.tmp').write_text('{')
  config = json.loads((workdir / 'config.json').read_text())
  del config['optim']['hat_clip_mode']
  (workdir / 'config.json').write_text(json.dumps(config))
  messages = []
  trainer = make_trainer(workdir)
  trainer._log = messages.append  # pylint: disable=protected-access
  # To the step it holds: all of a resume but the training steps (their tracing costs seconds).
  assert trainer.train(4) == {}
  assert trainer.resume.resumed_at == 4 and int(trainer.step.numpy()) == 4
  assert any('stale lock' in m and str(gone.pid) in m for m in messages)
  assert not lock.exists()  # released on exit
  assert not (ckpt / 'ckpt-5_temp').exists() and not (workdir / 'config.json.tmp').exists()
  assert (ckpt / 'notes_temp').read_text() == 'keep'
  assert any('leftover' in m and 'ckpt-5_temp' in m for m in messages)
  with pytest.raises(ValueError, match='below step 4'):
    make_trainer(workdir).train(3)
  assert not lock.exists()  # released on errors too


def test_range_checks(four_steps, tmp_path):
  workdir = copy_of(four_steps, tmp_path)
  with pytest.raises(ValueError, match=r'training.num_steps must be > 0, not -1'):
    make_trainer(workdir).train(-1)
  with pytest.raises(ValueError, match=r'training.num_steps 3 is below step 4'):
    make_trainer(workdir).train(3)
  assert make_trainer(workdir).train(4) == {}  # nothing to do
  for key, value, match in (
      ('steps_per_loop', 0, 'steps_per_loop must be an integer >= 1'),
      ('checkpoint_every', -5, 'checkpoint_every must be an integer >= 0'),
      ('rollback_lr_factor', 2.0, 'rollback_lr_factor must be a finite number > 0 and < 1')):
    with pytest.raises(ValueError, match=match):
      make_trainer(workdir, tiny(**{f'training.{key}': value})).train(6)
  config = tiny()
  config.training.guard.action = 'explode'
  with pytest.raises(ValueError, match='training.guard.action must be one of'):
    make_trainer(workdir, config).train(6)


def test_non_finite_state_is_never_saved(tmp_path):
  trainer = make_trainer(tmp_path)
  trainer.restore_or_initialize()
  trainer.save(0)
  var = trainer.task.generator.trainable_variables[0]
  var.assign(tf.fill(var.shape, np.inf))
  with pytest.raises(DivergenceError, match=r'non-finite weights in generator at step 1; not saved'
                     r'; last good checkpoint: .*ckpt-0'):
    trainer.save(1)
  assert not os.path.exists(tmp_path / 'checkpoints' / 'ckpt-1.index')


def test_script_stops_in_one_line_on_a_missing_state_file(four_steps, tmp_path):
  workdir = copy_of(four_steps, tmp_path)
  os.remove(workdir / 'checkpoints' / 'checkpoint')
  flags = ['--config.model.hat_width=8', '--config.model.gen_width=8', '--config.model.z_dim=4',
           '--config.langevin.steps=2', '--config.sampling.steps=2',
           '--config.training.batch_size=4', '--config.training.bank_size=16',
           '--config.training.num_steps=6', '--config.training.steps_per_loop=2',
           '--config.training.checkpoint_every=2', '--config.training.num_grid_samples=4']
  result = run_command('train_synthesis.py', f'--workdir={workdir}', *flags)
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith(
      f'error: cannot resume from {workdir}/checkpoints: its `checkpoint` state file is missing')
  # Resumed to the step it holds: the restore, not the training steps (seconds of tracing).
  result = run_command('train_synthesis.py', f'--workdir={workdir}', '--checkpoint=2', *flags,
                       '--config.training.num_steps=2')
  assert result.returncode == 0, result.stderr
  assert 'Resumed from' in result.stdout and 'ckpt-2 at step 2' in result.stdout
  assert 'Already at step 2' in result.stdout
