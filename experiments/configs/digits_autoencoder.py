"""Digits autoencoder for retrofit: 16x16 images, latent 8x8x1 (half the resolution, as CIFAR-10's
16x16x1 for 32x32) on the sphere of radius 8; sized for minutes on a 2-core CPU.

The decoder is trained on sphere(E(x) + 0.3 N(0, I)) (training.latent_noise; the release's
CIFAR-10 autoencoder uses 2e-2): without it a decoder's latent space can be one that gradient steps
cannot search, and the retrofit over it runs away (docs/experiments.md).
"""
from tf_hat_ebm.autoencoder import autoencoder_config

STEPS_PER_EPOCH = 1500 // 32  # 1,500 training digits, 46 full batches


def get_config():
  config = autoencoder_config()
  config.name = 'digits_autoencoder'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.init = 'mimicry'   # the digits runs were tuned with Mimicry's initialisation
  config.model.enc_width = 32
  config.model.gen_width = 32
  config.training.batch_size = 32
  config.training.num_steps = 20 * STEPS_PER_EPOCH
  config.training.steps_per_loop = STEPS_PER_EPOCH
  config.training.log_every = STEPS_PER_EPOCH
  config.training.eval_every = STEPS_PER_EPOCH
  config.training.checkpoint_every = 5 * STEPS_PER_EPOCH
  config.training.sample_every = 10 * STEPS_PER_EPOCH
  config.training.num_grid_samples = 100
  config.optim.ae_lr = 1e-3   # 20 short epochs instead of 100
  config.training.latent_noise = 0.3  # a decoder the retrofit's chain can search (above)
  return config
