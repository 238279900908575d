r"""Trains the deterministic autoencoder whose decoder the retrofit Hat EBM makes sampleable.

  python experiments/train_autoencoder.py                 # digits, ./workdir/digits_autoencoder
  python experiments/train_autoencoder.py --config=experiments/configs/cifar10_autoencoder.py \
      --workdir=/data/runs/cifar10_autoencoder --config.data.data_dir=/data/tfds

Train and test reconstruction errors (MSE per pixel, images in [-1, 1]) are printed and written to
TensorBoard (eval/train_mse, eval/test_mse) once per epoch. Running again resumes.
"""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the console for progress and errors

from absl import app
from absl import flags
from ml_collections import config_flags

from tf_hat_ebm import run_lib
from tf_hat_ebm.autoencoder import AutoencoderTask
import tpu_utils

_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
config_flags.DEFINE_config_file('config', os.path.join(_CONFIGS, 'digits_autoencoder.py'),
                                'Experiment config file.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>).')
flags.DEFINE_string('tpu', None, 'TPU name, or "local", for TPUStrategy.')
FLAGS = flags.FLAGS


def main(argv):
  del argv
  config = FLAGS.config
  workdir = FLAGS.workdir or os.path.join('workdir', config.name)
  run_lib.main_guard(lambda: run_lib.train(
      AutoencoderTask, config, workdir, tpu_utils.make_strategy(FLAGS.tpu)))


if __name__ == '__main__':
  app.run(main)
