"""CIFAR-10 32x32 synthesis (paper appendix table; the release differs where noted)."""
from tf_hat_ebm.config import base_config


def get_config():
  config = base_config()
  config.name = 'cifar10_synth'
  config.data.name = 'cifar10'
  config.data.image_size = 32
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.data.random_flip = False
  config.model.hat_width = 256
  config.model.gen_width = 256
  config.model.out_factor = 2.0
  config.langevin.steps = 50
  config.langevin.step_size = 5e-4
  config.langevin.temperature = 1e-3   # paper table; the release used 1e-8
  config.langevin.max_drift = 2.5
  config.training.batch_size = 128
  config.training.num_steps = 75_000   # paper; the release trained 50,000
  config.training.bank_size = 10_000
  config.optim.hat_lr = 1e-4
  config.optim.gen_lr = 1e-4
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=125, step_size=5e-4, temperature=1e-3, init_scale=0.01,
                         prior_sigma=None, max_drift=None)
  return config
