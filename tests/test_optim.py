"""Learning-rate schedules per network: piecewise (ImageNet, release and paper) and linear decay."""
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import optim
from tf_hat_ebm.tasks import sngan

from conftest import load_config as load
from conftest import tiny


def rates_at(optim_cfg, learning_rate, steps, lr_scale=None):
  """The rate of an optimizer step taken when its step counter is at each of `steps`."""
  v = tf.Variable(0.0)
  opt = optim.make_adam(optim_cfg, learning_rate, [v], lr_scale)
  out = []
  for step in steps:
    opt.iterations.assign(step)
    opt.apply_gradients([(tf.constant(1.0), v)])
    out.append(float(opt.learning_rate.numpy()))  # Keras: the rate of the last applied step
  return out


# Keras' PiecewiseConstantDecay: the rate changes after the boundary step (230,000 still 1e-4).
BOUNDARY_STEPS = (0, 230_000, 230_001, 250_000, 250_001, 260_000, 260_001, 300_000)


@pytest.mark.parametrize('name', ['imagenet128_synth', 'imagenet128_synth_large'])
def test_imagenet_configs_follow_the_releases_schedule(name):
  ocfg = load(name).optim
  hat = rates_at(ocfg, optim.network_schedule(ocfg, 'hat'), BOUNDARY_STEPS)
  gen = rates_at(ocfg, optim.network_schedule(ocfg, 'gen'), BOUNDARY_STEPS)
  np.testing.assert_allclose(hat, [1e-4, 1e-4, 1e-5, 1e-5, 1e-5, 1e-5, 1e-6, 1e-6], rtol=1e-6)
  np.testing.assert_allclose(gen, [5e-5, 5e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-6, 1e-6], rtol=1e-6)
  assert ocfg.hat_clip_norm == 50.0 and ocfg.hat_clip_mode == 'per_variable_per_replica'


def test_imagenet_config_paper_schedule_is_one_argument_away():
  ocfg = load('imagenet128_synth', 'paper').optim
  hat = rates_at(ocfg, optim.network_schedule(ocfg, 'hat'), BOUNDARY_STEPS)
  gen = rates_at(ocfg, optim.network_schedule(ocfg, 'gen'), BOUNDARY_STEPS)
  np.testing.assert_allclose(hat, [1e-4] * 4 + [1e-5] * 4, rtol=1e-6)
  np.testing.assert_allclose(gen, [5e-5] * 4 + [5e-6] * 4, rtol=1e-6)
  with pytest.raises(ValueError, match="unknown schedule 'papr'"):
    load('imagenet128_synth', 'papr')


def test_rollback_scale_multiplies_the_schedule():
  ocfg = load('imagenet128_synth').optim
  scale = tf.Variable(0.5)
  np.testing.assert_allclose(
      rates_at(ocfg, optim.network_schedule(ocfg, 'hat'), (0, 230_001), scale), [5e-5, 5e-6],
      rtol=1e-6)


def test_constant_schedule_and_config_errors():
  ocfg = load('cifar10_synth').optim
  assert optim.network_schedule(ocfg, 'hat') == 1e-4
  ocfg.hat_lr_boundaries = (10, 20)
  ocfg.hat_lr_values = (1e-5,)
  with pytest.raises(ValueError, match=r'optim.hat_lr_boundaries has 2 steps but '
                     r'optim.hat_lr_values has 1'):
    optim.network_schedule(ocfg, 'hat')
  ocfg.hat_lr_boundaries = (20, 10)
  ocfg.hat_lr_values = (1e-5, 1e-6)
  with pytest.raises(ValueError, match='must be positive and increasing'):
    optim.network_schedule(ocfg, 'hat')


