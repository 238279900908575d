"""Refinement of the CelebA 64x64 SN-GAN (celeba_sngan.py), paper settings (appendix tables).

  python experiments/train_refinement.py --config=experiments/configs/celeba_refine.py
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('joint')
  config.name = 'celeba_refine'
  config.data.update(name='celeb_a', image_size=64)
  config.generator.path = 'workdir/celeba_sngan'
  config.model.update(hat_width=1024, gen_width=1024, disc_width=1024)
  config.langevin.update(steps=100, temperature=1e-6)
  config.sampling.update(steps=125, temperature=1e-6, prior_sigma=None)  # the release's FID chain
  return config
