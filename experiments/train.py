r"""Trains any experiment: the kind of run comes from the config's `experiment` (registry.py).

  python experiments/train.py --config=experiments/configs/digits_synth.py
  python experiments/train.py --config=experiments/configs/cifar10_refine.py \
      --config.generator.path=/data/runs/cifar10_sngan --workdir=gs://bucket/refine --tpu=my-tpu

train_synthesis.py, train_refinement.py, train_retrofit.py, train_sngan.py and
train_autoencoder.py are this script with another default --config. Flags:

  --config   ml_collections config file (locked: a misspelt override is an error)
  --workdir  run directory (default: workdir/<config name>); rerunning resumes from it
  --tpu      TPU name or "local" for TPUStrategy (else TF_CONFIG / GPUs / default)
  --allow_config_change  resume a workdir made by a config with other networks, data or batch
  --checkpoint  resume from this checkpoint (step or path), or latest_intact: the newest that
                restores; by default the latest, and a damaged one stops the run
Running the same command again resumes from the workdir's latest checkpoint.
"""
import os

from absl import flags
from ml_collections import config_flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
FLAGS = flags.FLAGS


def define_flags(default_config):
  """Defines the training flags; `default_config` is a file name in experiments/configs/."""
  config_flags.DEFINE_config_file('config', os.path.join(CONFIGS, default_config),
                                  'Experiment config file.', lock_config=True)
  flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>).')
  flags.DEFINE_string('tpu', None, 'TPU name, or "local", for TPUStrategy.')
  flags.DEFINE_bool('allow_config_change', False,
                    'Resume a workdir whose networks, data or batch differ from --config.')
  flags.DEFINE_string('checkpoint', None,
                      'Resume from this checkpoint: a step N (checkpoints/ckpt-N), a path, or '
                      '"latest_intact" for the newest checkpoint that restores.')
  cli.key_flags('config', 'workdir', 'tpu', 'allow_config_change', 'checkpoint')


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import run_lib
  import tpu_utils
  config = FLAGS.config
  if FLAGS.workdir is not None and not FLAGS.workdir.strip():
    run_lib.fail('--workdir is empty: give a directory (or leave the flag out for '
                 f'workdir/{config.name})')
  workdir = FLAGS.workdir or os.path.join('workdir', config.name)
  run_lib.main_guard(lambda: run_lib.train(
      config, workdir, tpu_utils.make_strategy(FLAGS.tpu),
      allow_config_change=FLAGS.allow_config_change, resume_from=FLAGS.checkpoint),
      interrupted=lambda: run_lib.interrupted_training(workdir))


def run(default_config):
  """The script's main, with --config defaulting to experiments/configs/<default_config>."""
  cli.run(main, lambda: define_flags(default_config))


if __name__ == '__main__':
  run('digits_synth.py')
