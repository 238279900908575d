"""Unconditional ImageNet 128x128 synthesis (paper appendix table, ngf 1024)."""
from tf_hat_ebm.config import base_config


def get_config():
  config = base_config()
  config.name = 'imagenet128_synth'
  config.data.name = 'imagenet2012'
  config.data.image_size = 128
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.data.cache = False            # 1.28M images do not fit in memory
  config.model.hat_width = 1024
  config.model.gen_width = 1024
  config.langevin.steps = 50
  config.langevin.step_size = 5e-4
  config.langevin.temperature = 1e-8
  config.training.batch_size = 128
  config.training.num_steps = 300_000
  config.training.checkpoint_data_iterator = False  # a 10,000-image shuffle buffer is 2 GB
  config.optim.hat_lr = 1e-4
  config.optim.gen_lr = 5e-5
  config.optim.hat_clip_norm = 50.0
  # Both learning rates x0.1 after 250K updates (paper); the release dropped at 230K and 260K:
  # --config.optim.lr_boundaries='(230000,260000)'.
  config.optim.lr_boundaries = (250_000,)
  config.optim.lr_factor = 0.1
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=150, step_size=5e-4, temperature=1e-8, init_scale=0.01,
                         prior_sigma=None, max_drift=None)
  return config
