"""The reproduction's children die with it: a SIGKILL of reproduce.py alone leaves no orphan
(tiny `python -c` processes, TensorFlow-free)."""
import os
import signal
import subprocess
import sys
import time

import pytest

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
