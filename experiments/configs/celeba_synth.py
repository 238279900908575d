"""CelebA 64x64 synthesis (paper appendix table)."""
from tf_hat_ebm.config import base_config


def get_config():
  config = base_config()
  config.name = 'celeba_synth'
  config.data.name = 'celeb_a'
  config.data.image_size = 64
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.model.hat_width = 1024
  config.model.gen_width = 1024
  config.langevin.steps = 50
  config.langevin.step_size = 5e-4
  config.langevin.temperature = 1e-8
  config.training.batch_size = 128
  config.training.num_steps = 50_000
  config.optim.hat_lr = 1e-4
  config.optim.gen_lr = 1e-4
  # Evaluation chain of the release's FID config: K=100, T=1e-8, Y0 ~ 0.01 N(0, I).
  config.sampling.steps = 100
  config.sampling.step_size = 5e-4
  config.sampling.temperature = 1e-8
  config.sampling.init_scale = 0.01
  config.sampling.prior_sigma = None
  # The release's FID chains ran unclipped (its FID script's clip key is never read).
  config.sampling.max_drift = None
  return config
