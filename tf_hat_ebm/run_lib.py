"""What every experiment script does: parse flags, resolve the task, train, report errors.

User errors (bad flag or config, unknown dataset, impossible batch split, missing data,
unreadable checkpoint, full disk, divergence) end the program with one clear line on stderr and a
non-zero exit code (1; 130 for Ctrl-C). Programming errors keep their traceback.
"""
import errno
import json
import os

from absl import flags
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import generators
from tf_hat_ebm import registry
from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.actions import DivergenceError
from tf_hat_ebm.cli import define_checkpoint_and_overwrite_flags  # noqa: F401 (the scripts')
from tf_hat_ebm.cli import fail, one_line, run  # noqa: F401 (the scripts')
from tf_hat_ebm.outputs import OwnedOutput, check_output_dir  # noqa: F401 (the scripts')
from tf_hat_ebm.trainer import Trainer

USER_ERRORS = (ValueError, DivergenceError, FileNotFoundError, PermissionError,
               NotADirectoryError, IsADirectoryError, FileExistsError)
# Disk full (or, for ResourceExhaustedError, device memory exhausted): nothing the program can fix.
RESOURCE_ERRORS = (tf.errors.ResourceExhaustedError, OSError)
EXIT_INTERRUPTED = 130  # the shell's code for a process ended by SIGINT


def validate(config):
  """The checks of every config field (validation.py), before anything is built."""
  return validation.validate(config, registry.for_config(config).defaults())


def train(config, workdir, strategy, num_steps=None, verbose=True, allow_config_change=False,
          resume_from=None):
  """Trains the config's kind of task in workdir: the one entry of every training script."""
  validate(config)  # before the task builds anything: one line per out-of-range field
  generators.adopt_pin(config, workdir, allow_config_change)
  task = registry.for_config(config).make_task(config, strategy)
  trainer = Trainer(task, config, workdir, strategy, verbose=verbose,
                    allow_config_change=allow_config_change, resume_from=resume_from)
  return trainer, trainer.train(num_steps)


def load_run_flags():
  """load_run's keyword arguments from the flags cli.define_checkpoint_and_overwrite_flags
  defines."""
  f = flags.FLAGS
  return dict(checkpoint=f.checkpoint, trust_code=f.trust_workdir_code,
              allow_other_generator=f.allow_other_generator, generator_path=f.generator_path,
              generator_checkpoint=f.generator_checkpoint)


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


def interrupted_training(workdir):
  """The Ctrl-C line of a training run: where a rerun resumes from."""
  steps = checkpoints.list_checkpoints(os.path.join(workdir, 'checkpoints'))
  if not steps:  # nothing to resume: say what a rerun does
    return (f'interrupted before the first checkpoint (nothing saved in {workdir}); the same '
            'command starts the run over')
  return (f'interrupted (last checkpoint: step {steps[-1]} in {workdir}); resume with the same '
          'command')


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
