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
  config.training.num_steps = 30_000   # paper; the release trained 25,000
  config.training.data_eps = 1e-2      # the release (paper table: 1e-3)
  config.optim.hat_lr = 1e-4
  # Evaluation chain of the release's FID config, unclipped as its FID chains ran (its FID
  # script sets a clip key that its sampler does not read).
  config.sampling.update(steps=125, step_size=5e-4, latent_step_size=1e-3, temperature=1e-3,
                         prior_sigma=0.1, init_scale=0.01, max_drift=None)
  return config
