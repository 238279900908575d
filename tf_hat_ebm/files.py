"""Local files written whole or not at all, and the one line a full or read-only disk gives.

A file is written to a temporary file in its own directory, flushed to disk (fsync) and renamed
over the old one: a reader, a kill or a full disk sees the old file or the new one, never a cut
one, and no temporary file stays behind after a failure. Pure Python (the docs' quoter uses it).
"""
import errno
import hashlib
import os
import sys
import tempfile
import time

# A disk that cannot take the bytes, or a file-size limit (`ulimit -f`): free space and rerun.
FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# A directory that cannot be written: make it writable or choose another.
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def what_to_do(e):
  """What a user does about an OSError of writing a file (a sentence), by its errno."""
  if getattr(e, 'errno', None) == errno.EFBIG:
    return 'over the file-size limit (ulimit -f) or the filesystem\'s: raise it and rerun'
  if getattr(e, 'errno', None) in FULL:
    return 'out of disk space: free some and rerun'
  if getattr(e, 'errno', None) in READ_ONLY:
    return 'the directory is read-only: make it writable, or choose another directory'
  return 'check the path and rerun'


def cannot_write(path, e):
  """The one line of a failed write: the path, the system's reason, what to do."""
  return f'cannot write {path}: {getattr(e, "strerror", None) or e}; {what_to_do(e)}'


def _temporary(path, content):
  """A fsynced temporary file beside `path` holding `content`; its path."""
  directory, name = os.path.split(os.path.abspath(path))
  fd, tmp = tempfile.mkstemp(prefix=f'.{name}.', suffix='.tmp', dir=directory)
  try:
    mode = 0o666 & ~_UMASK
    os.fchmod(fd, mode)  # as open() would have made it, not mkstemp's 0600
    with os.fdopen(fd, 'wb' if isinstance(content, bytes) else 'w') as f:
      f.write(content)
      f.flush()
      os.fsync(f.fileno())
  except BaseException:
    os.unlink(tmp)
    raise
  return tmp


def _read_umask():
  # os.umask can only be read by setting it: done once, at import, not while TensorFlow's threads
  # may be creating files under a momentary umask of 0.
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


_UMASK = _read_umask()


# A temporary file untouched this long is a killed write's (a live one is written to, or renamed,
# within seconds): removed by the next write of its file.
STALE_SECONDS = 3600


def remove_stale_temporaries(path, now=None):
  """Removes the temporary files of `path` that a killed write left (SIGKILL runs no cleanup),
  with a line saying so; their paths."""
  directory, name = os.path.split(os.path.abspath(path))
  now, removed = time.time() if now is None else now, []
  try:
    entries = os.listdir(directory)
  except OSError:
    return removed
  for entry in entries:
    if entry == f'{name}.tmp' or (entry.startswith(f'.{name}.') and entry.endswith('.tmp')):
      tmp = os.path.join(directory, entry)
      try:
        if now - os.lstat(tmp).st_mtime > STALE_SECONDS:
          os.unlink(tmp)
          removed.append(tmp)
          print(f'Removed {tmp}, left by an interrupted write of {name}.', file=sys.stderr)
      except OSError:
        pass  # gone already, or not ours to remove: the write goes on
  return removed


def write_atomic(path, content):
  """Writes `content` (str or bytes) to the local `path` (see the module)."""
  remove_stale_temporaries(path)
  write_all_atomic({path: content})


def write_all_atomic(contents):
  """Writes every {path: content} or none: all temporary files first, then the renames, so a
  full disk or a kill while writing leaves every file as it was (only a kill between two renames,
  which take microseconds, leaves some replaced)."""
  staged = {}
  try:
    for path, content in contents.items():
      try:
        staged[path] = _temporary(path, content)
      except OSError as e:  # a write's error names no file: the file it was for
        if e.filename:
          raise
        raise OSError(e.errno, e.strerror, path) from None
    for path, tmp in staged.items():
      os.replace(tmp, path)
  finally:
    for tmp in staged.values():
      if os.path.lexists(tmp):
        os.unlink(tmp)


def sha256(path, chunk=1 << 20):
  """The hex sha256 of the file at `path`, read in chunks (a model's checkpoint may be large)."""
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    for block in iter(lambda: f.read(chunk), b''):
      digest.update(block)
  return digest.hexdigest()
