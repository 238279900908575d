"""SN-GAN on the embedded digits at 16x16, minutes on 2 CPU cores (digits_refine.py's generator).

  python experiments/train_sngan.py
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('sngan'), 'digits_sngan', steps=1200, every=200)
  config.model.update(gen_width=32, disc_width=32, z_dim=16)
  config.training.update(steps_per_loop=25, log_every=100)
  return config_lib.sized(config, size)
