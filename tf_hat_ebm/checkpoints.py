"""Loading a trained run back from its workdir: config.json, the task, the latest checkpoint.

Evaluation, export and sampling all start here, whatever the experiment: `TASK_BUILDERS` maps
`config.experiment` to a function that builds the task for inference, so refinement and retrofit
tasks only need to register themselves.
"""
import dataclasses
import json
import os
from typing import Any, Optional

from absl import logging
import ml_collections
import tensorflow as tf

from tf_hat_ebm import workdir as workdir_lib


def _build_synthesis(config, strategy):
  from tf_hat_ebm.synthesis import SynthesisTask  # pylint: disable=g-import-not-at-top
  config = ml_collections.ConfigDict(config.to_dict())
  # The bank is training state only (gigabytes at ImageNet size): build the task without it.
  config.training.generator_update = 'current'
  return SynthesisTask(config, strategy)


def _build_joint(config, strategy):
  # The frozen generator is reloaded from config.generator; the checkpoint holds the hat network.
  from tf_hat_ebm.refinement import JointTask  # pylint: disable=g-import-not-at-top
  return JointTask(config, strategy)


# experiment name (config.experiment) -> builder(config, strategy) -> task with `hat`,
# `generator`, `sampling_settings` and `checkpoint_items()`.
TASK_BUILDERS = {'synthesis': _build_synthesis, 'joint': _build_joint}


def register_task(experiment, builder):
  TASK_BUILDERS[experiment] = builder


@dataclasses.dataclass
class Run:
  """A restored run: its config, task (models in inference use), step and checkpoint path."""
  config: ml_collections.ConfigDict
  task: Any
  step: int
  checkpoint: str
  workdir: str


def load_config(workdir):
  """workdir/config.json as a ConfigDict (the trainer writes it on the first run)."""
  path = os.path.join(workdir, 'config.json')
  if not tf.io.gfile.exists(path):
    raise ValueError(f'no config.json in workdir {workdir}: is it the --workdir of a training run?')
  with tf.io.gfile.GFile(path) as f:
    text = f.read()
  try:
    config = json.loads(text)
  except ValueError as e:
    raise ValueError(f'{path} is not valid JSON ({e}): restore it from a copy, or rewrite it from '
                     'the training config (ConfigDict.to_json_best_effort)') from e
  if not isinstance(config, dict):
    raise ValueError(f'{path} holds a JSON {type(config).__name__}, not a config object')
  defaults = default_config(config.get('experiment', 'synthesis'))
  if defaults is not None:
    defaults = defaults.to_dict()
    for section, fields in IMPLICIT_BEFORE.items():
      defaults[section].update(fields)
    filled = fill_missing(config, defaults)
    if filled:
      logging.warning('%s was written by an older version: defaults filled in for %s', path,
                      ', '.join(filled))
  return ml_collections.ConfigDict(config)


# Fields whose default changed when they were added: a config.json written before they existed
# gets the value the run was trained with (Mimicry's initialisation), not today's default.
IMPLICIT_BEFORE = {'model': {'init': 'mimicry'}}


def default_config(experiment):
  """The default config of an experiment kind (the schema of its config.json), or None."""
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import autoencoder
  from tf_hat_ebm import config as config_lib
  from tf_hat_ebm import refinement
  from tf_hat_ebm import sngan
  makers = {'synthesis': config_lib.base_config, 'joint': refinement.joint_config,
            'sngan': sngan.sngan_config, 'autoencoder': autoencoder.autoencoder_config}
  return makers[experiment]() if experiment in makers else None


def fill_missing(config, defaults, prefix=''):
  """Adds the fields of `defaults` that the dict `config` lacks, in place; their dotted names.

  Values present in `config` stay as they are, and so do fields `defaults` does not know.
  """
  filled = []
  for name, value in defaults.items():
    if name not in config:
      config[name] = value
      filled.append(prefix + name)
    elif isinstance(value, dict) and isinstance(config[name], dict):
      filled += fill_missing(config[name], value, f'{prefix}{name}.')
  return filled


