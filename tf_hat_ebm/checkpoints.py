"""Loading a trained run back from its workdir: config.json, the task, the latest checkpoint.

Evaluation, export and sampling all start here, whatever the experiment: `TASK_BUILDERS` maps
`config.experiment` to a function that builds the task for inference, so refinement and retrofit
tasks only need to register themselves.
"""
import dataclasses
import json
import os
from typing import Any, Optional

import ml_collections
import tensorflow as tf


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
    return ml_collections.ConfigDict(json.load(f))


def latest_checkpoint(workdir):
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  latest = tf.train.latest_checkpoint(ckpt_dir)
  if not latest:
    raise ValueError(f'no checkpoint in {ckpt_dir}: train first (the trainer saves every '
                     'training.checkpoint_every steps and at the end)')
  return latest


def load_run(workdir, strategy: Optional[tf.distribute.Strategy] = None):
  """Builds the task of workdir's config and restores its latest checkpoint into it."""
  config = load_config(workdir)
  experiment = config.get('experiment', 'synthesis')
  if experiment not in TASK_BUILDERS:
    raise ValueError(f'workdir {workdir} holds a {experiment!r} run; loadable experiments: '
                     f'{", ".join(sorted(TASK_BUILDERS))}')
  checkpoint_path = latest_checkpoint(workdir)
  strategy = strategy or tf.distribute.get_strategy()
  task = TASK_BUILDERS[experiment](config, strategy)
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  checkpoint = tf.train.Checkpoint(step=step, **task.checkpoint_items())
  try:
    # Partial: the bank (and any replica beyond the first) is not part of an inference task.
    checkpoint.restore(checkpoint_path).expect_partial().assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError) as e:
    raise ValueError(f'cannot restore {checkpoint_path} into a {experiment} task built from '
                     f'its config.json: {str(e).strip().splitlines()[0]}') from e
  return Run(config=config, task=task, step=int(step.numpy()), checkpoint=checkpoint_path,
             workdir=workdir)
