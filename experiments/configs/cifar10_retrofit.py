"""Retrofit of the CIFAR-10 autoencoder's decoder (cifar10_autoencoder.py), paper settings."""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'cifar10_retrofit'
  config.data.name = 'cifar10'
  config.data.image_size = 32
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.generator.source = 'autoencoder'
  config.generator.path = 'workdir/cifar10_autoencoder'
  config.model.gen_width = 256        # the decoder's width (cifar10_autoencoder.py)
  config.model.out_factor = 2.0
  config.model.gen_batch_stats = False
  config.model.hat_width = 256
  for chain in (config.langevin, config.sampling):
    chain.steps = 100
    chain.step_size = 5e-4
    chain.latent_step_size = 1e-3
    chain.temperature = 1e-3
    chain.prior_sigma = 0.1
  config.training.batch_size = 128
  config.training.num_steps = 30_000
  config.optim.hat_lr = 1e-4
  # Evaluation chain of the release's FID config: K=125, T=1e-3, prior sigma 0.1, Y0 ~ 0.01 N(0, I).
  config.sampling.steps = 125
  config.sampling.step_size = 5e-4
  config.sampling.latent_step_size = 1e-3
  config.sampling.temperature = 1e-3
  config.sampling.prior_sigma = 0.1
  config.sampling.init_scale = 0.01
  # The release's FID chains ran unclipped (its FID script's clip key is never read).
  config.sampling.max_drift = None
  return config
