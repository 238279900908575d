"""SN-GAN on the embedded digits at 16x16, sized for minutes on a 2-core CPU (refinement's base)."""
from tf_hat_ebm.sngan import sngan_config


def get_config():
  config = sngan_config()
  config.name = 'digits_sngan'
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.init = 'mimicry'   # the digits runs were tuned with Mimicry's initialisation
  config.model.gen_width = 32
  config.model.disc_width = 32
  config.model.z_dim = 16
  config.training.batch_size = 32
  config.training.num_steps = 1200
  config.training.n_dis = 5
  config.training.steps_per_loop = 25
  config.training.log_every = 100
  config.training.checkpoint_every = 200
  config.training.sample_every = 200
  config.training.num_grid_samples = 100
  return config
