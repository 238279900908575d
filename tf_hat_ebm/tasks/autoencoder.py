"""Deterministic autoencoder whose decoder the retrofit Hat EBM makes sampleable (paper "Retrofit").

Encoder and decoder: nets.Encoder / nets.Decoder (the latent is image-shaped at half the resolution,
on the sphere of radius sqrt(m), m its size, where N(0, I) latents also concentrate). Trained with
1000 * MSE between x and the decoding of its noisy latent sphere(E(x) + s N(0, I)),
s = training.latent_noise (the authors' release: 2e-2, added to the latent, not to the image).
"""
import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm.langevin import project_to_sphere
from tf_hat_ebm.tasks import base


def perturb_latent(z, latent_noise, rng):
  """sphere(z + latent_noise * N(0, I)): the decoder's training latent (z itself when 0).

  Training the decoder on a neighbourhood of each code smooths G over the sphere, so that gradient
  steps in Z (the retrofit's Langevin chain) can move towards data instead of stalling. The release
  decodes E(x) + noise as is; the projection keeps every training latent on the sphere.
  """
  if latent_noise <= 0:
    return z
  return project_to_sphere(learning.perturb_data(z, latent_noise, rng))


class AutoencoderTask(base.Task):
  """Encoder and decoder trained on 1000 * MSE; evaluate() gives train/test reconstruction MSE."""

  metric_names = ('loss', 'mse', 'grad_norm')
  progress_metrics = ('mse',)

  def build(self):
    self.encoder = nets.make_encoder(self.config)
    self.decoder = nets.make_decoder(self.config)
    self.networks = dict(encoder=self.encoder, decoder=self.decoder)
    self.variables = self.encoder.trainable_variables + self.decoder.trainable_variables
    self.adam('ae', self.variables, self.config.optim.ae_lr)
    self._eval_fn = None

  def replica_step(self, images):
    tcfg = self.config.training

    def loss_fn():
      z = perturb_latent(self.encoder(images), tcfg.latent_noise, self.rng)
      return learning.generator_loss(self.decoder(z), images, tcfg.recon_factor,
                                     self.global_batch)

    loss, norm = learning.apply_gradients(self.optimizers['ae'], loss_fn, self.variables)
    loss = loss * self.strategy.num_replicas_in_sync
    return dict(loss=loss, mse=loss / tcfg.recon_factor, grad_norm=norm)

  def reconstruction_mse(self, split, limit=None):
    """Mean squared error per pixel of the (noise-free) reconstructions of a split."""
    if self._eval_fn is None:
      self._eval_fn = tf.function(lambda x: tf.reduce_sum(
          tf.square(self.decoder(self.encoder(x)) - x)))
    total, count = 0.0, 0
    for x in data_lib.eval_dataset(self.config.data, split, self.config.training.batch_size):
      total += float(self._eval_fn(x))
      count += int(np.prod(x.shape))
      if limit and count >= limit * np.prod(x.shape[1:]):
        break
    return total / count

  def evaluate(self):
    tcfg, data = self.config.training, self.config.data
    return {'train_mse': self.reconstruction_mse(data.train_split, tcfg.eval_examples),
            'test_mse': self.reconstruction_mse(data.test_split)}

  def grid_samples(self, num):
    """{'x': reconstructions of the first test images, 'g_z': decoder of N(0, I) latents}."""
    test = next(iter(data_lib.eval_dataset(self.config.data, self.config.data.test_split, num)))
    self.grid_rng.reset_from_seed([self.config.seed + 1])
    z = self.grid_rng.normal([num, *self.decoder.latent_shape])
    return {'x': self.decoder(self.encoder(test)).numpy(), 'g_z': self.decoder(z).numpy()}
