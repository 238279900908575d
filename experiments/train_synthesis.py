r"""Trains a synthesis Hat EBM: hat network and generator in tandem (paper Alg. 1).

  python experiments/train_synthesis.py                       # embedded digits, ./workdir/digits_synth
  python experiments/train_synthesis.py --config=experiments/configs/cifar10_synth.py \
      --workdir=gs://bucket/cifar10 --tpu=my-tpu --config.data.data_dir=gs://bucket/tfds

Running the same command again resumes from the workdir's latest checkpoint.
"""
import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')  # keep the console for progress and errors

from absl import app
from absl import flags
from ml_collections import config_flags

from tf_hat_ebm import run_lib
from tf_hat_ebm.synthesis import SynthesisTask
import tpu_utils

_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
config_flags.DEFINE_config_file('config', os.path.join(_CONFIGS, 'digits_synth.py'),
                                'Experiment config file.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>).')
flags.DEFINE_string('tpu', None, 'TPU name, or "local", for TPUStrategy.')
flags.DEFINE_bool('allow_config_change', False,
                  'Resume a workdir whose networks, data or batch differ from --config.')
FLAGS = flags.FLAGS


def main(argv):
  del argv
  config = FLAGS.config
  workdir = FLAGS.workdir or os.path.join('workdir', config.name)
  run_lib.main_guard(lambda: run_lib.train(
      SynthesisTask, config, workdir, tpu_utils.make_strategy(FLAGS.tpu),
      allow_config_change=FLAGS.allow_config_change))


if __name__ == '__main__':
  app.run(main)
