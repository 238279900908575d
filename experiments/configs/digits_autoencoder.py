"""Digits autoencoder of the retrofit: latent 8x8x1 on the sphere of radius 8, minutes on 2 cores.

  python experiments/train_autoencoder.py
20 short epochs at lr 1e-3; latent noise 0.3 (release 2e-2) gives a decoder whose latent space
gradient steps can search, without which the retrofit over it ran away (docs/experiments.md).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry

STEPS_PER_EPOCH = 1500 // 32  # 1,500 training digits, 46 full batches


def get_config(size=None):
  config = config_lib.digits(registry.defaults('autoencoder'), 'digits_autoencoder',
                             steps=20 * STEPS_PER_EPOCH, every=5 * STEPS_PER_EPOCH)
  config.model.update(enc_width=32, gen_width=32)
  config.training.update(steps_per_loop=STEPS_PER_EPOCH, log_every=STEPS_PER_EPOCH,
                         eval_every=STEPS_PER_EPOCH, sample_every=10 * STEPS_PER_EPOCH,
                         latent_noise=0.3)
  config.optim.ae_lr = 1e-3
  return config_lib.sized(config, size)
