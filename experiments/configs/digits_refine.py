"""Refinement of the digits SN-GAN (digits_sngan.py), minutes on 2 CPU cores.

  python experiments/train_sngan.py && python experiments/train_refinement.py
Expected: Hat EBM FID 11.8-15.8 against the SN-GAN's 25.6-31.2 over 3 seeds. The paper's chain
with K = 20, and hat lr 1e-4 (paper 1e-5 moves the chain too little in 300 steps; for longer runs
use 1e-5, docs/experiments.md).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('joint'), 'digits_refine', steps=300, every=100)
  config.generator.path = 'workdir/digits_sngan'
  config.model.update(hat_width=32, gen_width=32, disc_width=32, z_dim=16)  # digits_sngan.py's
  for chain in (config.langevin, config.sampling):
    chain.update(steps=20, prior_sigma=0.25, max_drift=2.5)
  config.optim.hat_lr = 1e-4
  return config_lib.sized(config, size)
