"""The reproduction's children die with it: a SIGKILL of reproduce.py alone leaves no orphan
(tiny `python -c` processes, TensorFlow-free)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import children

from conftest import REPO

SLEEPER = [sys.executable, '-c', 'import time; time.sleep(60)']
# A stand-in for reproduce.py: starts a sleeping child as the runner does and waits for it.
PARENT = ('import sys\n'
          'from tf_hat_ebm.reproduction import children\n'
          'child = children.Child([sys.executable, "-c", "import time; time.sleep(60)"], '
          'use_prctl=sys.argv[1] == "prctl")\n'
          'print(child.pid, flush=True)\n'
          'child.wait()\n')


def gone_within(pid, seconds):
  deadline = time.time() + seconds
  while time.time() < deadline:
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      return True
    time.sleep(0.05)
  return False


@pytest.mark.parametrize('how', ['prctl', 'watchdog'])
def test_sigkill_of_the_parent_alone_kills_its_child(how):
  if how == 'prctl' and children._PRCTL is None:
    pytest.skip('no prctl (not Linux)')
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get('PYTHONPATH', '')]))
  parent = subprocess.Popen([sys.executable, '-c', PARENT, how], stdout=subprocess.PIPE,
                            text=True, env=env)
  try:
    pid = int(parent.stdout.readline())
    assert not gone_within(pid, 0.2)  # alive while its parent is
    parent.send_signal(signal.SIGKILL)  # the parent alone, not its process group
    parent.wait()
    assert gone_within(pid, 10), f'orphan {pid} outlived its parent'
  finally:
    if parent.poll() is None:
      parent.kill()
    parent.stdout.close()


def test_watchdog_leaves_a_child_that_ended_by_itself_alone():
  child = children.Child([sys.executable, '-c', 'raise SystemExit(3)'], use_prctl=False)
  watchdog = child.watchdog
  assert child.wait(30) == 3
  assert watchdog.returncode == 0 and child.watchdog is None
  # The parent dying (the pipe closed without "done") kills a running child.
  child = children.Child(SLEEPER, use_prctl=False)
  child.watchdog.stdin.close()
  assert child.proc.wait(30) == -signal.SIGKILL


def test_child_started_after_its_parent_died_kills_itself(monkeypatch):
  calls, killed = [], []
  monkeypatch.setattr(os, 'kill', lambda pid, sig: killed.append((pid, sig)))
  preexec = children._die_with_parent(parent=-1, prctl=lambda *a: calls.append(a))
  preexec()
  assert calls == [(children.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)]
  assert killed == [(os.getpid(), signal.SIGKILL)]


def dead_pid():
  proc = subprocess.Popen([sys.executable, '-c', 'pass'])
  proc.wait()
  return proc.pid


def test_rerun_after_a_sigkill_takes_over_the_dead_runs_locks(tmp_path):
  """reproduce.lock and a stage's train.lock of a killed run (their pids gone) are taken over."""
  import json  # pylint: disable=g-import-not-at-top
  import socket  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import pipeline  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import stages  # pylint: disable=g-import-not-at-top
  from test_reproduction import FakeScripts  # pylint: disable=g-import-not-at-top
  out = tmp_path / 'out'
  o = stages.Options(out=str(out), seeds=(0,), parts=('synthesis',), jobs='1')
  pipeline.mark(str(out), pipeline.own_entries(stages.build(o)))
  stale = json.dumps(dict(pid=dead_pid(), host=socket.gethostname()))
  (out / pipeline.LOCK).write_text(stale)
  (out / 'synthesis_s0').mkdir()
  (out / 'synthesis_s0' / 'train.lock').write_text(stale)
  printed = []
  records = pipeline.reproduce(o, run_command=FakeScripts(str(out)),
                               print_fn=lambda *a, **k: printed.append(' '.join(map(str, a))))
  assert result_lib.from_record(records['synthesis_s0']['result']).mean('fid', 'hat_ebm') == 11.0
  assert any('Taking over the stale lock' in p and pipeline.LOCK in p for p in printed)
  assert not (out / pipeline.LOCK).exists()
  # The stage's own lock is its training's (the trainer takes it over: tests/test_resume.py).
  from tf_hat_ebm import workdir as workdir_lib  # pylint: disable=g-import-not-at-top
  with workdir_lib.WorkdirLock(str(out / 'synthesis_s0'), log=printed.append):
    pass
  assert printed[-1].startswith('Taking over the stale lock') and 'train.lock' in printed[-1]
