"""SN-GAN baseline: hinge-loss signs, a discriminator step, training, checkpoint and mismatch
errors."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import generators
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm.keras_compat import keras
from tf_hat_ebm.tasks import sngan
from tf_hat_ebm.trainer import Trainer

from conftest import tiny


def test_hinge_losses_signs():
  real, fake = tf.constant([2.0, 0.5]), tf.constant([-3.0, 0.0])
  # mean relu(1 - D(real)) + mean relu(1 + D(fake)) = (0 + 0.5)/2 + (0 + 1)/2
  np.testing.assert_allclose(sngan.discriminator_loss(real, fake, 2).numpy(), 0.75, rtol=1e-6)
  np.testing.assert_allclose(sngan.generator_loss(fake, 2).numpy(), 1.5, rtol=1e-6)
  # over a global batch of 4 (two replicas of 2), each replica's share sums to the global mean
  np.testing.assert_allclose(sngan.discriminator_loss(real, fake, 4).numpy(), 0.375, rtol=1e-6)


def test_discriminator_step_raises_d_on_data_and_lowers_it_on_samples():
  task = sngan.SNGANTask(tiny('digits_sngan', **{'optim.disc_lr': 1e-3}),
                         tf.distribute.get_strategy())
  real = tf.fill([4, 16, 16, 1], 0.1)  # D within the hinge margin (|D| < 1) on both sides
  fake = -real
  for _ in range(10):  # converge the power iterations, so the step alone moves D
    task.discriminator(real, training=True)
  before = [float(tf.reduce_mean(task.discriminator(x))) for x in (real, fake)]
  task.discriminator_step(real, fake)
  after = [float(tf.reduce_mean(task.discriminator(x))) for x in (real, fake)]
  assert after[0] > before[0] and after[1] < before[1]
  assert int(task.optimizers['disc'].iterations.numpy()) == 1
  assert int(task.optimizers['gen'].iterations.numpy()) == 0


@pytest.mark.parametrize('image_size,positions', [(16, 16), (32, 64), (64, 4)])
def test_discriminator_head_sees_the_spatial_sum_as_mimicry(image_size, positions):
  d = nets.SNDiscriminator(image_size, 3, 32).build_for_input()
  x = tf.random.stateless_normal([2, image_size, image_size, 3], [0, 1])
  h = x
  for block in d.blocks:
    h = block(h)
  assert h.shape[1] * h.shape[2] == positions == d.head.positions
  by_hand = d.head.dense(tf.reduce_sum(tf.nn.relu(h), axis=[1, 2]))[:, 0]
  np.testing.assert_allclose(d(x).numpy(), by_hand.numpy(), rtol=1e-5, atol=1e-6)
  mean_head = d.head.dense(tf.reduce_mean(tf.nn.relu(h), axis=[1, 2]))[:, 0]
  assert not np.allclose(d(x).numpy(), mean_head.numpy(), rtol=1e-2)


def test_spectral_norm_bounds_the_kernel():
  layer = nets.SpectralNormalization(keras.layers.Dense(3), power_iterations=20)
  layer(tf.ones([1, 5]), training=True)
  layer.kernel.assign(layer.kernel * 10.0)
  tf.function(lambda x: layer(x, training=True))(tf.ones([1, 5]))  # graph-safe
  np.testing.assert_allclose(np.linalg.svd(layer.kernel.numpy(), compute_uv=False)[0], 1.0,
                             rtol=1e-3)


# A graph, as the scripts train: the SN-GAN's one graph training of the fast suite (and of CI's
# current-stack run, which has no slow tests).
@pytest.mark.graph
def test_training_saves_g_and_d_and_loader_rejects_a_mismatch(tmp_path):
  config = tiny('digits_sngan', **{'training.gen_ema': 0.999, 'training.figures': True})
  strategy = tf.distribute.get_strategy()
  task = sngan.SNGANTask(config, strategy)
  trainer = Trainer(task, config, str(tmp_path), strategy, verbose=False)
  metrics = trainer.train(2)
  assert set(metrics) == set(sngan.SNGANTask.metric_names)
  assert all(np.isfinite(v) for v in metrics.values())
  assert int(task.optimizers['gen'].iterations.numpy()) == 2
  assert int(task.optimizers['disc'].iterations.numpy()) == 4
  assert sorted(os.listdir(tmp_path / 'samples')) == ['data.png', 'samples_0000002.png']
  g, d = generators.load_sngan(str(tmp_path), config)
  z = tf.random.normal([2, 4])
  # what refinement loads is the average of G's weights (training.gen_ema), not G as trained
  assert config.training.gen_ema > 0
  np.testing.assert_allclose(g(z).numpy(), task.sampler(z).numpy(), rtol=1e-5, atol=1e-6)
  assert not np.allclose(g(z).numpy(), task.generator(z).numpy(), rtol=1e-3)
  assert not g.trainable and not d.trainable
  x = tf.random.normal([2, 16, 16, 1])
  np.testing.assert_allclose(d(x).numpy(), task.discriminator(x).numpy(), rtol=1e-5, atol=1e-6)
  wrong = tiny('digits_sngan', **{'model.z_dim': 8, 'model.gen_width': 16,
                                  'data.image_size': 32, 'data.channels': 3})
  with pytest.raises(ValueError, match=r'checkpoint has image 16x16x1, generator width 8, '
                     r'latent \[4\]; config expects image 32x32x3, generator width 16, '
                     r'latent \[8\]'):
    generators.load_sngan(str(tmp_path), wrong)


def test_ema_decay_warms_up_as_tensorflows_moving_average():
  np.testing.assert_allclose([float(learning.ema_decay(0.999, n)) for n in (0, 1, 90, 10**6)],
                             [0.1, 2 / 11, 0.91, 0.999], rtol=1e-6)


def test_ema_update_averages_trainable_weights_and_copies_statistics(two_replicas):
  def build():
    model = keras.Sequential([keras.layers.Dense(3), keras.layers.BatchNormalization()])
    model.build([None, 2])
    return model

  with two_replicas.scope():
    model = build()
    average = learning.ema_variables(build)
  model.layers[1].moving_mean.assign([1.0, 2.0, 3.0])
  before = [w.numpy() for w in average.trainable_weights]
  two_replicas.run(tf.function(lambda: learning.ema_update(average, model, 0.75)))
  for b, a, w in zip(before, average.trainable_weights, model.trainable_weights):
    np.testing.assert_allclose(a.numpy(), 0.75 * b + 0.25 * w.numpy(), rtol=1e-6)
  np.testing.assert_allclose(average.layers[1].moving_mean.numpy(), [1.0, 2.0, 3.0])
