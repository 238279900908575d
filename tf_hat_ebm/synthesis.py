"""Tandem training of a conditional Hat EBM and its generator (paper Alg. 1, "Synthesis").

Per training step, on every replica:
  EBM:        X+ = data + data_eps * N(0, I);  Z ~ N(0, I);  Y_K by K conditional Langevin steps
              from Y_0;  X- = G(Z; phi_{t-1}) + Y_K;  theta <- Adam(grad (mean H(X+) - mean H(X-))/T)
  Generator:  B distinct bank entries (Z_i, X_i);  phi <- Adam(grad 1000 * mean (G(Z_i) - X_i)^2)
  Bank:       those B entries overwritten with this step's (Z, X-).
"""
import tensorflow as tf

from tf_hat_ebm import bank as bank_lib
from tf_hat_ebm import langevin
from tf_hat_ebm import learning
from tf_hat_ebm import nets
from tf_hat_ebm import optim
from tpu_utils.strategy import check_batch_split

GENERATOR_UPDATES = ('bank', 'current')


class SynthesisTask:
  """Models, optimizers, bank and the per-replica training step of the tandem Hat EBM."""

  metric_names = ('energy_diff', 'ebm_loss', 'gen_loss', 'hat_grad_norm', 'gen_grad_norm',
                  'residual_grad_norm', 'residual_abs', 'energy_pos', 'energy_neg')

  def __init__(self, config, strategy):
    self.config, self.strategy = config, strategy
    tcfg = config.training
    if tcfg.generator_update not in GENERATOR_UPDATES:
      raise ValueError(f'training.generator_update must be one of {GENERATOR_UPDATES}, '
                       f'not {tcfg.generator_update!r}')
    for net in ('hat', 'gen'):
      learning.check_clip_mode(config.optim[f'{net}_clip_mode'], f'optim.{net}_clip_mode')
    self.global_batch = tcfg.batch_size
    self.batch = check_batch_split(tcfg.batch_size, strategy)
    self.settings = langevin.LangevinSettings.from_config(config.langevin)
    self.sampling_settings = langevin.LangevinSettings.from_config(config.sampling)
    data = config.data
    self.image_shape = (data.image_size, data.image_size, data.channels)
    bank_size = (bank_lib.entries_per_replica(tcfg.bank_size, strategy.num_replicas_in_sync,
                                              self.batch)
                 if tcfg.generator_update == 'bank' else None)
    self.perf = config.perf
    tf.keras.utils.set_random_seed(config.seed)  # same seed, same initial networks
    with strategy.scope():
      # Reported at the start of training and recorded in the workdir's run_info.json.
      self.precision, self.precision_reason = nets.resolve_precision(config.perf.precision,
                                                                     strategy)
      self.hat, self.generator = nets.with_precision(self.precision, lambda: (
          nets.make_hat(config.model, data.image_size, data.channels),
          nets.make_generator(config.model, data.image_size, data.channels)))
      # One factor on both learning rates; a divergence rollback lowers it (trainer.py).
      self.lr_scale = tf.Variable(1.0, trainable=False, name='lr_scale')
      self.hat_opt = optim.make_adam(config.optim, optim.network_schedule(config.optim, 'hat'),
                                     self.hat.trainable_variables, self.lr_scale)
      self.gen_opt = optim.make_adam(config.optim, optim.network_schedule(config.optim, 'gen'),
                                     self.generator.trainable_variables, self.lr_scale)
      self.rng = tf.random.Generator.from_seed(config.seed)
      self.grid_rng = tf.random.Generator.from_seed(config.seed + 1)
      self.bank = (bank_lib.Bank(bank_size, self.generator.latent_shape, self.image_shape)
                   if bank_size else None)

  # ---- state ---------------------------------------------------------------------------------
  def checkpoint_items(self):
    """Replicated state: networks, optimizers, RNG, learning-rate scale."""
    return dict(hat=self.hat, generator=self.generator, hat_optimizer=self.hat_opt,
                gen_optimizer=self.gen_opt, rng=self.rng, lr_scale=self.lr_scale)

  def local_checkpoint_items(self):
    """Replica-local state: each replica's part of the bank."""
    return self.bank.checkpoint_items(self.strategy) if self.bank is not None else {}

  def initialize(self):
    """Fresh start: the bank holds Z ~ N(0, I), X = G(Z; phi_0)."""
    if self.bank is not None:
      tf.function(lambda: self.strategy.run(
          lambda: self.bank.fill(self.generator, self.rng, self.batch)))()

  def learning_rates(self):
    return {'hat_lr': optim.current_learning_rate(self.hat_opt),
            'gen_lr': optim.current_learning_rate(self.gen_opt)}

  # ---- training step (replica context) -------------------------------------------------------
  # Traced as plain TF, without AutoGraph: the code below has no tensor-dependent Python control
  # flow (the chain is a tf.while_loop), and converting it took over half of the tracing time.
  @tf.autograph.experimental.do_not_convert
  def replica_step(self, images):
    tcfg, ocfg = self.config.training, self.config.optim
    x_pos = learning.perturb_data(images, tcfg.data_eps, self.rng)
    z = self.rng.normal([self.batch, *self.generator.latent_shape])
    g_z = self.generator(z)  # G(Z; phi_{t-1}): once per chain, Z stays fixed
    y, diag = self._sampler(g_z, z)
    x_neg = tf.stop_gradient(g_z + y)

    ebm_value, hat_norm, e_pos, e_neg = learning.ebm_update(
        self.hat, self.hat_opt, x_pos, x_neg, self.settings.temperature, self.global_batch,
        ocfg.hat_clip_norm, ocfg.hat_clip_mode)

    if self.bank is not None:
      indices = self.bank.choose(self.rng, self.batch)
      z_target, x_target = self.bank.read(indices)
    else:  # ablation: the generator follows the current samples only
      z_target, x_target = z, x_neg

    gen_value, gen_norm = learning.apply_gradients(
        self.gen_opt,
        lambda: learning.generator_loss(self.generator(z_target), x_target,
                                        tcfg.gen_loss_factor, self.global_batch),
        self.generator.trainable_variables, ocfg.gen_clip_norm, ocfg.gen_clip_mode)

    if self.bank is not None:
      self.bank.overwrite(indices, z, x_neg)

    replicas = self.strategy.num_replicas_in_sync
    return dict(energy_diff=e_pos - e_neg, ebm_loss=ebm_value * replicas,
                gen_loss=gen_value * replicas, hat_grad_norm=hat_norm, gen_grad_norm=gen_norm,
                residual_grad_norm=diag['residual_grad_norm'], residual_abs=diag['residual_abs'],
                energy_pos=e_pos, energy_neg=e_neg)

  def _sampler(self, g_z, z):
    """The training chain, with the perf options: XLA, or the release's G(Z)-per-step baseline."""
    generator_fn = (lambda: self.generator(z)) if self.perf.recompute_generator else None

    def chain(g_z):
      return langevin.sample_conditional(self.hat, g_z, self.rng, self.settings,
                                         generator_fn=generator_fn)

    if self.perf.jit_sampler:
      chain = tf.function(chain, jit_compile=True)
    return chain(g_z)

  # ---- samples -------------------------------------------------------------------------------
  @tf.autograph.experimental.do_not_convert  # as replica_step
  def replica_sample(self, rng, num, settings):
    """X = G(Z) + Y_K for num fresh latents: returns (X, G(Z), Y) on this replica."""
    z = rng.normal([num, *self.generator.latent_shape])
    g_z = self.generator(z)
    y, _ = langevin.sample_conditional(self.hat, g_z, rng, settings)
    return g_z + y, g_z, y

  def grid_samples(self, num):
    """Fixed-seed samples of the training chain for image grids: {'x', 'g_z', 'y'} numpy."""
    self.grid_rng.reset_from_seed(self.config.seed + 1)
    if getattr(self, '_grid_fn', None) is None:
      self._grid_fn = tf.function(lambda n: self.strategy.run(
          lambda: self.replica_sample(self.grid_rng, n, self.settings)))
    out = [self.strategy.experimental_local_results(t)[0].numpy() for t in self._grid_fn(num)]
    return dict(zip(('x', 'g_z', 'y'), out))
