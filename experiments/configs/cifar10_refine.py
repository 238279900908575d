"""Refinement of the CIFAR-10 SN-GAN (cifar10_sngan.py): the paper's run (the joint defaults).

  python experiments/train_refinement.py --config=experiments/configs/cifar10_refine.py
The release trained 25,000 steps (paper 20,000) and used the prior only when sampling.
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('joint')
  config.name = 'cifar10_refine'
  config.generator.path = 'workdir/cifar10_sngan'
  return config
