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


def test_tiny_shrinks_each_kind_and_takes_both_override_forms(tiny):
  synth = tiny(training__batch_size=8, **{'model.hat_width': 16})
  assert (synth.training.batch_size, synth.model.hat_width, synth.model.gen_width) == (8, 16, 8)
  assert (synth.training.bank_size, synth.langevin.steps, synth.perf.precision) == (
      16, 2, 'float32')
  assert 'disc_width' not in synth.model and 'ddls' not in synth  # only fields it has are set
  gan = tiny('digits_sngan')
  assert (gan.model.disc_width, gan.training.n_dis, gan.training.num_steps) == (8, 2, 2)
  joint = tiny('digits_refine')
  assert (joint.optim.hat_lr, joint.ddls.steps, joint.training.bank_size) == (1e-3, 2, 0)
  autoencoder = tiny('digits_autoencoder')
  assert (autoencoder.model.enc_width, autoencoder.training.eval_every) == (8, 2)
  run_lib.validate(synth)
