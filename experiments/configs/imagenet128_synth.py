"""Unconditional ImageNet 128x128 synthesis (paper appendix table, ngf 1024).

Learning-rate schedule: the release's by default; the paper's with
--config=experiments/configs/imagenet128_synth.py:paper
"""
from tf_hat_ebm.config import base_config

# Late learning-rate drops: (boundaries, hat rates after them, generator rates after them).
LR_SCHEDULES = {
    # the authors' release: hat 1e-4 -> 1e-5 -> 1e-6, generator 5e-5 -> 1e-5 -> 1e-6
    'release': ((230_000, 260_000), (1e-5, 1e-6), (1e-5, 1e-6)),
    # the paper: both rates x0.1 after 250K updates
    'paper': ((250_000,), (1e-5,), (5e-6,)),
}


def get_config(schedule='release'):
  if schedule not in LR_SCHEDULES:
    raise ValueError(f'imagenet128 config: unknown schedule {schedule!r}; use one of '
                     f'{", ".join(LR_SCHEDULES)} (e.g. --config=imagenet128_synth.py:paper)')
  config = base_config()
  config.name = 'imagenet128_synth'
  config.data.name = 'imagenet2012'
  config.data.image_size = 128
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.data.cache = False            # 1.28M images do not fit in memory
  config.data.crop = 'release'         # shorter side to 128, random 128x128 crop (release)
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
  # At T = 1e-8 hat gradients are ~1e8: this clip acts at every step; the release's form.
  config.optim.hat_clip_mode = 'per_variable_per_replica'
  boundaries, hat_values, gen_values = LR_SCHEDULES[schedule]
  config.optim.hat_lr_boundaries = config.optim.gen_lr_boundaries = boundaries
  config.optim.hat_lr_values, config.optim.gen_lr_values = hat_values, gen_values
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=150, step_size=5e-4, temperature=1e-8, init_scale=0.01,
                         prior_sigma=None, max_drift=None)
  return config
