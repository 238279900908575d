"""Test setup: two logical CPU devices (for MirroredStrategy tests) and tiny configs."""
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tpu_utils import use_logical_cpus  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(REPO, 'experiments', 'configs')

# Must happen before TensorFlow touches a device: one process, two logical CPUs for all tests.
TWO_CPUS = use_logical_cpus(2)


def tiny_config(**overrides):
  """digits_synth shrunk to seconds: widths 8, batch 4, K=2, bank of 16."""
  sys.path.insert(0, CONFIGS)
  import digits_synth  # pylint: disable=g-import-not-at-top
  config = digits_synth.get_config()
  config.model.hat_width = 8
  config.model.gen_width = 8
  config.model.z_dim = 4
  config.langevin.steps = 2
  config.sampling.steps = 2
  config.training.batch_size = 4
  config.training.bank_size = 16
  config.training.num_steps = 4
  config.training.steps_per_loop = 2
  config.training.log_every = 2
  config.training.checkpoint_every = 2
  config.training.sample_every = 4
  config.training.num_grid_samples = 4
  # Not 'auto': the tests compute the same numbers whether or not this CPU has native bf16.
  config.perf.precision = 'float32'
  for key, value in overrides.items():
    section, name = key.split('.')
    config[section][name] = value
  return config


@pytest.fixture
def config():
  return tiny_config()


@pytest.fixture
def two_replicas():
  return tf.distribute.MirroredStrategy(TWO_CPUS)


@pytest.fixture(scope='session')
def trained_workdir(tmp_path_factory):
  """A workdir of tiny_config trained for 2 steps (checkpoint, config.json), for the eval tests."""
  from tf_hat_ebm.tasks.synthesis import SynthesisTask  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  workdir = str(tmp_path_factory.mktemp('trained'))
  config = tiny_config()
  strategy = tf.distribute.get_strategy()
  Trainer(SynthesisTask(config, strategy), config, workdir, strategy, verbose=False).train(2)
  return workdir
