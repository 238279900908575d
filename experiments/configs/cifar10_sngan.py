"""SN-GAN on CIFAR-10 32x32, Mimicry's settings (ndf 128, ngf 256, 100k G steps, batch 64)."""
from tf_hat_ebm.sngan import sngan_config


def get_config():
  config = sngan_config()
  config.name = 'cifar10_sngan'
  config.data.name = 'cifar10'
  config.data.image_size = 32
  config.data.channels = 3
  config.model.init = 'mimicry'   # Mimicry's SN-GAN: gain sqrt(2) on the residual path
  config.model.gen_width = 256
  config.model.disc_width = 128
  config.model.z_dim = 128
  config.training.batch_size = 64
  config.training.num_steps = 100_000
  config.training.n_dis = 5
  config.training.checkpoint_every = 5000
  config.training.sample_every = 5000
  return config