def list_checkpoints(ckpt_dir):
  """Steps N of the ckpt-N checkpoints in ckpt_dir that can be restored (an .index), ascending.

  Independent of the `checkpoint` state file, so a lost or garbled state file still shows what
  can be restored.
  """
  return sorted(s for s in workdir_lib.checkpoint_steps(ckpt_dir)
                if tf.io.gfile.exists(os.path.join(ckpt_dir, f'ckpt-{s}.index')))


def _state_file_checkpoint(ckpt_dir):
  """The latest checkpoint the state file names, or None (no, unreadable or stale state file)."""
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.ERROR)  # TF logs a garbled state file as a warning: we raise
  try:
    latest = tf.train.latest_checkpoint(ckpt_dir)
  finally:
    logging.set_verbosity(verbosity)
  return latest if latest and tf.io.gfile.exists(latest + '.index') else None


def resolve_checkpoint(workdir, checkpoint=None):
  """The checkpoint path to load: `checkpoint` (a step N or a path), else the latest.

  With ckpt-N files present but no usable state file this is an error naming them: the run is
  still there, and "train first" would have the user start it over.
  """
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  steps = list_checkpoints(ckpt_dir)
  present = ', '.join(f'ckpt-{s}' for s in steps) or 'none'
  if checkpoint is not None:
    checkpoint = str(checkpoint)
    path = workdir_lib.resolve_checkpoint(ckpt_dir, checkpoint)
    if not tf.io.gfile.exists(path + '.index'):
      raise ValueError(f'--checkpoint={checkpoint}: no checkpoint {path} (.index missing); '
                       f'checkpoints in {ckpt_dir}: {present}')
    return path
  latest = _state_file_checkpoint(ckpt_dir)
  if latest:
    return latest
  if steps:
    raise ValueError(f'the state file {os.path.join(ckpt_dir, "checkpoint")} is missing or '
                     f'unreadable, but {present} exist: pass --checkpoint={steps[-1]} '
                     '(or another step) to load one')
  raise ValueError(f'no checkpoint in {ckpt_dir}: train first (the trainer saves every '
                   'training.checkpoint_every steps and at the end)')


def load_run(workdir, strategy: Optional[tf.distribute.Strategy] = None, checkpoint=None):
  """Builds the task of workdir's config and restores a checkpoint into it.

  `checkpoint`: a step N (ckpt-N of workdir/checkpoints) or a checkpoint path; default: the
  latest.
  """
  config = load_config(workdir)
  experiment = config.get('experiment', 'synthesis')
  if experiment not in TASK_BUILDERS:
    raise ValueError(f'workdir {workdir} holds a {experiment!r} run; loadable experiments: '
                     f'{", ".join(sorted(TASK_BUILDERS))}')
  checkpoint_path = resolve_checkpoint(workdir, checkpoint)
  strategy = strategy or tf.distribute.get_strategy()
  task = TASK_BUILDERS[experiment](config, strategy)
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  restorable = tf.train.Checkpoint(step=step, **task.checkpoint_items())
  try:
    # Partial: the bank (and any replica beyond the first) is not part of an inference task.
    restorable.restore(checkpoint_path).expect_partial().assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError, IndexError) as e:
    # IndexError: TF's reader of a truncated .data file.
    others = [s for s in list_checkpoints(os.path.join(workdir, 'checkpoints'))
              if not checkpoint_path.endswith(f'ckpt-{s}')]
    hint = f'; try --checkpoint={others[-1]}' if others else ''
    raise ValueError(f'cannot restore {checkpoint_path} into a {experiment} task built from '
                     f'its config.json (truncated or foreign checkpoint?): '
                     f'{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}'
                     f'{hint}') from e
  return Run(config=config, task=task, step=int(step.numpy()), checkpoint=checkpoint_path,
             workdir=workdir)
