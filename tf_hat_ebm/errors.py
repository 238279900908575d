"""The one-line error of every command (TensorFlow-free: flag errors come before TensorFlow loads).

User errors (bad flag or config, unknown dataset, impossible batch split, missing data,
unreadable checkpoint, full disk, divergence) end the program with one clear line on stderr and a
non-zero exit code (1; 130 for Ctrl-C): `main_guard` decides which errors are the user's.
Programming errors keep their traceback.
"""
import errno
import logging
import os
import sys

from tf_hat_ebm import files
from tf_hat_ebm import interrupts

EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT


class DivergenceError(RuntimeError):
  """A non-finite loss, energy or state: the run stops and nothing of that state is saved."""


USER_ERRORS = (ValueError, DivergenceError, FileNotFoundError, PermissionError,
               NotADirectoryError, IsADirectoryError, FileExistsError)


def one_line(error):
  """The informative line of an error (TF's traced errors start with 'in user code:')."""
  lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
  if not lines:
    return type(error).__name__
  if lines[0].startswith('in user code') and len(lines) > 1:
    return lines[-1]
  return lines[0]


def fail(message, code=1):
  # TensorFlow warns about the unrestored values of a failed restore when objects are deleted
  # (at exit): hundreds of lines after the one that matters.
  logging.getLogger('tensorflow').setLevel(logging.ERROR)
  print(f'error: {message}', file=sys.stderr, flush=True)
  if interrupts.abandoned():  # a chain still runs in its thread: end now, not when it returns
    sys.stdout.flush()
    os._exit(code)
  sys.exit(code)


# TensorFlow's file systems name the system's error only in their message.
_TF_DISK_ERRORS = (('No space left', errno.ENOSPC), ('quota exceeded', errno.EDQUOT),
                   ('Disk quota', errno.EDQUOT), ('File too large', errno.EFBIG),
                   ('Read-only file system', errno.EROFS))


def disk_line(error):
  """The one line of a write that a full, size-limited or read-only filesystem refused (the
  path and what to do), or None for any other error."""
  number = getattr(error, 'errno', None) if isinstance(error, OSError) else None
  if number is None and not isinstance(error, OSError) and hasattr(error, 'message'):
    number = next((n for text, n in _TF_DISK_ERRORS if text in str(error)), None)
  if number not in files.FULL + files.READ_ONLY:
    return None
  if isinstance(error, OSError) and error.filename:
    return files.cannot_write(error.filename, error)
  return f'{one_line(error)}; {files.what_to_do(OSError(number, ""))}'


def _resource_advice(error, memory_flags):
  """What to do after a full disk (free some, rerun) or exhausted memory (rerunning the same
  command cannot help: name the flags that shrink it), or None for any other error."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top (only once TensorFlow ran)
  # TensorFlow's file systems report a full disk as ResourceExhaustedError too.
  disk = (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)) or (
      isinstance(error, tf.errors.ResourceExhaustedError)
      and any(s in str(error) for s in ('No space left', 'quota exceeded', 'Disk quota')))
  if disk:
    return 'out of disk space: free some and rerun the same command'
  if not isinstance(error, (MemoryError, tf.errors.ResourceExhaustedError)):
    return None
  lower = f'lower {" or ".join(memory_flags)}' if memory_flags else 'use a smaller batch'
  return f'out of memory: {lower} (rerunning the same command needs the same memory)'


def main_guard(fn, interrupted=None, memory_flags=()):
  """Runs fn(); a user error prints 'error: ...' on one line and exits with status 1.

  Ctrl-C exits with 130 and the line `interrupted()` returns, or the KeyboardInterrupt's own
  message (e.g. where to resume from). `memory_flags`: the command's flags that lower its memory,
  named when memory runs out.
  """
  try:
    return fn()
  except USER_ERRORS as e:
    fail(one_line(e))
  except KeyboardInterrupt as e:
    fail(interrupted() if interrupted else str(e) or 'interrupted', EXIT_INTERRUPTED)
  except Exception as e:  # pylint: disable=broad-except
    if disk_line(e):
      fail(disk_line(e))
    advice = _resource_advice(e, memory_flags)
    if advice is None:
      raise
    fail(f'{one_line(e)}: {advice}')
