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

Workdir layout (score_sde's): checkpoints/, tensorboard/, samples/, config.json; run_info.json
(run_info.py) records the precision, hardware and timing of every run.
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
from tf_hat_ebm import run_info


class DivergenceError(RuntimeError):
  """A non-finite loss or energy: the run stops and nothing of that state is saved."""


class Trainer:

  def __init__(self, task, config, workdir, strategy, verbose=True, allow_config_change=False):
    self.task, self.config, self.workdir, self.strategy = task, config, workdir, strategy
    self.verbose, self.allow_config_change = verbose, allow_config_change
    self.ckpt_dir = os.path.join(workdir, 'checkpoints')
    self.sample_dir = os.path.join(workdir, 'samples')
    with strategy.scope():
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name='step',
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    self.num_workers, self.worker_index, self.is_chief = worker_info(strategy)
    keep = config.training.keep_checkpoints
    local_items = task.local_checkpoint_items() if hasattr(task, 'local_checkpoint_items') else {}
    if self.num_workers == 1:
      # One checkpoint holds everything, replica-local parts (the bank) included.
      self.checkpoint = tf.train.Checkpoint(step=self.step, **task.checkpoint_items(),
                                            **local_items)
      self.local_checkpoint = self.local_manager = None
      write_dir = self.ckpt_dir
    else:
      # Multi-worker: the chief writes the replicated state to checkpoints/, the others to a
      # temporary directory they delete (tf.distribute's convention). Replica-local state differs
      # per worker, so every worker also keeps its own checkpoints/local/worker<i>/.
      self.checkpoint = tf.train.Checkpoint(step=self.step, **task.checkpoint_items())
      self.local_checkpoint = tf.train.Checkpoint(**local_items)
      self.local_manager = tf.train.CheckpointManager(
          self.local_checkpoint, os.path.join(self.ckpt_dir, 'local', f'worker{self.worker_index}'),
          max_to_keep=keep, step_counter=self.step)
      write_dir = (self.ckpt_dir if self.is_chief else
                   os.path.join(self.ckpt_dir, f'.tmp_worker{self.worker_index}'))
    self.manager = tf.train.CheckpointManager(self.checkpoint, write_dir, max_to_keep=keep,
                                              step_counter=self.step)
    # Archived snapshots of the replicated state, never deleted (score_sde's checkpoints-meta vs
    # checkpoints split), written by the chief only.
    self.archive = (tf.train.CheckpointManager(
        self.checkpoint, os.path.join(self.ckpt_dir, 'archive'), max_to_keep=None,
        step_counter=self.step) if self.is_chief else None)
    self._stop_requested = False
    self._rollbacks = 0

  # ---- state ---------------------------------------------------------------------------------
  def latest_checkpoint(self):
    return tf.train.latest_checkpoint(self.ckpt_dir)

  def restore_or_initialize(self):
    """Resumes from the latest checkpoint of the workdir, or initialises the task's state."""
    latest = self.latest_checkpoint()
    if latest:
      self._restore(latest)
      self._log(f'Resumed from {latest} at step {int(self.step.numpy())}.')
      return True
    self.task.initialize()
    return False

  def _restore(self, path):
    try:
      self.checkpoint.restore(path).assert_existing_objects_matched()
      if self.local_checkpoint is not None:
        local = os.path.join(self.local_manager.directory, os.path.basename(path))
        if not tf.io.gfile.exists(local + '.index'):
          raise ValueError(f'replica-local state {local} of this worker is missing')
        self.local_checkpoint.restore(local).assert_existing_objects_matched()
    except (tf.errors.OpError, AssertionError, ValueError, IndexError) as e:
      # IndexError: what TF's reader raises on a truncated file ("Read less bytes than requested").
      detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      raise ValueError(f'cannot restore checkpoint {path} (corrupt or truncated?): {detail}; '
                       'it was left as it is') from e

  def save(self, step):
    """Writes a checkpoint of the current (finite) state at `step`, on every worker."""
    if self.local_manager is not None:
      self.local_manager.save(checkpoint_number=step)
    self.manager.save(checkpoint_number=step)
    if not self.is_chief:
      tf.io.gfile.rmtree(self.manager.directory)

  def _save_config(self):
    """Writes config.json; refuses a workdir made by a config with other networks or data."""
    try:
      tf.io.gfile.makedirs(self.workdir)
    except tf.errors.OpError as e:
      raise PermissionError(f'cannot create workdir {self.workdir}: {e.message}') from e
    path = os.path.join(self.workdir, 'config.json')
    if tf.io.gfile.exists(path) and self.latest_checkpoint():
      with tf.io.gfile.GFile(path) as f:
        previous = json.load(f)
      current = json.loads(self.config.to_json_best_effort())
      changed = [f'{k}: {_lookup(previous, k)!r} -> {_lookup(current, k)!r}'
                 for k in STRUCTURAL_KEYS if _lookup(previous, k) != _lookup(current, k)]
      if changed and not self.allow_config_change:
        raise ValueError(f'workdir {self.workdir} was made by a different config '
                         f'({"; ".join(changed)}); use a new --workdir, or '
                         '--allow_config_change to resume anyway')
    if not self.is_chief:
      return
    try:
      with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
        f.write(self.config.to_json_best_effort(indent=2))
      tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
    except tf.errors.OpError as e:
      raise PermissionError(f'cannot write to workdir {self.workdir}: {e.message}') from e

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
    for every in (t.log_every, t.checkpoint_every, t.sample_every, t.archive_every,
                  _eval_every(t)):
      if every and every > 0:
        n = min(n, every - step % every)
    return max(n, 1)

  def train(self, num_steps=None):
    """Trains until `num_steps` (default config.training.num_steps) and returns the last metrics."""
    t = self.config.training
    end = int(num_steps or t.num_steps)
    run = run_info.Run(self.workdir, write=self.is_chief, log=self._log)
    self._save_config()
    iterator = self._iterator()
    if t.checkpoint_data_iterator:
      # The input position is part of the state: a resumed run reads the batches it would have.
      # Each worker reads its own shard, so with several workers it is worker-local state.
      (self.local_checkpoint or self.checkpoint).data_iterator = iterator
    self.restore_or_initialize()
    run.start(self.task, self.strategy, self.step.numpy())
    writer = (tf.summary.create_file_writer(os.path.join(self.workdir, 'tensorboard'))
              if self.is_chief else tf.summary.create_noop_writer())
    train_loop = self._make_train_loop()
    step = int(self.step.numpy())
    shown = getattr(self.task, 'progress_metrics', ('energy_diff', 'gen_loss'))
    progbar = tf.keras.utils.Progbar(end, stateful_metrics=list(self.task.metric_names) +
                                     ['steps/s']) if self.verbose and self.is_chief else None
    if progbar is not None and step:
      progbar.update(step)
    metrics = {}
    restore_handler = self._install_sigterm_handler()
    try:
      while step < end and not self._stop_requested:
        n = self._next_chunk(step, end)
        start = time.time()
        with run.steps(n):
          metrics = {k: float(v) for k, v in train_loop(iterator, tf.constant(n)).items()}
        rate = n / max(time.time() - start, 1e-9)
        step = int(self.step.numpy())
        try:
          self._check_finite(metrics, step)
        except DivergenceError as e:
          if not self._rollback(e):
            raise
          step = int(self.step.numpy())
          continue
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
          self.save(step)
        if self.archive is not None and _due(step, t.archive_every):
          self.archive.save(checkpoint_number=step)
      if self._stop_requested and step < end:
        self.save(step)
        self._log(f'\nStopped by SIGTERM at step {step}; checkpoint written.')
    finally:
      restore_handler()
      writer.flush()
    run.finish(step)
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
    if not self.is_chief:
      return
    with writer.as_default(step=step):
      for name, imgs in panels.items():
        image = images_lib.grid(imgs)
        tf.summary.image(name, image[None], step=step)
        images_lib.write_png(os.path.join(self.sample_dir, f'{name}_{step:07d}.png'), image)

  def _rollback(self, error):
    """Restores the last good checkpoint and lowers the learning rates; False if it may not."""
    t = self.config.training
    latest = self.latest_checkpoint()
    if (not t.rollback_on_divergence or latest is None or
        self._rollbacks >= t.max_rollbacks or not hasattr(self.task, 'lr_scale')):
      return False
    self._rollbacks += 1
    self._restore(latest)
    self.task.lr_scale.assign(self.task.lr_scale * t.rollback_lr_factor)
    self._log(f'\n{error}\nRolled back to {latest} (step {int(self.step.numpy())}); '
              f'learning rates x{float(self.task.lr_scale.numpy()):g} '
              f'(rollback {self._rollbacks} of {t.max_rollbacks}).')
    return True

  def _check_finite(self, metrics, step):
    bad = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    if bad:
      raise DivergenceError(
          f'non-finite {", ".join(bad)} at step {step}; nothing of this state was saved; '
          f'last good checkpoint: {self.latest_checkpoint() or "none"}')

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


def worker_info(strategy):
  """(number of workers, this worker's index, is chief) of a strategy; (1, 0, True) if local."""
  resolver = getattr(strategy, 'cluster_resolver', None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
    return 1, 0, True
  spec = resolver.cluster_spec().as_dict()
  workers, chiefs = len(spec.get('worker', [])), len(spec.get('chief', []))
  if workers + chiefs <= 1:
    return 1, 0, True
  task_type, task_id = resolver.task_type, int(resolver.task_id or 0)
  is_chief = task_type == 'chief' or (task_type == 'worker' and task_id == 0 and not chiefs)
  index = task_id + (chiefs if task_type == 'worker' else 0)
  return workers + chiefs, index, is_chief


# Config fields that decide the shapes in a checkpoint, or what the run means: a workdir made with
# other values is not resumed (other fields, e.g. num_steps or logging, may change on resume).
STRUCTURAL_KEYS = ('experiment', 'data.name', 'data.image_size', 'data.channels', 'model',
                   'training.batch_size', 'training.bank_size', 'training.generator_update',
                   'langevin.temperature')


def _lookup(tree, dotted):
  for key in dotted.split('.'):
    tree = tree.get(key) if isinstance(tree, dict) else None
  return tree


def _eval_every(training_cfg):
  # Only configs of tasks with an evaluation define training.eval_every.
  return training_cfg.get('eval_every', 0) or 0


def _due(step, every):
  return bool(every) and every > 0 and step % every == 0
