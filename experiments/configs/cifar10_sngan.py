"""SN-GAN on CIFAR-10 32x32 with Mimicry's settings (the sngan defaults), refinement's base.

  python experiments/train_sngan.py --config=experiments/configs/cifar10_sngan.py
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('sngan')
  config.name = 'cifar10_sngan'
  return config
