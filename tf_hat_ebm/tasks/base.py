"""The task contract: what a task gives the one training loop (trainer.py), written once.

A task owns its networks, optimizers, RNG and replica-local state; the trainer owns everything
else (distributed input, the loop, checkpoints, summaries, grids, guards). `HatTask` adds what the
Hat EBM tasks share: the hat network, its update step (`ebm_step`), the training and sampling
chains.
"""
import dataclasses
from typing import Any, Dict, Optional

import tensorflow as tf

from tf_hat_ebm import langevin
from tf_hat_ebm import learning
from tf_hat_ebm import optim
from tf_hat_ebm.keras_compat import keras
from tpu_utils.strategy import check_batch_split


class Task:
  """Base class of every task. Subclasses set the class attributes and implement `build` and
  `replica_step`; the other methods have defaults that a task overrides only when it has more."""

  metric_names = ()          # the keys of replica_step's result, in this order
  progress_metrics = ()      # shown on the progress bar
  batches_per_step = 1       # batches the input yields per step (SN-GAN: its n_dis D steps)
  # The compute precision and why (nets.resolve_precision), reported and recorded in
  # run_info.json by tasks that choose one.
  precision = precision_reason = None

  def __init__(self, config, strategy):
    self.config, self.strategy = config, strategy
    self.global_batch = config.training.batch_size
    self.batch = check_batch_split(config.training.batch_size, strategy)  # per replica
    keras.utils.set_random_seed(config.seed)  # same seed, same initial networks
    with strategy.scope():
      # One factor on every learning rate; a divergence rollback lowers it (trainer.py).
      self.lr_scale = tf.Variable(1.0, trainable=False, name='lr_scale')
      # Seeds as 1-element lists: the seed becomes Philox's key, as a seed tensor does (the
      # exported sample(seed)). A bare Python int becomes the counter instead, and seeds s and
      # s + 1 then draw one stream shifted by a block (TensorFlow's _make_1d_state).
      self.rng = tf.random.Generator.from_seed([config.seed])
      self.grid_rng = tf.random.Generator.from_seed([config.seed + 1])
      self.networks: Dict[str, Any] = {}    # checkpoint name -> network that trains or is saved
      self.optimizers: Dict[str, Any] = {}  # network short name ('hat') -> its Adam
      self.build()

  # ---- to implement --------------------------------------------------------------------------
  def build(self):
    """Creates the networks and optimizers (called inside the strategy's scope)."""
    raise NotImplementedError

  def replica_step(self, batch):
    """One training step on this replica's batch: {metric name: scalar}."""
    raise NotImplementedError

  # ---- defaults ------------------------------------------------------------------------------
  def adam(self, name, variables, learning_rate):
    """The Adam optimizer of network `name` (checkpointed as <name>_optimizer, logged as
    <name>_lr), scaled by lr_scale."""
    self.optimizers[name] = optim.make_adam(self.config.optim, learning_rate, variables,
                                            self.lr_scale)
    return self.optimizers[name]

  def checkpoint_items(self):
    """Replicated state: networks, optimizers, RNG and learning-rate scale."""
    return dict(**self.networks, **{f'{k}_optimizer': o for k, o in self.optimizers.items()},
                rng=self.rng, lr_scale=self.lr_scale)

  def local_checkpoint_items(self):
    """Replica-local state (each replica's part of the synthesis bank)."""
    return {}

  def initialize(self):
    """State of a fresh start that is not the networks' initialisation (the bank)."""

  def learning_rates(self):
    return {f'{k}_lr': optim.current_learning_rate(o) for k, o in self.optimizers.items()}

  def evaluate(self):
    """{metric: float} every training.eval_every steps; none by default."""
    return {}

  def grid_samples(self, num):
    """Fixed-seed images for the grids: {'x'[, 'g_z', 'y']} numpy; missing panels are skipped."""
    return {}


@dataclasses.dataclass
class InferenceModel:
  """A Hat EBM to sample and score with: what evaluation and export restore from a workdir."""
  hat: Any
  generator: Any
  sampling: langevin.ChainSettings           # the config's `sampling` chain
  saved: Dict[str, Any]                      # checkpoint name -> network restored from the run
  discriminator: Optional[Any] = None        # the SN-GAN's D of a refinement (DDLS)
  precision: str = 'float32'                 # the Keras policy the networks compute in

  def checkpoint_items(self):
    return dict(self.saved)


class HatTask(Task):
  """What the synthesis and joint tasks share: H, its update, the chains, grids and samples."""

  progress_metrics = ('energy_diff',)

  def __init__(self, config, strategy):
    learning.check_clip_mode(config.optim.hat_clip_mode, 'optim.hat_clip_mode')
    self.settings = langevin.ChainSettings.from_config(config.langevin)
    self.sampling_settings = langevin.ChainSettings.from_config(config.sampling)
    self._grid_fn = None
    super().__init__(config, strategy)

  def ebm_step(self, images):
    """The Hat EBM update of every Hat EBM task, on this replica's batch:
      X+ = data + data_eps * N(0, I);  (Z, Y_K) by the training chain;  X- = G(Z) + Y_K;
      theta <- Adam(grad (mean H(X+) - mean H(X-)) / T).
    Returns (Z, X-, metrics): energy_diff, ebm_loss, hat_grad_norm, energy_pos, energy_neg and the
    chain's diagnostics."""
    ocfg = self.config.optim
    x_pos = learning.perturb_data(images, self.config.training.data_eps, self.rng)
    z, y, g_z, diag = self.chain(self.rng, self.batch, self.settings)
    x_neg = tf.stop_gradient(g_z + y)
    ebm_value, hat_norm, e_pos, e_neg = learning.ebm_update(
        self.hat, self.optimizers['hat'], x_pos, x_neg, self.settings.temperature,
        self.global_batch, ocfg.hat_clip_norm, ocfg.hat_clip_mode)
    return z, x_neg, dict(energy_diff=e_pos - e_neg,
                          ebm_loss=ebm_value * self.strategy.num_replicas_in_sync,
                          hat_grad_norm=hat_norm, energy_pos=e_pos, energy_neg=e_neg, **diag)

  def chain(self, rng, num, settings, z0=None):
    """The chain `settings` describes from fresh latents (or z0): (Z_K, Y_K, G(Z_K), diag)."""
    return langevin.sample(self.hat, self.generator, rng, settings, batch_size=num, z0=z0)

  @tf.autograph.experimental.do_not_convert  # plain TF: the chain is a tf.while_loop
  def replica_sample(self, rng, num, settings, z0=None):
    """{'x': G(Z_K) + Y_K, 'g_z', 'y', 'z'} of `num` chains on this replica."""
    z, y, g_z, _ = self.chain(rng, num, settings, z0)
    return dict(x=g_z + y, g_z=g_z, y=y, z=z)

  def grid_samples(self, num):
    """Fixed-seed samples of the training chain for the image grids."""
    self.grid_rng.reset_from_seed([self.config.seed + 1])
    if self._grid_fn is None:
      self._grid_fn = tf.function(lambda n: self.strategy.run(
          lambda: self.replica_sample(self.grid_rng, n, self.settings)))
    out = self._grid_fn(num)
    return {k: self.strategy.experimental_local_results(out[k])[0].numpy()
            for k in ('x', 'g_z', 'y')}
