"""The one-line error of every command (TensorFlow-free: flag errors come before TensorFlow loads).

A user error (bad flag or config, missing data, unreadable checkpoint, ...) ends the program with
`error: <one line>` on stderr and a non-zero exit code; run_lib.main_guard decides which errors
are the user's.
"""
import logging
import sys


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
  sys.exit(code)
