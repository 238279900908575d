"""Every experiment config loads, validates and carries the paper's settings."""
import os

import pytest

from tf_hat_ebm import run_lib

from conftest import CONFIGS
from conftest import load_config as load


@pytest.mark.parametrize('name', sorted(f[:-3] for f in os.listdir(CONFIGS)
                                        if f.endswith('.py') and not f.startswith('_')))
def test_config_loads_and_validates(name):
  config = load(name)
  run_lib.validate(config)
  assert config.name == name


def test_paper_settings():
  cifar = load('cifar10_synth')
  assert (cifar.training.num_steps, cifar.training.batch_size, cifar.langevin.steps) == (
      75_000, 128, 50)
  assert (cifar.langevin.step_size, cifar.langevin.temperature) == (5e-4, 1e-3)
  assert cifar.training.bank_size == 10_000 and cifar.training.gen_loss_factor == 1000.0
  assert cifar.training.data_eps == 1e-3 and cifar.langevin.max_drift == 2.5
  celeba = load('celeba_synth')
  assert (celeba.data.image_size, celeba.langevin.temperature) == (64, 1e-8)
  imagenet = load('imagenet128_synth')
  assert imagenet.optim.hat_clip_norm == 50.0 and imagenet.optim.gen_lr == 5e-5
  assert tuple(imagenet.optim.hat_lr_boundaries) == (230_000, 260_000)  # the release's
  assert imagenet.training.num_steps == 300_000
  large = load('imagenet128_synth_large')
  assert large.model.hat_width == large.model.gen_width == 2048
  # the sampling chain for FID follows the release: K=125, T=1e-3, Y0 ~ 0.01 N(0, I)
  assert (cifar.sampling.steps, cifar.sampling.temperature, cifar.sampling.init_scale) == (
      125, 1e-3, 0.01)
