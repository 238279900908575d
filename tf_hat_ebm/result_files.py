"""What every command's outputs share (its output directory is outputs.OwnedOutput): result
files written atomically (never a NaN), list flags as integers."""
import json

import tensorflow as tf

from tf_hat_ebm import workdir as workdir_lib


def int_list(values, flag):
  """A list flag's entries as ints (None stays None), or an error naming --flag."""
  if values is None:
    return None
  try:
    return [int(v) for v in values]
  except ValueError as e:
    raise ValueError(f'--{flag}={",".join(values)}: give comma-separated integers') from e


def check_output_file(path, overwrite):
  """A result file (fid.json, ...) is only replaced with --overwrite; checked before the work."""
  if not path or tf.io.gfile.isdir(path):
    raise ValueError(f'{path or "the output file"} is {"a directory" if path else "empty"}: give '
                     'a file path')
  if tf.io.gfile.exists(path) and not overwrite:
    raise ValueError(f'{path} exists: pass --overwrite to replace it')


def write_json(path, result):
  """Writes `result` as JSON through a temporary file: a failed write leaves the old file."""
  try:
    text = json.dumps(result, indent=2, allow_nan=False)
  except ValueError as e:  # a NaN or Inf result is an error, never a file
    raise ValueError(f'{path} not written: the result holds NaN or Inf ({result})') from e
  workdir_lib.write_atomic(path, text)
