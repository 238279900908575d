"""Refinement of the digits SN-GAN (experiments/configs/digits_sngan.py), sized for a 2-core CPU.

The paper's CIFAR-10 refinement chain (eps_img 1e-4, eps_lat 5e-3, T 1e-3, prior sigma 0.25) with
K = 20 and 300 steps of batch 32, hat lr 1e-4 (paper 1e-5: too slow to move the chain in 300 steps;
longer runs at 1e-4 let the latents drift, use 1e-5 there). Expected: Hat EBM FID 11.8-15.8 against
the SN-GAN's 25.6-31.2 over 3 seeds (docs/experiments.md).
"""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'digits_refine'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.init = 'mimicry'   # the digits runs were tuned with Mimicry's initialisation
  config.generator.source = 'sngan'
  config.generator.path = 'workdir/digits_sngan'
  # must match the SN-GAN's config (digits_sngan.py)
  config.model.gen_width = 32
  config.model.disc_width = 32
  config.model.z_dim = 16
  config.model.hat_width = 32
  for chain in (config.langevin, config.sampling):
    chain.steps = 20
    chain.step_size = 1e-4
    chain.latent_step_size = 5e-3
    chain.temperature = 1e-3
    chain.prior_sigma = 0.25
  config.ddls.steps = 100
  config.training.batch_size = 32
  config.training.num_steps = 300
  config.training.steps_per_loop = 10
  config.training.log_every = 50
  config.training.checkpoint_every = 100
  config.training.sample_every = 100
  config.training.num_grid_samples = 100
  config.optim.hat_lr = 1e-4         # see the docstring (paper: 1e-5 over 20,000 steps)
  return config
