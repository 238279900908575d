"""What every command's outputs share (its output directory is outputs.OwnedOutput): result
files written atomically (never a NaN), list flags as integers."""
import json

from tf_hat_ebm import outputs
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
  """A result file (fid.json, ...) is only replaced with --overwrite, and only by a file of its
  own kind (outputs.check_result_file); checked before the work."""
  outputs.check_result_file(path, overwrite)


def write_json(path, result):
  """Writes `result` as JSON through a temporary file: a failed write leaves the old file."""
  try:
    text = json.dumps(result, indent=2, allow_nan=False)
  except ValueError as e:  # a NaN or Inf result is an error, never a file
    raise ValueError(f'{path} not written: the result holds NaN or Inf ({result})') from e
  workdir_lib.write_atomic(path, text)
