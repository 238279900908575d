"""Locks and partial outputs that heal, and disks that cannot be written: a lock or staging
directory a killed command left is taken over or cleaned with a line saying so, and the rerun
its message suggests works; a read-only or full filesystem is one line naming the path and what
to do, never a traceback."""
import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tf_hat_ebm import workdir as workdir_lib

from conftest import REPO, run_command
from test_reliability import assert_one_line_error


def refuse_writes(monkeypatch, number, where):
  """os.open of a new file under `where` fails with `number` (EROFS: a read-only mount, which
  even root cannot write; chmod would not stop root)."""
  real = os.open

  def fake(path, flags, *args, **kwargs):
    if str(path).startswith(str(where)) and flags & os.O_CREAT:
      raise OSError(number, os.strerror(number), str(path))
    return real(path, flags, *args, **kwargs)
  monkeypatch.setattr(os, 'open', fake)


def test_evaluate_fid_on_a_read_only_workdir_is_one_line(trained_workdir, monkeypatch):
  before = sorted(os.listdir(trained_workdir))
  refuse_writes(monkeypatch, errno.EROFS, trained_workdir)
  result = run_command('evaluate_fid.py', f'--workdir={trained_workdir}', '--num_samples=4',
                       '--runs=1')
  line = assert_one_line_error(result, os.path.join(trained_workdir, '.fid.json.lock'))
  assert 'Read-only file system' in line and 'make it writable, or choose another' in line
  assert sorted(os.listdir(trained_workdir)) == before


@pytest.mark.parametrize('number, advice', [(errno.EROFS, 'make it writable'),
                                            (errno.ENOSPC, 'out of disk space: free some')])
def test_a_lock_on_a_read_only_or_full_disk_is_one_line(tmp_path, monkeypatch, number, advice):
  refuse_writes(monkeypatch, number, tmp_path)
  with pytest.raises(PermissionError, match=f'cannot take the lock {tmp_path}/train.lock: .*'
                     f'{advice}'):
    workdir_lib.WorkdirLock(str(tmp_path)).__enter__()


def test_a_lock_whose_write_fills_the_disk_leaves_no_empty_lock(tmp_path, monkeypatch):
  real = os.fdopen

  class Full:
    def __init__(self, fd, mode):
      self.f = real(fd, mode)

    def __enter__(self):
      return self

    def write(self, text):
      raise OSError(errno.ENOSPC, 'No space left on device')

    def __exit__(self, *exc):
      self.f.close()
  monkeypatch.setattr(os, 'fdopen', Full)
  with pytest.raises(PermissionError, match='No space left on device; out of disk space'):
    workdir_lib.WorkdirLock(str(tmp_path), name='.sample.lock').__enter__()
  assert os.listdir(tmp_path) == []


def long_chain_workdir(trained_workdir, tmp_path, steps):
  """A copy of the tiny trained run whose sampling chain is `steps` long (sampling.steps is no
  structural field: the checkpoint loads as it is)."""
  import json  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / 'long_chain'
  shutil.copytree(trained_workdir, workdir)
  config = json.loads((workdir / 'config.json').read_text())
  config['sampling']['steps'] = steps
  (workdir / 'config.json').write_text(json.dumps(config, indent=2))
  return workdir


@pytest.mark.slow
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_chain_stops_sample_within_seconds(trained_workdir, tmp_path, signum):
  """The documented longest chain (10,000 steps): sample.py used to exit only when it ended."""
  workdir = long_chain_workdir(trained_workdir, tmp_path, 10_000)
  output = tmp_path / 'samples'
  proc = subprocess.Popen(
      [sys.executable, os.path.join(REPO, 'experiments', 'sample.py'), f'--workdir={workdir}',
       f'--output={output}', '--num_samples=64', '--batch_size=64'], cwd=REPO,
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
      env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL='3'),
      # Ctrl-C at its default, as a terminal starts a command: a test worker may hold SIGINT
      # ignored, and a child started so keeps ignoring it (POSIX)
      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
  try:
    for line in proc.stdout:  # the chain starts after this line
      if line.startswith('drawing 64 samples'):
        break
    time.sleep(3)  # well inside the chain (traced, running)
    assert proc.poll() is None, 'the chain ended before the signal: make it longer'
    sent = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    seconds = time.monotonic() - sent
  finally:
    proc.kill()
    proc.wait()
  # Seconds alone; 30 leaves room for a loaded machine. The old sample.py ran the whole chain,
  # past communicate's 60 s (TimeoutExpired fails the test).
  assert seconds < 30, seconds
  assert proc.returncode == 130, err
  lines = [line for line in err.strip().splitlines() if line.startswith('error: ')]
  assert lines == ['error: interrupted'], err
  # nothing half-written: the output holds no staging directory, lock nor part
  assert not output.exists() or os.listdir(output) == []


