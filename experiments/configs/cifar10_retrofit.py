"""Retrofit of the CIFAR-10 autoencoder's decoder (cifar10_autoencoder.py), paper settings.

  python experiments/train_retrofit.py --config=experiments/configs/cifar10_retrofit.py
The release trained 25,000 steps (paper 30,000) with data noise 1e-2 (paper table 1e-3).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config():
  config = config_lib.retrofit(registry.defaults('joint'), 'workdir/cifar10_autoencoder')
  config.name = 'cifar10_retrofit'
  config.langevin.update(steps=100, step_size=5e-4, latent_step_size=1e-3, prior_sigma=0.1)
  config.sampling.update(steps=125, step_size=5e-4, latent_step_size=1e-3, prior_sigma=0.1,
                         init_scale=0.01)   # the release's FID chain
  config.training.update(num_steps=30_000, data_eps=1e-2)
  config.optim.hat_lr = 1e-4
  return config
