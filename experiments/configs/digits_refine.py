"""Refinement of the digits SN-GAN (digits_sngan.py) on the paper's recipe.

  python experiments/train_sngan.py && python experiments/train_refinement.py
The paper's CIFAR-10 refinement (hat lr 1e-5, T 1e-3, prior sigma 0.25, drift clip 2.5) with its
Langevin time per chain: K = 20 instead of 250 (training) and 350 (sampling), so each step size is
the paper's times sqrt(K_paper / K) and K eps^2 / 2 stays the paper's. Runs of batch 32 (paper
128), 2,000 steps at a constant hat lr, a checkpoint every 200 (the plateau rule's five in the
last third).
Expected: the Hat EBM's FID several times below the SN-GAN's and DDLS's on every seed. The
measured FIDs and cost: docs/digits_settings.md (Expected results and cost) and the report;
every setting against the paper's: docs/digits_settings.md.
"""
import math

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry

K = 20
PAPER_K = dict(langevin=250, sampling=350)  # training and FID chains (appendix; release fid/)


def get_config(size=None):
  config = config_lib.digits(registry.defaults('joint'), 'digits_refine', steps=2000, every=200)
  config.generator.path = 'workdir/digits_sngan'
  config.model.update(hat_width=32, gen_width=64, disc_width=32, z_dim=128)  # digits_sngan.py's
  for name, paper_k in PAPER_K.items():
    chain, scale = config[name], math.sqrt(paper_k / K)
    chain.update(steps=K, step_size=1e-4 * scale, latent_step_size=5e-3 * scale,
                 prior_sigma=0.25, max_drift=2.5)
  # DDLS: the best mean of a grid around it on the digits (eps 0.1-0.5, 150-600 steps), every
  # neighbour within the FID's evaluation sd of it (docs/experiments.md)
  config.ddls.update(steps=300, step_size=0.3)
  config.training.update(log_every=50)
  config.optim.hat_lr = 1e-5
  # 2,000 steps: most of the gain over the 64-wide SN-GAN is in by then, and at a constant 1e-5
  # the hat keeps sharpening past it until the fixed-step chain falls behind (runaway at ~5,300
  # over the former 32-wide GAN; docs/experiments.md)
  return config_lib.sized(config, size)