@pytest.mark.parametrize('script, lock', [
    ('sample', ''), ('export', json.dumps(dict(pid=2**22 + 7, host=socket.gethostname()))),
    ('compare_baselines', '{garbled')])
def test_a_killed_runs_lock_and_staging_are_taken_over_and_the_rerun_works(
    tmp_path, capsys, script, lock):
  """What SIGKILL or a full disk leaves (an empty or dead lock, a staging directory): the same
  command, without --overwrite, takes it over and writes its output."""
  from tf_hat_ebm import outputs  # pylint: disable=g-import-not-at-top
  (tmp_path / f'.{script}.lock').write_text(lock)
  staging = tmp_path / f'.{script}-staging-k1ll3d'
  (staging / 'variables').mkdir(parents=True)
  (staging / 'variables' / 'variables.data-00000-of-00001').write_bytes(b'half')
  with outputs.OwnedOutput(str(tmp_path), script, False, 'output') as out:
    (tmp_path / os.path.basename(out.staging) / 'result.txt').write_text('whole')
    out.commit()
  assert sorted(os.listdir(tmp_path)) == [f'.{script}.manifest.json', 'result.txt']
  said = capsys.readouterr().out
  assert f'Taking over the stale lock {tmp_path}/.{script}.lock' in said
  assert f'Removed {staging}, left by a killed {script} run.' in said
  # A live run's lock is still its own: refused, nothing removed.
  (tmp_path / f'.{script}.lock').write_text(json.dumps(dict(
      pid=os.getpid(), host=socket.gethostname(), start=workdir_lib.process_start(os.getpid()))))
  with pytest.raises(workdir_lib.WorkdirLockedError, match=f'another {script} run'):
    outputs.OwnedOutput(str(tmp_path), script, True, 'output').__enter__()
  assert (tmp_path / 'result.txt').read_text() == 'whole'


def test_a_write_into_an_output_over_the_file_size_limit_names_the_output(tmp_path):
  """A memmap or zip write under `ulimit -f` fails with errno 27 and no file name (sample.py's
  samples.npz): the output is named, its staging removed."""
  from tf_hat_ebm import outputs  # pylint: disable=g-import-not-at-top
  with pytest.raises(PermissionError, match=f'cannot write --output={tmp_path}: File too large; '
                     r'over the file-size limit \(ulimit -f\)'):
    with outputs.OwnedOutput(str(tmp_path), 'sample', False, 'output'):
      raise OSError(errno.EFBIG, 'File too large')
  assert os.listdir(tmp_path) == []


def test_a_signal_during_a_chain_only_flags_and_the_wait_raises_the_interrupt():
  """The handlers inside interruptible return (a KeyboardInterrupt raised by the handler could
  land in a destructor and be ignored); the wait loop raises it, and the handlers are restored."""
  from tf_hat_ebm import interrupts  # pylint: disable=g-import-not-at-top
  worker = signal.signal(signal.SIGINT, signal.default_int_handler)  # a terminal's Ctrl-C
  before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
  returned = []

  def chain():
    for signum in (signal.SIGINT, signal.SIGTERM):
      signal.getsignal(signum)(signum, None)  # the handler as the main thread would run it
      returned.append(signum)
    time.sleep(1)

  try:
    with pytest.raises(KeyboardInterrupt):
      interrupts.interruptible(chain)
    assert {s: signal.getsignal(s) for s in before} == before
  finally:
    interrupts._ABANDONED.clear()  # pylint: disable=protected-access
    signal.signal(signal.SIGINT, worker)
  assert returned == [signal.SIGINT, signal.SIGTERM]
