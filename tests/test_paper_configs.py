"""Every paper config builds the authors' networks and samples for evaluation with their chains.

Parameter counts are those of the release's networks (its nets.py, built with the same settings);
evaluation chains are those of its FID configs.
"""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import nets
from tf_hat_ebm import optim

from conftest import load_config as load

HAT_32, GEN_32 = 4_204_800, 4_276_739
HAT_64, GEN_64 = 19_542_720, 12_220_675
HAT_128, GEN_128 = 38_419_136, 32_150_787
HAT_128_SCALED, GEN_128_SCALED = 153_654_656, 124_340_739
DECODER_32, ENCODER_32 = 4_210_435, 4_206_849

# config -> trainable parameters of (hat network, generator or decoder)
PARAMETERS = {
    'cifar10_synth': (HAT_32, GEN_32),
    'celeba_synth': (HAT_64, GEN_64),
    'imagenet128_synth': (HAT_128, GEN_128),
    'imagenet128_synth_large': (HAT_128_SCALED, GEN_128_SCALED),
    'cifar10_refine': (HAT_32, GEN_32),
    'celeba_refine': (HAT_64, GEN_64),
    'cifar10_retrofit': (HAT_32, DECODER_32),
}


def count(build):
  """Trainable parameters of the real network, built in a graph: shapes only, no weights drawn.

  (In a tf.Graph the variables' initializers are ops that never run, so 150M-parameter networks
  build in about a second and no memory.)
  """
  with tf.Graph().as_default():
    return sum(int(np.prod(v.shape)) for v in build().trainable_variables)


@pytest.mark.parametrize('name', sorted(PARAMETERS))
def test_networks_have_the_release_parameter_counts(name):
  config = load(name)
  size, channels = config.data.image_size, config.data.channels
  assert config.model.init == 'glorot'
  hat = count(lambda: nets.make_hat(config.model, size, channels))
  if config.get('generator', {}).get('source') == 'autoencoder':
    generator = count(lambda: nets.make_decoder(config))
  else:
    generator = count(lambda: nets.make_generator(config.model, size, channels))
  assert (hat, generator) == PARAMETERS[name]


def test_autoencoder_has_the_release_parameter_counts():
  config = load('cifar10_autoencoder')
  assert config.model.init == 'glorot'
  assert count(lambda: nets.make_encoder(config)) == ENCODER_32
  assert count(lambda: nets.make_decoder(config)) == DECODER_32


def test_digits_configs_keep_mimicry_initialisation_and_parameter_counts():
  for name in ('digits_synth', 'digits_refine', 'digits_retrofit', 'digits_sngan',
               'digits_autoencoder'):
    assert load(name).model.init == 'mimicry', name
  config = load('digits_synth')
  assert count(lambda: nets.make_hat(config.model, 16, 1)) == 66_208
  assert count(lambda: nets.make_generator(config.model, 16, 1)) == 289_345


# config -> the release's FID chain (K, eps, eps_latent, T, prior sigma, Y0 scale, max drift)
SAMPLING = {
    'cifar10_synth': (125, 5e-4, None, 1e-3, None, 0.01, None),
    'celeba_synth': (100, 5e-4, None, 1e-8, None, 0.01, None),
    'imagenet128_synth': (150, 5e-4, None, 1e-8, None, 0.01, None),
    'imagenet128_synth_large': (125, 5e-4, None, 1e-8, None, 0.01, None),
    'cifar10_refine': (350, 1e-4, 5e-3, 1e-3, 0.25, 0.0, None),
    'celeba_refine': (125, 1e-4, 5e-3, 1e-6, None, 0.0, None),
    'cifar10_retrofit': (125, 5e-4, 1e-3, 1e-3, 0.1, 0.01, None),
}


@pytest.mark.parametrize('name', sorted(SAMPLING))
def test_evaluation_chains_are_the_release_fid_chains(name):
  s = load(name).sampling
  got = (s.steps, s.step_size, s.get('latent_step_size'), s.temperature, s.prior_sigma,
         s.init_scale, s.max_drift)
  assert got == SAMPLING[name]


def test_digits_refine_keeps_the_papers_rate_and_langevin_time_per_chain():
  digits, paper = load('digits_refine'), load('cifar10_refine')
  assert digits.optim.hat_lr == paper.optim.hat_lr == 1e-5
  # the paper's rate throughout its 2,000 steps, constant as the paper's (no late drop)
  assert digits.training.num_steps == 2000 and not digits.optim.hat_lr_boundaries
  assert optim.network_schedule(digits.optim, 'hat') == pytest.approx(1e-5)  # a constant
  for chain in ('langevin', 'sampling'):
    d, p = digits[chain], paper[chain]
    assert d.steps < p.steps
    for eps in ('step_size', 'latent_step_size'):  # K eps^2 / 2
      assert d.steps * d[eps] ** 2 == pytest.approx(p.steps * p[eps] ** 2), (chain, eps)
