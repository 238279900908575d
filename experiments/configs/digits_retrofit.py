"""Retrofit of the digits autoencoder's decoder (digits_autoencoder.py), minutes on 2 CPU cores.

  python experiments/train_autoencoder.py && python experiments/train_retrofit.py
Expected: Hat EBM FID 9.6-13.6 over 3 seeds, the decoder of N(0, I) latents ~200. K = 20 with
larger steps than the paper's K = 100 so the chain reaches the encoder's latents; Z stays on the
decoder's sphere, the only latents it was trained on (docs/experiments.md).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(config_lib.retrofit(registry.defaults('joint'),
                                                 'workdir/digits_autoencoder'),
                             'digits_retrofit', steps=800, every=200)
  config.model.update(hat_width=32, gen_width=32)  # gen_width: digits_autoencoder.py's decoder
  for chain in (config.langevin, config.sampling):
    chain.update(steps=20, step_size=7e-4, latent_step_size=7e-3, prior_sigma=0.1,
                 max_drift=2.5, latent_sphere=True)
  config.optim.hat_lr = 1e-4
  return config_lib.sized(config, size)
