"""Every paper config trains one step of its stage on tfds mock data (no download, no TPU).

The configs' data sections (dataset, crop, image size, flips, cache) are kept as they are; the
networks are shrunk to conftest's widths (16 at 64x64 and 128x128), the chains to 2 steps and the
batch to 4 (the paper widths take minutes per step on a CPU), and the step runs eagerly (tf.data
still builds its graph): a broken input pipeline or config shows here, not after hours of TPU
provisioning.
"""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tf_hat_ebm import generators
from tf_hat_ebm import registry
from tf_hat_ebm.reproduction import stages as stages_lib
from tf_hat_ebm.trainer import Trainer

from conftest import CONFIGS
from conftest import tiny

PAPER_CONFIGS = sorted(
    os.path.basename(p)[:-3] for prefix in ('cifar10_', 'celeba_', 'imagenet128_')
    for p in glob.glob(os.path.join(CONFIGS, prefix + '*.py')))

# One step, its checkpoint, no sample grid or evaluation in between.
ONE_STEP = {'training.num_steps': 1, 'training.steps_per_loop': 1, 'training.log_every': 1,
            'training.checkpoint_every': 1, 'training.sample_every': 1,
            'training.eval_every': 0}


def test_every_paper_config_is_one_the_paper_scale_reproduction_trains():
  # Each one trains here, and none lies unused beside the plan (or the plan runs one untested).
  stages = stages_lib.build(stages_lib.Options(out='unused', scale='paper', seeds=(0,)))
  planned = {os.path.basename(s.config).split(':')[0][:-3] for s in stages if s.kind.trains}
  assert PAPER_CONFIGS and set(PAPER_CONFIGS) == planned


@pytest.mark.parametrize('name', PAPER_CONFIGS)
def test_paper_config_trains_one_step_on_mock_data(name, tmp_path):
  config = tiny(name)
  for path, value in ONE_STEP.items():
    section, field = path.split('.')
    if field in config[section]:
      config[section][field] = value
  data = config.data
  if data.image_size > 32:  # 64/128 layouts divide the width by 16
    for field in ('hat_width', 'gen_width', 'disc_width', 'enc_width'):
      if field in config.model:
        config.model[field] = 16
  strategy = tf.distribute.get_strategy()
  task_class = registry.for_config(config).task_class()
  # Eagerly, as every test not marked `graph` (conftest): tracing and optimising the graphs of
  # one step would take most of the time.
  with tfds.testing.mock_data(num_examples=8):
    if config.experiment == 'joint':  # an untrained generator of the paper's shapes
      task = task_class(config, strategy, generator=generators.untrained(config))
    else:
      task = task_class(config, strategy)
    metrics = Trainer(task, config, str(tmp_path), strategy, verbose=False).train(1)
  assert metrics and all(np.isfinite(v) for v in metrics.values()), metrics
  assert os.path.exists(tmp_path / 'checkpoints' / 'ckpt-1.index')
  assert (data.image_size, data.channels) == {
      'cifar10': (32, 3), 'celeb_a': (64, 3), 'imagenet2012': (128, 3)}[data.name]
