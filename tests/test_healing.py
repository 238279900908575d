"""Locks and partial outputs that heal, and disks that cannot be written: a lock or staging
directory a killed command left is taken over or cleaned with a line saying so, and the rerun
its message suggests works; a read-only or full filesystem is one line naming the path and what
to do, never a traceback."""
import errno
import os

import pytest

from tf_hat_ebm import workdir as workdir_lib

from conftest import run_command
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
