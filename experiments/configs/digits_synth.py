"""Embedded default: synthesis Hat EBM on the scikit-learn digits at 16x16, sized for a 2-core CPU."""
from tf_hat_ebm.config import base_config


def get_config():
  config = base_config()
  config.name = 'digits_synth'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.hat_width = 32
  config.model.gen_width = 64
  config.langevin.steps = 20
  config.langevin.step_size = 5e-4
  config.langevin.temperature = 1e-8
  config.langevin.max_drift = 0.5   # 2.5 was tuned for 32x32x3; it leaves stripes on 16x16x1
  config.sampling.steps = 20
  config.sampling.temperature = 1e-8
  config.sampling.max_drift = 0.5
  config.sampling.init_scale = 0.0
  config.training.batch_size = 64
  config.training.num_steps = 3000
  config.training.steps_per_loop = 10
  config.training.log_every = 50
  config.training.checkpoint_every = 500
  config.training.sample_every = 500
  config.training.num_grid_samples = 100
  return config
