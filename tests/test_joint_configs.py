"""SN-GAN, refinement, autoencoder and retrofit configs carry the paper's (and Mimicry's)
settings."""
from conftest import load_config as load


def chain(cfg):
  return (cfg.steps, cfg.step_size, cfg.latent_step_size, cfg.temperature, cfg.prior_sigma)


def test_refinement_and_retrofit_settings():
  cifar = load('cifar10_refine')
  assert (cifar.training.num_steps, cifar.training.batch_size, cifar.optim.hat_lr) == (
      20_000, 128, 1e-5)
  # where the release and the paper disagree: the training chain has no prior (the release)
  assert chain(cifar.langevin) == (250, 1e-4, 5e-3, 1e-3, None)
  assert cifar.model.out_factor == 1.0 and cifar.generator.source == 'sngan'
  celeba = load('celeba_refine')
  assert chain(celeba.langevin) == (100, 1e-4, 5e-3, 1e-6, None)
  assert (celeba.training.num_steps, celeba.optim.hat_lr, celeba.data.image_size) == (
      20_000, 1e-5, 64)
  retro = load('cifar10_retrofit')
  assert chain(retro.langevin) == (100, 5e-4, 1e-3, 1e-3, 0.1)
  assert (retro.training.num_steps, retro.optim.hat_lr, retro.model.out_factor) == (
      30_000, 1e-4, 2.0)
  assert retro.training.data_eps == 1e-2  # the release (paper: 1e-3)
  assert retro.generator.source == 'autoencoder' and retro.langevin.use_residual


def test_sngan_and_autoencoder_settings():
  for name, ngf, ndf in (('cifar10_sngan', 256, 128), ('celeba_sngan', 1024, 1024)):
    cfg = load(name)
    assert (cfg.model.gen_width, cfg.model.disc_width, cfg.training.batch_size) == (ngf, ndf, 64)
    assert (cfg.training.num_steps, cfg.training.n_dis) == (100_000, 5)
    assert (cfg.optim.gen_lr, cfg.optim.disc_lr, cfg.optim.beta1, cfg.optim.beta2) == (
        2e-4, 2e-4, 0.0, 0.9)
  ae = load('cifar10_autoencoder')
  assert ae.training.num_steps == 100 * 499  # 100 epochs of the release's 499 steps
  assert (ae.optim.ae_lr, ae.training.latent_noise, ae.training.recon_factor) == (
      1e-4, 0.02, 1000.0)
