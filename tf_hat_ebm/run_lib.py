"""What every experiment script does: parse flags, resolve the task, train, report errors.

User errors (bad flag or config, unknown dataset, impossible batch split, missing data,
unreadable checkpoint, full disk, divergence) end the program with one clear line on stderr and a
non-zero exit code (1; 130 for Ctrl-C). Programming errors keep their traceback.
"""
import errno
import fnmatch
import json
import math
import os

import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import data as data_lib
from tf_hat_ebm import nets
from tf_hat_ebm import registry
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.actions import DivergenceError
from tf_hat_ebm.cli import define_checkpoint_and_overwrite_flags  # noqa: F401 (the scripts')
from tf_hat_ebm.cli import fail, one_line, run  # noqa: F401 (the scripts')
from tf_hat_ebm.trainer import Trainer

USER_ERRORS = (ValueError, DivergenceError, FileNotFoundError, PermissionError,
               NotADirectoryError, IsADirectoryError, FileExistsError)
# Disk full (or, for ResourceExhaustedError, device memory exhausted): nothing the program can fix.
RESOURCE_ERRORS = (tf.errors.ResourceExhaustedError, OSError)
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT

FLOAT32_MAX = float(tf.float32.max)
CHAIN_SECTIONS = ('langevin', 'sampling', 'ddls')


def _check_number(field, value, low, strict=False, integer=False):
  """Raises a ValueError naming the config field unless low <(=) value <= float32 max."""
  ok = (isinstance(value, int) if integer else isinstance(value, (int, float)))
  ok = ok and not isinstance(value, bool) and math.isfinite(value)
  ok = ok and (value > low if strict else value >= low) and value <= FLOAT32_MAX
  if not ok:
    kind = 'an integer' if integer else 'a finite number'
    raise ValueError(f'config field {field} must be {kind} {">" if strict else ">="} {low:g}'
                     f'{"" if integer else f" and <= {FLOAT32_MAX:.3g}"}; got {value!r}')


def check_ranges(config):
  """Range checks of the numbers a run reads: chains, batch, steps, learning rates."""
  for section in CHAIN_SECTIONS:
    cfg = config.get(section)
    if cfg is None:
      continue
    # The training chain needs at least one step (K = 0 would train on the initial state);
    # sampling with K = 0 returns G(Z) + Y0 and stays allowed.
    _check_number(f'{section}.steps', cfg.get('steps'), 1 if section == 'langevin' else 0,
                  integer=True)
    for name in ('step_size', 'latent_step_size', 'temperature'):
      if name in cfg:
        _check_number(f'{section}.{name}', cfg[name], 0, strict=True)
  training = config.get('training')
  if training is not None:
    _check_number('training.batch_size', training.get('batch_size'), 1, integer=True)
    if 'num_steps' in training:
      _check_number('training.num_steps', training.num_steps, 0, integer=True)
  for name, value in (config.get('optim') or {}).items():
    if name.endswith('_lr'):
      _check_number(f'optim.{name}', value, 0)


def validate(config):
  data_lib.check_dataset(config.data.name)
  nets.check_image_size(config.data.image_size)
  if config.data.name == 'digits' and config.data.channels != 1:
    raise ValueError('digits has 1 channel; set --config.data.channels=1')
  check_ranges(config)


def train(config, workdir, strategy, num_steps=None, verbose=True, allow_config_change=False,
          resume_from=None):
  """Trains the config's kind of task in workdir: the one entry of every training script."""
  validate(config)  # before the task builds anything: one line per out-of-range field
  task = registry.for_config(config).make_task(config, strategy)
  trainer = Trainer(task, config, workdir, strategy, verbose=verbose,
                    allow_config_change=allow_config_change, resume_from=resume_from)
  return trainer, trainer.train(num_steps)


def int_list(values, flag):
  """A list flag's entries as ints (None stays None), or an error naming --flag."""
  if values is None:
    return None
  try:
    return [int(v) for v in values]
  except ValueError as e:
    raise ValueError(f'--{flag}={",".join(values)}: give comma-separated integers') from e


def check_output_dir(path, overwrite, flag):
  """Fails unless `path` can take a script's outputs (see prepare_output_dir); its entries."""
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise ValueError(f'--{flag}={path} is a file; give a directory')
  entries = tf.io.gfile.listdir(path) if tf.io.gfile.exists(path) else []
  if entries and not overwrite:
    shown = ', '.join(sorted(e.rstrip('/') for e in entries)[:3])
    raise ValueError(f'--{flag}={path} is not empty ({shown}{", ..." if len(entries) > 3 else ""})'
                     f': pass --overwrite to replace this script\'s output there, or choose '
                     'an empty or new directory')
  return entries


def prepare_output_dir(path, owned, overwrite, flag):
  """Makes `path` ready for a script's outputs without ever losing files silently.

  A missing or empty directory is used as is. A non-empty one is an error unless `overwrite`;
  then the entries matching the `owned` glob patterns (this script's earlier output) are removed,
  so no stale file of an earlier run is left beside the new ones, and other entries are kept.
  """
  for entry in check_output_dir(path, overwrite, flag):
    name = entry.rstrip('/')
    if any(fnmatch.fnmatch(name, pattern) for pattern in owned):
      target = os.path.join(path, name)
      if tf.io.gfile.isdir(target):
        tf.io.gfile.rmtree(target)
      else:
        tf.io.gfile.remove(target)
  tf.io.gfile.makedirs(path)


def check_output_file(path, overwrite):
  """A result file (fid.json, ...) is only replaced with --overwrite; checked before the work."""
  if tf.io.gfile.exists(path) and not overwrite:
    raise ValueError(f'{path} exists: pass --overwrite to replace it')


def write_json(path, result):
  """Writes `result` as JSON through a temporary file: a failed write leaves the old file."""
  try:
    text = json.dumps(result, indent=2, allow_nan=False)
  except ValueError as e:  # a NaN or Inf result is an error, never a file
    raise ValueError(f'{path} not written: the result holds NaN or Inf ({result})') from e
  workdir_lib.write_atomic(path, text)


def interrupted_training(workdir):
  """The Ctrl-C line of a training run: where a rerun resumes from."""
  steps = checkpoints.list_checkpoints(os.path.join(workdir, 'checkpoints'))
  saved = f'last checkpoint: step {steps[-1]}' if steps else 'no checkpoint saved yet'
  return f'interrupted ({saved} in {workdir}); resume with the same command'


def _is_resource_error(error):
  if isinstance(error, tf.errors.ResourceExhaustedError):
    return True
  return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def main_guard(fn, interrupted=None):
  """Runs fn(); a user error prints 'error: ...' on one line and exits with status 1.

  Ctrl-C exits with 130 and the line `interrupted()` returns (e.g. where to resume from).
  """
  try:
    return fn()
  except USER_ERRORS as e:
    fail(one_line(e))
  except KeyboardInterrupt:
    fail(interrupted() if interrupted else 'interrupted', EXIT_INTERRUPTED)
  except RESOURCE_ERRORS as e:
    if not _is_resource_error(e):
      raise
    fail(f'out of space or memory: {one_line(e)}; free some and rerun the same command')
