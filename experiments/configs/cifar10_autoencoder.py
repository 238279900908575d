"""CIFAR-10 autoencoder of the retrofit (the autoencoder defaults): latent 16x16x1 on a sphere.

  python experiments/train_autoencoder.py --config=experiments/configs/cifar10_autoencoder.py
Trained as long as the release's: 100 epochs of 499 steps, 49,900 steps (at batch 128, ~128 passes
over the 50,000 images; 100 passes is --config.training.num_steps=39000).
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('autoencoder')
  config.name = 'cifar10_autoencoder'
  config.training.num_steps = 100 * 499
  return config
