"""Refinement of a CIFAR-10 SN-GAN (cifar10_sngan.py), paper settings (appendix tables)."""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'cifar10_refine'
  config.data.name = 'cifar10'
  config.data.image_size = 32
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.generator.source = 'sngan'
  config.generator.path = 'workdir/cifar10_sngan'
  config.model.gen_width = 256
  config.model.disc_width = 128
  config.model.z_dim = 128
  config.model.hat_width = 256
  for chain in (config.langevin, config.sampling):
    chain.steps = 250
    chain.step_size = 1e-4
    chain.latent_step_size = 5e-3
    chain.temperature = 1e-3
    chain.prior_sigma = 0.25
  config.langevin.prior_sigma = None   # the release: prior only in sampling (paper: also here)
  config.training.batch_size = 128
  config.training.num_steps = 20_000   # paper; the release trained 25,000
  config.optim.hat_lr = 1e-5
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=350, step_size=1e-4, latent_step_size=5e-3, temperature=1e-3,
                         prior_sigma=0.25, init_scale=0.0, max_drift=None)
  return config
