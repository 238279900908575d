"""What every experiment script does: resolve the strategy, build the task, train, report errors.

User errors (bad config, unknown dataset, impossible batch split, missing data, unreadable
checkpoint, divergence) end the program with one clear line and exit code 1.
"""
import importlib
import sys

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import nets
from tf_hat_ebm.trainer import DivergenceError
from tf_hat_ebm.trainer import Trainer

USER_ERRORS = (ValueError, DivergenceError, FileNotFoundError, PermissionError)


# experiment -> (module, task class). Only the module of the run's experiment is imported: the
# SN-GAN one pulls in TF-GAN and TF Probability, seconds of start-up a synthesis run does not need.
TASKS = {'synthesis': ('tf_hat_ebm.synthesis', 'SynthesisTask'),
         'joint': ('tf_hat_ebm.refinement', 'JointTask'),
         'sngan': ('tf_hat_ebm.sngan', 'SNGANTask'),
         'autoencoder': ('tf_hat_ebm.autoencoder', 'AutoencoderTask')}


def task_class(config):
  """The task class of config.experiment (each experiment kind registers one)."""
  if config.experiment not in TASKS:
    raise ValueError(f'unknown experiment {config.experiment!r}; known: {", ".join(TASKS)}')
  module, name = TASKS[config.experiment]
  return getattr(importlib.import_module(module), name)


def validate(config):
  data_lib.check_dataset(config.data.name)
  nets.check_image_size(config.data.image_size)
  if config.data.name == 'digits' and config.data.channels != 1:
    raise ValueError('digits has 1 channel; set --config.data.channels=1')


def train(task_cls, config, workdir, strategy, num_steps=None, verbose=True,
          allow_config_change=False):
  validate(config)
  task = task_cls(config, strategy)
  trainer = Trainer(task, config, workdir, strategy, verbose=verbose,
                    allow_config_change=allow_config_change)
  return trainer, trainer.train(num_steps)


def one_line(error):
  """The informative line of an error (TF's traced errors start with 'in user code:')."""
  lines = [l.strip() for l in str(error).strip().splitlines() if l.strip()]
  if not lines:
    return type(error).__name__
  if lines[0].startswith('in user code') and len(lines) > 1:
    return lines[-1]
  return lines[0]


def main_guard(fn):
  """Runs fn(); a user error prints 'error: ...' on one line and exits with status 1."""
  try:
    return fn()
  except USER_ERRORS as e:
    message = one_line(e)
    print(f'error: {message}', file=sys.stderr, flush=True)
    sys.exit(1)
