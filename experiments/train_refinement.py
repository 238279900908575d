r"""Trains a joint Hat EBM on top of a frozen generator (refinement of a pretrained SN-GAN).

  python experiments/train_sngan.py                  # first: the digits SN-GAN, workdir/digits_sngan
  python experiments/train_refinement.py             # then: workdir/digits_refine
  python experiments/train_refinement.py --config=experiments/configs/cifar10_refine.py \
      --config.generator.path=/data/runs/cifar10_sngan --config.data.data_dir=/data/tfds

The generator comes from --config.generator.source/path ('sngan', 'autoencoder', 'savedmodel',
'factory'); a generator whose shapes do not match the config is an error before training starts.
Running the same command again resumes from the workdir's latest checkpoint.
"""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the console for progress and errors

from absl import app
from absl import flags
from ml_collections import config_flags

from tf_hat_ebm import run_lib
from tf_hat_ebm.refinement import JointTask
import tpu_utils

_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
config_flags.DEFINE_config_file('config', os.path.join(_CONFIGS, 'digits_refine.py'),
                                'Experiment config file.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>).')
flags.DEFINE_string('tpu', None, 'TPU name, or "local", for TPUStrategy.')
FLAGS = flags.FLAGS


def main(argv):
  del argv
  config = FLAGS.config
  workdir = FLAGS.workdir or os.path.join('workdir', config.name)
  run_lib.main_guard(lambda: run_lib.train(
      JointTask, config, workdir, tpu_utils.make_strategy(FLAGS.tpu)))


if __name__ == '__main__':
  app.run(main)
