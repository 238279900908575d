"""Autoencoder (sphere latent, per-epoch errors) and retrofit over its frozen decoder."""
import dataclasses
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import langevin
from tf_hat_ebm import nets
from tf_hat_ebm.tasks import autoencoder
from tf_hat_ebm.tasks import joint

from conftest import load_config
from conftest import tiny


def test_sphere_projection_has_norm_sqrt_m():
  z = tf.random.normal([3, 16, 16, 1]) * tf.constant([[[[0.1]]], [[[1.0]]], [[[50.0]]]])
  np.testing.assert_allclose(tf.norm(tf.reshape(langevin.project_to_sphere(z), [3, -1]),
                                     axis=1).numpy(), [16.0] * 3, rtol=1e-5)
  encoder = nets.Encoder(32, 3, 8).build_for_input()
  out = encoder(tf.random.normal([2, 32, 32, 3]))
  assert out.shape == (2, 16, 16, 1)
  np.testing.assert_allclose(tf.norm(tf.reshape(out, [2, -1]), axis=1).numpy(), [16.0, 16.0],
                             rtol=1e-5)
  decoder = nets.Decoder(32, 3, 8).build_for_input()
  assert decoder(out).shape == (2, 32, 32, 3)


def test_latent_noise_perturbs_on_the_sphere():
  rng = tf.random.Generator.from_seed(0)
  z = langevin.project_to_sphere(tf.random.normal([500, 8, 8, 1]))
  assert autoencoder.perturb_latent(z, 0.0, rng) is z
  noisy = autoencoder.perturb_latent(z, 0.3, rng)
  flat = tf.reshape(noisy, [500, -1])
  np.testing.assert_allclose(tf.norm(flat, axis=1).numpy(), 8.0, rtol=1e-5)
  # ||z + 0.3 n|| ~ sqrt(64 + 0.09 * 64): the projection shrinks the step; distance ~ 0.3 * 8
  dist = tf.norm(flat - tf.reshape(z, [500, -1]), axis=1).numpy().mean()
  assert 2.0 < dist < 2.6
  assert load_config('digits_autoencoder').training.latent_noise == 0.3
  assert load_config('cifar10_autoencoder').training.latent_noise == 2e-2  # the authors' release
  assert 'data_noise' not in load_config('cifar10_autoencoder').training  # no noise on the image
  assert load_config('cifar10_autoencoder').training.num_steps == 100 * 499  # the release's


@pytest.mark.parametrize('latent_noise', [0.0, 2e-2, 0.3])
def test_training_step_decodes_the_noisy_latent(latent_noise):
  """The step's loss is 1000 * MSE of decoder(perturb_latent(encoder(x))) with the task's RNG: the
  noise goes to the latent only (the clean image is encoded)."""
  config = tiny('digits_autoencoder', training__latent_noise=latent_noise)
  task = autoencoder.AutoencoderTask(config, tf.distribute.get_strategy())
  x = tf.random.stateless_uniform([4, 16, 16, 1], [1, 2], -1.0, 1.0)
  z = task.encoder(x)
  replay = tf.random.Generator.from_state(task.rng.state.numpy(), task.rng.algorithm)
  expected = 1000.0 * tf.reduce_mean(tf.square(
      task.decoder(autoencoder.perturb_latent(z, latent_noise, replay)) - x))
  clean = 1000.0 * tf.reduce_mean(tf.square(task.decoder(z) - x))
  loss = float(task.replica_step(x)['loss'])
  np.testing.assert_allclose(loss, float(expected), rtol=1e-4)
  assert (abs(loss - float(clean)) > 1e-3) == (latent_noise > 0)


def test_autoencoder_trains_and_reports_reconstruction_errors(trained_autoencoder):
  workdir, task, metrics, _ = trained_autoencoder
  assert np.isfinite(metrics['mse']) and metrics['loss'] == pytest.approx(1000 * metrics['mse'])
  errors = task.evaluate()
  assert set(errors) == {'train_mse', 'test_mse'} and all(0 < v < 4 for v in errors.values())
  assert sorted(os.listdir(os.path.join(workdir, 'samples'))) == [
      'data.png', 'generator_0000002.png', 'samples_0000002.png']


def retrofit_config(workdir, **overrides):
  return tiny('digits_retrofit', **{'generator.path': workdir, **overrides})


def test_retrofit_chains_the_decoder_on_its_sphere(trained_autoencoder):
  ae_workdir, ae_task, _, _ = trained_autoencoder
  config = retrofit_config(ae_workdir)
  strategy = tf.distribute.get_strategy()
  task = joint.JointTask(config, strategy)
  z = tf.random.normal([2, 8, 8, 1])
  np.testing.assert_allclose(task.generator(z).numpy(), ae_task.decoder(z).numpy(), rtol=1e-5,
                             atol=1e-6)
  # digits_retrofit's chains keep the latents on the decoder's sphere (radius 8) at every step
  assert config.langevin.latent_sphere and config.sampling.latent_sphere
  z_k = langevin.sample(task.hat, task.generator, tf.random.Generator.from_seed(0),
                        task.settings, batch_size=3)[0]
  np.testing.assert_allclose(tf.norm(tf.reshape(z_k, [3, -1]), axis=1).numpy(), 8.0, rtol=1e-5)
  free = langevin.sample(task.hat, task.generator, tf.random.Generator.from_seed(0),
                         dataclasses.replace(task.settings, latent_sphere=False), batch_size=3)[0]
  assert not np.allclose(tf.norm(tf.reshape(free, [3, -1]), axis=1).numpy(), 8.0, rtol=1e-3)
  # Its training keeps the decoder frozen: test_one_chain's retrofit trains this run (with
  # sampling.steps 3) and checks it, one training for both.


def test_retrofit_rejects_an_autoencoder_of_other_shapes(trained_autoencoder):
  config = retrofit_config(trained_autoencoder[0], **{'data.image_size': 32, 'data.channels': 3,
                                                      'model.gen_width': 16})
  with pytest.raises(ValueError, match=r'it has image 16x16x1, decoder width 8, '
                     r'latent \[8, 8, 1\]; config expects image 32x32x3, decoder width 16, '
                     r'latent \[16, 16, 1\]'):
    joint.JointTask(config, tf.distribute.get_strategy())
