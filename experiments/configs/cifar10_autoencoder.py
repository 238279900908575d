"""CIFAR-10 autoencoder for retrofit: latent 16x16x1 on the sphere of radius 16, 100 epochs."""
from tf_hat_ebm.autoencoder import autoencoder_config

STEPS_PER_EPOCH = 50_000 // 128  # 390 full batches


def get_config():
  config = autoencoder_config()
  config.name = 'cifar10_autoencoder'
  config.data.name = 'cifar10'
  config.data.image_size = 32
  config.data.channels = 3
  config.model.init = 'glorot'    # Keras' default, as the authors' release
  config.model.enc_width = 256
  config.model.gen_width = 256
  config.training.batch_size = 128
  config.training.num_steps = 100 * STEPS_PER_EPOCH
  config.training.eval_every = STEPS_PER_EPOCH
  config.training.checkpoint_every = 10 * STEPS_PER_EPOCH
  config.training.sample_every = 10 * STEPS_PER_EPOCH
  config.optim.ae_lr = 1e-4
  config.training.latent_noise = 2e-2  # the release: noise on the latent E(x), not on the image
  return config
