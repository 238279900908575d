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
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=100, step_size=5e-4, temperature=1e-8, init_scale=0.01,
                         prior_sigma=None, max_drift=None)
  return config
