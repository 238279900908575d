"""CIFAR-10 autoencoder of the retrofit (the autoencoder defaults): latent 16x16x1 on a sphere.

  python experiments/train_autoencoder.py --config=experiments/configs/cifar10_autoencoder.py
"""
from tf_hat_ebm import config as config_lib


def get_config():
  config = config_lib.defaults('autoencoder')
  config.name = 'cifar10_autoencoder'
  return config
