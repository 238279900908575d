"""Tandem training of a conditional Hat EBM and its generator (paper Alg. 1, "Synthesis").

Per training step, on every replica:
  EBM:        X+ = data + data_eps * N(0, I);  Z ~ N(0, I);  Y_K by K conditional Langevin steps
              from Y_0;  X- = G(Z; phi_{t-1}) + Y_K;
              theta <- Adam(grad (mean H(X+) - mean H(X-)) / T)
  Generator:  B distinct bank entries (Z_i, X_i);  phi <- Adam(grad 1000 * mean (G(Z_i) - X_i)^2)
  Bank:       those B entries overwritten with this step's (Z, X-).
training.generator_update 'current' (ablation) fits G to this step's (Z, X-) instead. The
cooperative-learning arms of the paper's appendix ("Historical Generator Update"; Xie et al.'s
CoopNets, with Z0 in place of an inferred Z_K) make the same fit to the current samples:
'cooperative' without batch norm (the Hat EBM's generator, whose normalisation has the fixed
statistics 0 / 1: the update of 'current'), 'cooperative_bn' with it: the generator normalises with
batch statistics both where it starts the chain, G(Z), and where it is fitted (the paper: batch
norm is what keeps cooperative learning from collapsing).
"""
import ml_collections
import tensorflow as tf

from tf_hat_ebm import bank as bank_lib
from tf_hat_ebm import langevin
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tf_hat_ebm import validation
from tf_hat_ebm.tasks import base

GENERATOR_UPDATES = validation.GENERATOR_UPDATES
BATCH_NORM_UPDATES = nets.BATCH_NORM_UPDATES  # the generator normalises with batch statistics


def networks(config, strategy=None):
  """(H, G) of the config, built in its precision; with the precision and why."""
  data = config.data
  precision, reason = nets.resolve_precision(config.perf.precision, strategy)
  gen_model = config.model
  if nets.synthesis_gen_batch_stats(config):
    gen_model = ml_collections.ConfigDict(dict(config.model.to_dict(), gen_batch_stats=True))
  hat, generator = nets.with_precision(precision, lambda: (
      nets.make_hat(config.model, data.image_size, data.channels),
      nets.make_generator(gen_model, data.image_size, data.channels)))
  return hat, generator, precision, reason


def inference_model(config):
  hat, generator, precision, _ = networks(config, tf.distribute.get_strategy())
  return base.InferenceModel(hat, generator, langevin.ChainSettings.from_config(config.sampling),
                             saved=dict(hat=hat, generator=generator), precision=precision)


class SynthesisTask(base.HatTask):
  """Networks, optimizers, bank and the per-replica training step of the tandem Hat EBM."""

  metric_names = ('energy_diff', 'ebm_loss', 'gen_loss', 'hat_grad_norm', 'gen_grad_norm',
                  'residual_grad_norm', 'residual_abs', 'energy_pos', 'energy_neg')
  progress_metrics = ('energy_diff', 'gen_loss')

  def build(self):
    config, tcfg = self.config, self.config.training
    if tcfg.generator_update not in GENERATOR_UPDATES:
      raise ValueError(f'training.generator_update must be one of {GENERATOR_UPDATES}, '
                       f'not {tcfg.generator_update!r}')
    learning.check_clip_mode(config.optim.gen_clip_mode, 'optim.gen_clip_mode')
    self.perf = config.perf
    # The precision is reported at the start of training and recorded in run_info.json.
    self.hat, self.generator, self.precision, self.precision_reason = networks(config,
                                                                               self.strategy)
    self.networks = dict(hat=self.hat, generator=self.generator)
    for name, network in (('hat', self.hat), ('gen', self.generator)):
      self.adam(name, network.trainable_variables, optim.network_schedule(config.optim, name))
    self.bank = None
    if tcfg.generator_update == 'bank':
      data = config.data
      size = bank_lib.entries_per_replica(tcfg.bank_size, self.strategy.num_replicas_in_sync,
                                          self.batch)
      self.bank = bank_lib.Bank(size, self.generator.latent_shape,
                                (data.image_size, data.image_size, data.channels))

  def local_checkpoint_items(self):
    """Each replica's part of the bank."""
    return self.bank.checkpoint_items(self.strategy) if self.bank is not None else {}

  def initialize(self):
    """Fresh start: the bank holds Z ~ N(0, I), X = G(Z; phi_0)."""
    if self.bank is not None:
      tf.function(lambda: self.strategy.run(
          lambda: self.bank.fill(self.generator, self.rng, self.batch)))()

  def chain(self, rng, num, settings, z0=None):
    """The chain with the perf options: XLA, or the release's G(Z)-per-step baseline."""
    batch_stats = self.config.training.generator_update in BATCH_NORM_UPDATES

    def run(z):
      generator_fn = ((lambda: self.generator(z, training=batch_stats))
                      if self.perf.recompute_generator else None)
      return langevin.sample(self.hat, self.generator, rng, settings, z0=z,
                             generator_fn=generator_fn, generator_training=batch_stats)

    if self.perf.jit_sampler:
      run = tf.function(run, jit_compile=True)
    z = langevin.initial_latent(self.generator, rng, settings, num, z0)
    return run(z)

  # Traced as plain TF, without AutoGraph: the code below has no tensor-dependent Python control
  # flow (the chain is a tf.while_loop), and converting it took over half of the tracing time.
  @tf.autograph.experimental.do_not_convert
  def replica_step(self, images):
    """The EBM step (base.HatTask.ebm_step), then the generator's step towards the bank."""
    tcfg, ocfg = self.config.training, self.config.optim
    z, x_neg, metrics = self.ebm_step(images)  # Z fixed along the conditional chain
    if self.bank is not None:
      indices = self.bank.choose(self.rng, self.batch)
      z_target, x_target = self.bank.read(indices)
    else:  # ablation and cooperative learning: the generator follows the current samples only
      z_target, x_target = z, x_neg
    # Batch statistics in the fit as in the chain's start (and the moving statistics updated)
    batch_stats = tcfg.generator_update in BATCH_NORM_UPDATES

    gen_value, gen_norm = learning.apply_gradients(
        self.optimizers['gen'],
        lambda: learning.generator_loss(self.generator(z_target, training=batch_stats), x_target,
                                        tcfg.gen_loss_factor, self.global_batch),
        self.generator.trainable_variables, ocfg.gen_clip_norm, ocfg.gen_clip_mode)

    if self.bank is not None:
      self.bank.overwrite(indices, z, x_neg)

    return dict(metrics, gen_loss=gen_value * self.strategy.num_replicas_in_sync,
                gen_grad_norm=gen_norm)
