"""Retrofit of the digits autoencoder's decoder (digits_autoencoder.py), sized for a 2-core CPU.

The paper's CIFAR-10 retrofit (T 1e-3, prior sigma 0.1, hat lr 1e-4, from Z0 ~ N(0, I)) with a
shorter, faster chain: K = 20 instead of 100, eps_lat 7e-3 instead of 1e-3 and eps_img 7e-4 instead
of 5e-4, and 800 training steps of batch 32 instead of 30,000 of 128 (about 12 min here).
Why the larger steps: the encoder's latents of the digits sit 10.5 (in norm) from a Z0 ~ N(0, I) on
average, and the chain has to cover that in K steps. With the paper's eps_lat 1e-3 the latent drift
(eps^2/2) * grad U stayed ~0.15 per step, Z did not leave N(0, I) within 400 steps and the samples
stayed the decoder's noise. Over a decoder trained without latent noise, with eps_lat 5e-3 (K = 40)
digits appeared from step ~400 (FID 28.6 at 600); K = 20 with eps_lat 7e-3 (the same eps^2 * K) is
twice as cheap per step and gave FID 12.6 at step 800 (decoder of N(0, I) latents: 1,131).

Over the decoders of digits_autoencoder.py (trained on noisy latents, see there) two runs (seeds 0
and 1, each over its own autoencoder) kept |energy_diff| below 5 and gave FID 8.3 and 16.6 at step
800 against 211 and 194 for the decoder fed N(0, I) latents. Over one of two decoders trained
without that noise, every run tried ran away from step ~250 (energy_diff below -1e3): watch
energy_diff in TensorBoard. The paper's chain:
--config.langevin.steps=100 --config.langevin.step_size=5e-4 --config.langevin.latent_step_size=1e-3
(and the same for sampling).
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
  # (projected Langevin). Without it a diverging run walked |Z| out to 10^4, where the decoder
  # extrapolates; projecting only G's input let |Z| inflate instead (2.7 at step 300). The sphere
  # keeps Z in the decoder's domain (the runaway itself came from the decoder: see above).
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
