"""Child processes that die with the process that started them (TensorFlow-free).

A SIGKILL of reproduce.py alone (the OOM killer, `kill -9 PID`) runs none of its handlers, so
its training child would live on as an orphan holding the stage's workdir lock. On Linux the
child asks the kernel for SIGKILL when its parent thread ends (prctl PR_SET_PDEATHSIG, set between
fork and exec); elsewhere a small watchdog process per child kills it when the pipe from the parent
closes without the parent's "done". The parent must start and wait for the child in one thread
(the kernel's "parent" is the thread that forked).
"""
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
import threading

PR_SET_PDEATHSIG = 1
# The watchdog: a line "done" from the parent means the child ended normally; end of file without
# it means the parent died, and the child (its pid the argument) is killed.
WATCHDOG = ('import os, signal, sys\n'
            'if sys.stdin.readline().strip() != "done":\n'
            '  try:\n'
            '    os.kill(int(sys.argv[1]), signal.SIGKILL)\n'
            '  except OSError:\n'
            '    pass\n')


def _prctl():
  """libc's prctl on Linux, else None."""
  if not sys.platform.startswith('linux'):
    return None
  try:
    libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    return libc.prctl
  except (OSError, AttributeError):
    return None


_PRCTL = _prctl()


def _die_with_parent(parent, prctl=None):
  """preexec_fn: SIGKILL when the parent thread ends; at once if the parent is already gone."""
  prctl = prctl or _PRCTL

  def preexec():
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died between fork and prctl
      os.kill(os.getpid(), signal.SIGKILL)

  return preexec


class Child:
  """A subprocess.Popen that dies with this process; `wait()` returns its exit code."""

  def __init__(self, argv, use_prctl=True, **kwargs):
    self.watchdog, self.lock = None, threading.Lock()
    if use_prctl and _PRCTL is not None:
      self.proc = subprocess.Popen(argv, preexec_fn=_die_with_parent(os.getpid()), **kwargs)
    else:
      self.proc = subprocess.Popen(argv, **kwargs)
      self.watchdog = subprocess.Popen(
          [sys.executable, '-S', '-c', WATCHDOG, str(self.proc.pid)], stdin=subprocess.PIPE,
          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    self.pid = self.proc.pid

  def send_signal(self, sig):
    self.proc.send_signal(sig)

  def kill(self):
    self.proc.kill()

  def poll(self):
    return self.proc.poll()

  def wait(self, timeout=None):
    code = self.proc.wait(timeout)
    self.release()
    return code

  def release(self):
    """Tells the watchdog the child ended by itself (it exits without killing anything)."""
    with self.lock:
      watchdog, self.watchdog = self.watchdog, None
    if watchdog is not None:
      try:
        watchdog.stdin.write(b'done\n')
        watchdog.stdin.close()
      except OSError:
        pass
      watchdog.wait()