def test_sngan_rates_decay_linearly_to_zero_as_mimicry():
  config = load('cifar10_sngan')
  assert config.optim.lr_decay == 'linear'
  gen_lr, disc_lr = sngan.learning_rates(config)
  # generator steps: 100,000; discriminator steps: 5 per generator step
  np.testing.assert_allclose(rates_at(config.optim, gen_lr, (0, 25_000, 50_000, 100_000)),
                             [2e-4, 1.5e-4, 1e-4, 0.0], rtol=1e-6, atol=1e-12)
  np.testing.assert_allclose(rates_at(config.optim, disc_lr, (0, 250_000, 500_000)),
                             [2e-4, 1e-4, 0.0], rtol=1e-6, atol=1e-12)
  config.optim.lr_decay = 'constant'
  assert sngan.learning_rates(config) == (2e-4, 2e-4)
  config.optim.lr_decay = 'cosine'
  with pytest.raises(ValueError, match=r"optim.lr_decay must be one of \('linear', 'constant'\)"):
    sngan.learning_rates(config)


def test_each_network_follows_its_own_boundaries_times_the_rollback_scale():
  ocfg = tiny().optim
  ocfg.update(hat_lr=1e-3, hat_lr_boundaries=(2, 5), hat_lr_values=(1e-4, 1e-5),
              gen_lr=2e-3, gen_lr_boundaries=(3,), gen_lr_values=(5e-4,))
  steps = range(8)
  hat = rates_at(ocfg, optim.network_schedule(ocfg, 'hat'), steps)
  gen = rates_at(ocfg, optim.network_schedule(ocfg, 'gen'), steps)
  # the rate changes after the boundary step: step 2 still takes hat_lr, step 3 the first value
  np.testing.assert_allclose(hat, [1e-3, 1e-3, 1e-3, 1e-4, 1e-4, 1e-4, 1e-5, 1e-5], rtol=1e-6)
  np.testing.assert_allclose(gen, [2e-3] * 4 + [5e-4] * 4, rtol=1e-6)
  scale = tf.Variable(0.5)
  np.testing.assert_allclose(
      rates_at(ocfg, optim.network_schedule(ocfg, 'hat'), (0, 3, 6), scale), [5e-4, 5e-5, 5e-6],
      rtol=1e-6)
  # A constant rate is scaled too, and the scale is read at every step (a rollback lowers it);
  # current_learning_rate, which the logs show, is the rate of the last applied step.
  v = tf.Variable(0.0)
  opt = optim.make_adam(ocfg, 1e-3, [v], scale)
  opt.apply_gradients([(tf.constant(1.0), v)])
  assert optim.current_learning_rate(opt) == pytest.approx(5e-4, rel=1e-6)
  scale.assign(0.125)
  opt.apply_gradients([(tf.constant(1.0), v)])
  assert optim.current_learning_rate(opt) == pytest.approx(1.25e-4, rel=1e-6)
  with pytest.raises(ValueError, match="no learning-rate schedule for 'disc'"):
    optim.network_schedule(ocfg, 'disc')


def test_sngan_linear_decay_reaches_zero_after_num_steps_and_n_dis_times_as_many_d_steps():
  config = tiny('digits_sngan', **{'training.num_steps': 10, 'training.n_dis': 3,
                                   'optim.gen_lr': 2e-4, 'optim.disc_lr': 6e-4,
                                   'optim.lr_decay': 'linear'})
  gen_lr, disc_lr = sngan.learning_rates(config)
  # generator step t: 2e-4 * (1 - t / 10); held at 0 after the end
  np.testing.assert_allclose(rates_at(config.optim, gen_lr, (0, 1, 5, 9, 10, 12)),
                             [2e-4, 1.8e-4, 1e-4, 2e-5, 0.0, 0.0], rtol=1e-6, atol=1e-12)
  # discriminator step t of 30: 6e-4 * (1 - t / 30)
  np.testing.assert_allclose(rates_at(config.optim, disc_lr, (0, 3, 15, 27, 30, 40)),
                             [6e-4, 5.4e-4, 3e-4, 6e-5, 0.0, 0.0], rtol=1e-6, atol=1e-12)
  # constant: both rates as they are (SN-GAN configs have no piecewise drops)
  config.optim.lr_decay = 'constant'
  assert sngan.learning_rates(config) == (2e-4, 6e-4)
  assert 'gen_lr_boundaries' not in config.optim
