"""Refinement of a CelebA 64x64 SN-GAN (celeba_sngan.py), paper settings (appendix tables)."""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'celeba_refine'
  config.data.name = 'celeb_a'
  config.data.image_size = 64
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.generator.source = 'sngan'
  config.generator.path = 'workdir/celeba_sngan'
  config.model.gen_width = 1024
  config.model.disc_width = 1024
  config.model.z_dim = 128
  config.model.hat_width = 1024
  for chain in (config.langevin, config.sampling):
    chain.steps = 100
    chain.step_size = 1e-4
    chain.latent_step_size = 5e-3
    chain.temperature = 1e-6
    chain.prior_sigma = None
  config.training.batch_size = 128
  config.training.num_steps = 20_000   # paper; the release trained 25,000
  config.optim.hat_lr = 1e-5
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=125, step_size=1e-4, latent_step_size=5e-3, temperature=1e-6,
                         prior_sigma=None, init_scale=0.0, max_drift=None)
  return config
