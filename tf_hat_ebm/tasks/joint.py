"""Joint Hat EBM over a frozen generator: refinement of a pretrained GAN, retrofit of a decoder.

Energy U(Y, Z) = H(G(Z) + Y)/T with G frozen (inference mode) and only the hat network H trained.
Per training step, on every replica:
  X+ = data + data_eps * N(0, I);  (Z_K, Y_K) by K alternating Langevin iterations (Y then Z) from
  Y0 = 0, Z0 ~ N(0, I);  X- = G(Z_K) + Y_K;  theta <- Adam(grad (mean H(X+) - mean H(X-))/T).
The generator is named in `config.generator` (generators.py).
"""

import tensorflow as tf

from tf_hat_ebm import generators
from tf_hat_ebm import langevin
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tf_hat_ebm.keras_compat import keras
from tf_hat_ebm.tasks import base


def networks(config, strategy=None, generator=None):
  """(H, G, D or None, precision, reason): the frozen G first, so a wrong one fails early; H, G
  and D computing in the config's precision (a SavedModel generator in its own, said in reason)."""
  precision, reason = nets.resolve_precision(config.perf.precision, strategy)
  discriminator = None
  if generator is None:
    generator, discriminator = generators.load(config, precision)
  compute = getattr(generator, 'compute_dtype', tf.float32)
  if compute != keras.mixed_precision.Policy(precision).compute_dtype:
    reason += f'; the frozen generator computes in {compute.name} (its own precision)'
  hat = nets.with_precision(precision, lambda: nets.make_hat(
      config.model, config.data.image_size, config.data.channels))
  return hat, generator, discriminator, precision, reason


def inference_model(config, generator=None):
  """H, the frozen G (and the SN-GAN's D), in the config's precision."""
  hat, generator, discriminator, precision, _ = networks(config, tf.distribute.get_strategy(),
                                                         generator)
  # The generator is not saved with the run: it is frozen and comes from config.generator.
  return base.InferenceModel(hat, generator, langevin.ChainSettings.from_config(config.sampling),
                             saved=dict(hat=hat), discriminator=discriminator,
                             precision=precision)


class JointTask(base.HatTask):
  """A hat network trained with the joint sampler over a frozen generator."""

  metric_names = ('energy_diff', 'ebm_loss', 'hat_grad_norm', 'latent_grad_norm',
                  'residual_grad_norm', 'latent_abs', 'residual_abs', 'energy_pos', 'energy_neg')
  progress_metrics = ('energy_diff', 'residual_abs')

  def __init__(self, config, strategy, generator=None):
    """generator: a frozen generator to use instead of config.generator's (tests, benchmarks)."""
    self._given_generator = generator
    super().__init__(config, strategy)

  def build(self):
    # The precision is reported at the start of training and recorded in run_info.json.
    (self.hat, self.generator, self.discriminator, self.precision,
     self.precision_reason) = networks(self.config, self.strategy, self._given_generator)
    self.networks = dict(hat=self.hat)  # G is frozen and comes from config.generator
    self.adam('hat', self.hat.trainable_variables,
              optim.network_schedule(self.config.optim, 'hat'))

  def replica_step(self, images):
    return self.ebm_step(images)[2]
