"""SN-GAN on CelebA 64x64, Mimicry's settings (ndf = ngf = 1024), refinement's base.

  python experiments/train_sngan.py --config=experiments/configs/celeba_sngan.py
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('sngan')
  config.name = 'celeba_sngan'
  config.data.update(name='celeb_a', image_size=64)
  config.model.update(gen_width=1024, disc_width=1024)
  return config
