"""Refinement of the digits SN-GAN (experiments/configs/digits_sngan.py), sized for a 2-core CPU.

The paper's CIFAR-10 refinement chain (eps_img 1e-4, eps_lat 5e-3, T 1e-3, prior sigma 0.25) with
K = 20 (paper 250) and 300 steps of batch 32 (paper 20,000 of 128), about 5 min here.
The hat learning rate is 1e-4, ten times the paper's 1e-5: at 1e-5 the hat's gradients are still
too small after 300 steps to move the chain (the latent drift eps^2/2 * grad is ~1e-3 per step) and
the samples stay those of G(Z0) (FID 23.1 vs 23.7). At 1e-4 the chain starts to tilt Z from step
~200 and the step-300 samples are better than the SN-GAN's (small-data FID 19.9 vs 23.7). Trained
on at 1e-4 the hat keeps winning: the mean |Z_K| grows (0.85 at step 300, 1.6 at 500, more later)
and the latents run away. For longer runs use the paper's --config.optim.hat_lr=1e-5 and watch
latent_abs and energy_diff in TensorBoard.
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
