"""Unconditional ImageNet 128x128 synthesis (paper appendix table, ngf 1024).

  python experiments/train_synthesis.py --config=experiments/configs/imagenet128_synth.py
Learning-rate drops: the release's by default, the paper's with `...imagenet128_synth.py:paper`.
"""
from tf_hat_ebm import registry

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
  config = registry.defaults('synthesis')
  config.name = 'imagenet128_synth'
  # 1.28M images do not fit in memory, nor a 10,000-image shuffle buffer (2 GB) in a checkpoint.
  config.data.update(name='imagenet2012', image_size=128, cache=False)
  config.training.checkpoint_data_iterator = False
  config.model.update(hat_width=1024, gen_width=1024)
  config.langevin.temperature = 1e-8
  config.sampling.update(steps=150, temperature=1e-8)   # the release's FID chain
  config.training.num_steps = 300_000
  # At T = 1e-8 hat gradients are ~1e8: this clip acts at every step, in the release's form.
  config.optim.update(gen_lr=5e-5, hat_clip_norm=50.0, hat_clip_mode='per_variable_per_replica')
  boundaries, hat_values, gen_values = LR_SCHEDULES[schedule]
  config.optim.update(hat_lr_boundaries=boundaries, gen_lr_boundaries=boundaries,
                      hat_lr_values=hat_values, gen_lr_values=gen_values)
  return config
