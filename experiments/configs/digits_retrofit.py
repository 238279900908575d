"""Retrofit of the digits autoencoder's decoder (digits_autoencoder.py), sized for a 2-core CPU.

The paper's chain (eps_img 5e-4, eps_lat 1e-3, T 1e-3, prior sigma 0.1, lr 1e-4) with K = 40
instead of 100 and 200 training steps of batch 32 instead of 30,000 of 128, so that it runs in about
15 minutes on a 2-core CPU (K = 100 there: --config.langevin.steps=100 --config.sampling.steps=100).
"""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'digits_retrofit'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.generator.source = 'autoencoder'
  config.generator.path = 'workdir/digits_autoencoder'
  config.model.gen_width = 32         # the decoder's width (digits_autoencoder.py)
  config.model.out_factor = 2.0
  config.model.gen_batch_stats = False
  config.model.hat_width = 32
  for chain in (config.langevin, config.sampling):
    chain.steps = 40
    chain.step_size = 5e-4
    chain.latent_step_size = 1e-3
    chain.temperature = 1e-3
    chain.prior_sigma = 0.1
  config.training.batch_size = 32
  config.training.num_steps = 200
  config.training.steps_per_loop = 10
  config.training.log_every = 50
  config.training.checkpoint_every = 100
  config.training.sample_every = 100
  config.training.num_grid_samples = 100
  config.optim.hat_lr = 1e-4
  return config
