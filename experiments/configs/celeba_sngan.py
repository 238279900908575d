"""SN-GAN on CelebA 64x64, Mimicry's settings (ndf = ngf = 1024, 100k G steps, batch 64)."""
from tf_hat_ebm.sngan import sngan_config


def get_config():
  config = sngan_config()
  config.name = 'celeba_sngan'
  config.data.name = 'celeb_a'
  config.data.image_size = 64
  config.data.channels = 3
  config.model.init = 'mimicry'   # Mimicry's SN-GAN: gain sqrt(2) on the residual path
  config.model.gen_width = 1024
  config.model.disc_width = 1024
  config.model.z_dim = 128
  config.training.batch_size = 64
  config.training.num_steps = 100_000
  config.training.n_dis = 5
  config.training.checkpoint_every = 5000
  config.training.sample_every = 5000
  return config
