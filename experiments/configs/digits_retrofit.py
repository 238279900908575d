"""Retrofit of the digits autoencoder's decoder (digits_autoencoder.py), sized for a 2-core CPU.

The paper's CIFAR-10 retrofit chain made short: K = 20 with eps_lat 7e-3 and eps_img 7e-4 (paper
K = 100, 1e-3, 5e-4) so the chain covers the ~10.5 between Z0 ~ N(0, I) and the encoder's latents;
800 steps of batch 32. Expected: Hat EBM FID 9.6-13.6 over 3 seeds, decoder of N(0, I) ~200
(docs/experiments.md). The paper's chain: --config.langevin.steps=100
--config.langevin.step_size=5e-4 --config.langevin.latent_step_size=1e-3 (and the same for sampling).
"""
from tf_hat_ebm.refinement import joint_config


def get_config():
  config = joint_config()
  config.name = 'digits_retrofit'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.init = 'mimicry'   # the digits runs were tuned with Mimicry's initialisation
  config.generator.source = 'autoencoder'
  config.generator.path = 'workdir/digits_autoencoder'
  # The decoder only ever saw latents on the sphere of radius 8: the chain's Z stays there
  # (projected Langevin), in the decoder's domain.
  config.generator.latent_sphere = True
  config.model.gen_width = 32         # the decoder's width (digits_autoencoder.py)
  config.model.out_factor = 2.0
  config.model.gen_batch_stats = False
  config.model.hat_width = 32
  for chain in (config.langevin, config.sampling):
    chain.steps = 20
    chain.step_size = 7e-4
    chain.latent_step_size = 7e-3
    chain.temperature = 1e-3
    chain.prior_sigma = 0.1
  config.training.batch_size = 32
  config.training.num_steps = 800
  config.training.steps_per_loop = 10
  config.training.log_every = 50
  config.training.checkpoint_every = 200
  config.training.sample_every = 200
  config.training.num_grid_samples = 100
  config.optim.hat_lr = 1e-4
  return config
