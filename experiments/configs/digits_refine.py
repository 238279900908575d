"""Refinement of the digits SN-GAN (experiments/configs/digits_sngan.py), sized for a 2-core CPU.

Paper settings scaled down: K = 20 (paper 250), 300 steps of batch 32 (paper 20,000 of 128);
lr 1e-5, eps_img 1e-4, eps_lat 5e-3, T 1e-3 and prior sigma 0.25 as in the paper's CIFAR-10
refinement. (At lr 1e-4 the energies grew ~10x per 50 steps after step 100 and the latents ran
away: refinement is a small correction of a good generator and wants the paper's small rate.)
"""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'digits_refine'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
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
  config.optim.hat_lr = 1e-5
  return config
