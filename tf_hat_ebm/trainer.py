"""The one training loop of tf_hat_ebm: every experiment is a task run through `Trainer`.

A task owns its models, optimizers and replica-local state and exposes
  metric_names, replica_step(batch) -> {metric: scalar}, checkpoint_items(), initialize(),
  learning_rates(), grid_samples(n) -> {'x', 'g_z', 'y'} (optional; missing panels are skipped).
Optional task attributes (generic hooks, each off by default):
  batches_per_step: the iterator yields this many batches at once per step (SN-GAN: 5 D steps);
  progress_metrics: metrics shown on the progress bar (default energy_diff, gen_loss);
  evaluate() -> {metric: float}: called every config.training.eval_every steps (autoencoder).
The trainer owns everything else: the strategy-distributed input, `steps_per_loop` training steps
per host call inside one tf.function, checkpoints (resume), TensorBoard summaries, sample grids,
the progress bar, the divergence guard and clean exit on SIGTERM.

Workdir layout (score_sde's): checkpoints/, tensorboard/, samples/, config.json.
"""
import json
import os
import signal
import threading
import time

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import images as images_lib


class DivergenceError(RuntimeError):
  """A non-finite loss or energy: the run stops and nothing of that state is saved."""


class Trainer:

  def __init__(self, task, config, workdir, strategy, verbose=True):
    self.task, self.config, self.workdir, self.strategy = task, config, workdir, strategy
    self.verbose = verbose
    self.ckpt_dir = os.path.join(workdir, 'checkpoints')
    self.sample_dir = os.path.join(workdir, 'samples')
    with strategy.scope():
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name='step',
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.checkpoint = tf.train.Checkpoint(step=self.step, **task.checkpoint_items())
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.ckpt_dir, max_to_keep=config.training.keep_checkpoints,
        step_counter=self.step)
    self._stop_requested = False

  # ---- state ---------------------------------------------------------------------------------
  def restore_or_initialize(self):
    """Resumes from the latest checkpoint of the workdir, or initialises the task's state."""
    latest = self.manager.latest_checkpoint
    if latest:
      try:
        self.checkpoint.restore(latest).assert_existing_objects_matched()
      except (tf.errors.OpError, AssertionError, ValueError) as e:
        raise ValueError(f'cannot restore checkpoint {latest}: '
                         f'{str(e).strip().splitlines()[0]}') from e
      self._log(f'Resumed from {latest} at step {int(self.step.numpy())}.')
      return True
    self.task.initialize()
    return False

  def _save_config(self):
    tf.io.gfile.makedirs(self.workdir)
    path = os.path.join(self.workdir, 'config.json')
    if not tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path, 'w') as f:
        f.write(self.config.to_json_best_effort(indent=2))

  # ---- input ---------------------------------------------------------------------------------
  def _iterator(self):
    cfg, batch = self.config.data, self.config.training.batch_size
    # Tasks taking several batches per step (SN-GAN's n_dis discriminator steps) get them at once.
    batch *= getattr(self.task, 'batches_per_step', 1)
    dataset = self.strategy.distribute_datasets_from_function(
        lambda ctx: data_lib.train_dataset(cfg, batch, ctx))
    return iter(dataset)

  # ---- the loop ------------------------------------------------------------------------------
  def _make_train_loop(self):
    task, strategy, step = self.task, self.strategy, self.step
    names = task.metric_names

    @tf.function
    def train_loop(iterator, num_steps):
      totals = {k: tf.constant(0.0) for k in names}
      for _ in tf.range(num_steps):
        per_replica = strategy.run(task.replica_step, args=(next(iterator),))
        totals = {k: totals[k] + strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica[k],
                                                 axis=None) for k in names}
        step.assign_add(1)
      return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    return train_loop

  def _next_chunk(self, step, end):
    """Steps until the next event (log, checkpoint, grid, end), at most steps_per_loop."""
    t = self.config.training
    n = min(t.steps_per_loop, end - step)
    for every in (t.log_every, t.checkpoint_every, t.sample_every, _eval_every(t)):
      if every and every > 0:
        n = min(n, every - step % every)
    return max(n, 1)

  def train(self, num_steps=None):
    """Trains until `num_steps` (default config.training.num_steps) and returns the last metrics."""
    t = self.config.training
    end = int(num_steps or t.num_steps)
    self._save_config()
    self.restore_or_initialize()
    writer = tf.summary.create_file_writer(os.path.join(self.workdir, 'tensorboard'))
    iterator = self._iterator()
    train_loop = self._make_train_loop()
    step = int(self.step.numpy())
    shown = getattr(self.task, 'progress_metrics', ('energy_diff', 'gen_loss'))
    progbar = tf.keras.utils.Progbar(end, stateful_metrics=list(self.task.metric_names) +
                                     ['steps/s']) if self.verbose else None
    if progbar is not None and step:
      progbar.update(step)
    metrics = {}
    restore_handler = self._install_sigterm_handler()
    try:
      while step < end and not self._stop_requested:
        n = self._next_chunk(step, end)
        start = time.time()
        metrics = {k: float(v) for k, v in train_loop(iterator, tf.constant(n)).items()}
        rate = n / max(time.time() - start, 1e-9)
        step = int(self.step.numpy())
        self._check_finite(metrics, step)
        if progbar is not None:
          progbar.update(step, [(k, metrics[k]) for k in shown
                                if k in metrics] + [('steps/s', rate)])
        if _due(step, t.log_every) or step == end:
          with writer.as_default(step=step):
            for k, v in {**metrics, **self.task.learning_rates(), 'steps_per_sec': rate}.items():
              tf.summary.scalar(k, v)
        if hasattr(self.task, 'evaluate') and (_due(step, _eval_every(t)) or step == end):
          self.evaluate(writer, step)
        if _due(step, t.sample_every) or step == end:
          self.write_grids(writer, step)
        if _due(step, t.checkpoint_every) or step == end:
          self.manager.save(checkpoint_number=step)
      if self._stop_requested and step < end:
        self.manager.save(checkpoint_number=step)
        self._log(f'\nStopped by SIGTERM at step {step}; checkpoint written.')
    finally:
      restore_handler()
      writer.flush()
    return metrics

  # ---- outputs -------------------------------------------------------------------------------
  def evaluate(self, writer, step):
    """The task's evaluation metrics: TensorBoard under eval/ and one log line."""
    results = {k: float(v) for k, v in self.task.evaluate().items()}
    with writer.as_default(step=step):
      for k, v in results.items():
        tf.summary.scalar(f'eval/{k}', v)
    self._log(f'\nstep {step}: ' + ', '.join(f'{k} {v:.4g}' for k, v in results.items()))
    return results

  def write_grids(self, writer, step):
    if not hasattr(self.task, 'grid_samples'):
      return
    grids = self.task.grid_samples(self.config.training.num_grid_samples)
    # A task without a residual (SN-GAN, autoencoder) returns only the panels it has.
    panels = {name: images_lib.to_uint8(grids[key], magnify=magnify)
              for name, key, magnify in (('samples', 'x', 1.0), ('generator', 'g_z', 1.0),
                                         ('residual_x5', 'y', 5.0)) if key in grids}
    with writer.as_default(step=step):
      for name, imgs in panels.items():
        image = images_lib.grid(imgs)
        tf.summary.image(name, image[None], step=step)
        images_lib.write_png(os.path.join(self.sample_dir, f'{name}_{step:07d}.png'), image)

  def _check_finite(self, metrics, step):
    bad = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    if bad:
      raise DivergenceError(
          f'non-finite {", ".join(bad)} at step {step}; nothing of this state was saved; '
          f'last good checkpoint: {self.manager.latest_checkpoint or "none"}')

  def _install_sigterm_handler(self):
    if threading.current_thread() is not threading.main_thread():
      return lambda: None

    def handler(signum, frame):  # pylint: disable=unused-argument
      self._stop_requested = True

    previous = signal.signal(signal.SIGTERM, handler)
    return lambda: signal.signal(signal.SIGTERM, previous)

  def _log(self, msg):
    if self.verbose:
      print(msg, flush=True)


def _eval_every(training_cfg):
  # Only configs of tasks with an evaluation define training.eval_every.
  return training_cfg.get('eval_every', 0) or 0


def _due(step, every):
  return bool(every) and every > 0 and step % every == 0
