"""CIFAR-10 autoencoder of the retrofit (the autoencoder defaults): latent 16x16x1 on a sphere.

  python experiments/train_autoencoder.py --config=experiments/configs/cifar10_autoencoder.py
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('autoencoder')
  config.name = 'cifar10_autoencoder'
  return config
