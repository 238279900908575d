"""CelebA 64x64 synthesis (paper appendix table; ngf 1024).

  python experiments/train_synthesis.py --config=experiments/configs/celeba_synth.py
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('synthesis')
  config.name = 'celeba_synth'
  config.data.update(name='celeb_a', image_size=64)
  config.model.update(hat_width=1024, gen_width=1024)
  config.langevin.temperature = 1e-8
  config.training.num_steps = 50_000
  # The release's FID chain for this model.
  config.sampling.update(steps=100, temperature=1e-8)
  return config
