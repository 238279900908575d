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
the progress bar, the divergence guards (non-finite values; a finite runaway, guard.py), the
workdir lock and clean exit on SIGTERM.

Workdir layout (score_sde's): checkpoints/, tensorboard/, samples/, config.json, train.lock;
run_info.json (run_info.py) records the precision, hardware and timing of every run.
"""
import contextlib
import json
import os
import signal
import threading
import time

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import guard as guard_lib
from tf_hat_ebm import images as images_lib
from tf_hat_ebm import run_info
from tf_hat_ebm import workdir as workdir_lib


class DivergenceError(RuntimeError):
  """A non-finite loss, energy or state: the run stops and nothing of that state is saved."""


class RunawayError(DivergenceError):
  """The runaway guard fired: finite metrics running away."""


class Trainer:

  def __init__(self, task, config, workdir, strategy, verbose=True, allow_config_change=False,
               resume_from=None):
    """resume_from: a checkpoint path or step to resume from, or workdir.LATEST_INTACT for the
    newest checkpoint that restores; None resumes the latest one and refuses to guess."""
    self.task, self.config, self.workdir, self.strategy = task, config, workdir, strategy
    self.verbose, self.allow_config_change = verbose, allow_config_change
    self.resume_from = resume_from
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
    # The checkpoint restored or saved by this process while the guards were quiet.
    self.last_good = self.resumed_at = None
    self.guard = guard_lib.RunawayGuard(config.training.guard, task.metric_names)
    self._finite_fn = None

  # ---- state ---------------------------------------------------------------------------------
  def latest_checkpoint(self):
    return tf.train.latest_checkpoint(self.ckpt_dir)

  def restore_or_initialize(self):
    """Resumes from the checkpoint `resume_from` names (default: the latest), or initialises the
    task's state when the workdir has no checkpoint file at all. Never guesses: when checkpoints
    exist but the one asked for does not restore, a ValueError lists them."""
    steps = workdir_lib.checkpoint_steps(self.ckpt_dir)
    spec = self.resume_from
    if spec is not None and str(spec) == workdir_lib.LATEST_INTACT:
      return self._restore_latest_intact(steps)
    if spec is not None and str(spec) != '':
      path = workdir_lib.resolve_checkpoint(self.ckpt_dir, spec)
      try:
        self._restore(path)
      except ValueError as e:
        raise workdir_lib.resume_error(self.ckpt_dir, str(e)) from e
      return self._resumed(path)
    if not steps:
      self.task.initialize()
      return False
    latest = self.latest_checkpoint()
    if latest is None:
      # tf.train.latest_checkpoint reads the `checkpoint` state file only.
      raise workdir_lib.resume_error(
          self.ckpt_dir, 'its `checkpoint` state file is missing, unreadable or names a '
          'checkpoint whose files are gone')
    try:
      self._restore(latest)
    except ValueError as e:
      raise workdir_lib.resume_error(self.ckpt_dir, str(e)) from e
    return self._resumed(latest)

  def _restore_latest_intact(self, steps):
    if not steps:
      self.task.initialize()
      self._log(f'No checkpoint in {self.ckpt_dir}: a new run.')
      return False
    skipped = []
    for s in steps:
      path = os.path.join(self.ckpt_dir, f'ckpt-{s}')
      try:
        self._restore(path)
      except ValueError:
        skipped.append(f'ckpt-{s}')
        continue
      if skipped:
        self._log(f'Skipped checkpoints that do not restore: {", ".join(skipped)} (left in '
                  'place; later saves at their steps overwrite them).')
      return self._resumed(path)
    raise workdir_lib.resume_error(self.ckpt_dir, 'none of its checkpoints restores')

  def _resumed(self, path):
    self.last_good, self.resumed_at = path, int(self.step.numpy())
    self.guard.reset(int(self.step.numpy()))
    self._log(f'Resumed from {path} at step {int(self.step.numpy())}.')
    return True

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
    """Writes a checkpoint of the current state at `step`, on every worker; a non-finite state
    is a DivergenceError and is never written."""
    self.check_state_finite(step)
    if self.local_manager is not None:
      self.local_manager.save(checkpoint_number=step)
    self.manager.save(checkpoint_number=step)
    if not self.is_chief:
      tf.io.gfile.rmtree(self.manager.directory)
    self.last_good = os.path.join(self.ckpt_dir, f'ckpt-{step}')

  def _archive(self, step):
    self.check_state_finite(step)
    self.archive.save(checkpoint_number=step)

  def check_state_finite(self, step):
    """Raises DivergenceError unless every float variable of the checkpointed state is finite:
    one reduction per checkpoint item, on device, one host transfer."""
    items = {**self.task.checkpoint_items()}
    if hasattr(self.task, 'local_checkpoint_items'):
      items.update(self.task.local_checkpoint_items())
    names = sorted(items)
    if self._finite_fn is None:
      groups = [[v for v in _variables(items[k]) if v.dtype.is_floating] for k in names]

      @tf.function
      def finite():
        return tf.stack([tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in g])
                         if g else tf.constant(True) for g in groups])

      self._finite_fn = finite
    flags = self._finite_fn().numpy()
    bad = [k for k, ok in zip(names, flags) if not ok]
    if bad:
      raise DivergenceError(
          f'non-finite weights in {", ".join(bad)} at step {step}; not saved; '
          f'last good checkpoint: {self.last_good or "none"}')

  def _check_config(self):
    """Refuses a workdir whose checkpoints were made by a config with other networks or data."""
    try:
      tf.io.gfile.makedirs(self.workdir)
    except tf.errors.OpError as e:
      raise PermissionError(f'cannot create workdir {self.workdir}: {e.message}') from e
    path = os.path.join(self.workdir, 'config.json')
    # Any checkpoint file counts, not only one the state file names (it may be damaged).
    if tf.io.gfile.exists(path) and workdir_lib.checkpoint_steps(self.ckpt_dir):
      # Through load_config: a config.json of an older version gets the defaults it ran with.
      from tf_hat_ebm import checkpoints  # pylint: disable=g-import-not-at-top
      previous = checkpoints.load_config(self.workdir).to_dict()
      current = json.loads(self.config.to_json_best_effort())
      saved = _lookup(previous, 'training.checkpoint_data_iterator')
      if saved is not None and saved != self.config.training.checkpoint_data_iterator:
        # The checkpoints do (or do not) hold the input position: they restore only as written.
        raise ValueError(f'training.checkpoint_data_iterator was {saved} when the checkpoints of '
                         f'{self.workdir} were written; resume with '
                         f'--config.training.checkpoint_data_iterator={saved}')
      changed = [f'{k}: {_lookup(previous, k)!r} -> {_lookup(current, k)!r}'
                 for k in STRUCTURAL_KEYS if _lookup(previous, k) != _lookup(current, k)]
      if changed and not self.allow_config_change:
        raise ValueError(f'workdir {self.workdir} was made by a different config '
                         f'({"; ".join(changed)}); use a new --workdir, or '
                         '--allow_config_change to resume anyway')

  def _write_config(self):
    """Writes config.json, once the restore succeeded (so it always matches the checkpoints)."""
    if not self.is_chief:
      return
    path = os.path.join(self.workdir, 'config.json')
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
    check_training_config(t, end)
    self._check_config()
    lock = (workdir_lib.WorkdirLock(self.workdir, log=self._log) if self.is_chief
            else contextlib.nullcontext())
    with lock:
      return self._train(end)

  def _train(self, end):
    t = self.config.training
    run = run_info.Run(self.workdir, write=self.is_chief, log=self._log)
    if self.is_chief:
      workdir_lib.clean_orphans(self.workdir, [self.ckpt_dir, self.archive.directory],
                                log=self._log)
    iterator = self._iterator()
    if t.checkpoint_data_iterator:
      # The input position is part of the state: a resumed run reads the batches it would have.
      # Each worker reads its own shard, so with several workers it is worker-local state.
      (self.local_checkpoint or self.checkpoint).data_iterator = iterator
    self.restore_or_initialize()
    step = int(self.step.numpy())
    if end < step:
      raise ValueError(f'training.num_steps {end} is below step {step} of the restored '
                       'checkpoint; ask for more steps (or resume an older one with --checkpoint)')
    self._write_config()
    if end == step:
      self._log(f'Already at step {step} = training.num_steps: nothing to train.')
      return {}
    run.start(self.task, self.strategy, step)
    writer = (tf.summary.create_file_writer(os.path.join(self.workdir, 'tensorboard'))
              if self.is_chief else tf.summary.create_noop_writer())
    train_loop = self._make_train_loop()
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
          self._check_runaway(metrics, step)
          if progbar is not None:
            progbar.update(step, [(k, metrics[k]) for k in shown
                                  if k in metrics] + [('steps/s', rate)])
          if _due(step, t.log_every) or step == end:
            with writer.as_default(step=step):
              for k, v in {**metrics, **self.task.learning_rates(),
                           'steps_per_sec': rate}.items():
                tf.summary.scalar(k, v)
          if hasattr(self.task, 'evaluate') and (_due(step, _eval_every(t)) or step == end):
            self.evaluate(writer, step)
          if _due(step, t.sample_every) or step == end:
            self.write_grids(writer, step)
          self._checkpoint_if_due(step, end)
        except DivergenceError as e:
          if not self._rollback(e):
            raise
          step = int(self.step.numpy())
          continue
      if self._stop_requested and step < end:
        if self._holding_back():
          self._log(f'\nStopped by SIGTERM at step {step}; no checkpoint written while the '
                    f'runaway guard counts; last good checkpoint: {self.last_good or "none"}.')
        else:
          self.save(step)
          self._log(f'\nStopped by SIGTERM at step {step}; checkpoint written.')
    finally:
      restore_handler()
      writer.flush()
    run.finish(step)
    return metrics

  def _checkpoint_if_due(self, step, end):
    t = self.config.training
    save = _due(step, t.checkpoint_every) or step == end
    archive = self.archive is not None and _due(step, t.archive_every)
    if (save or archive) and self._holding_back():
      # A checkpoint taken while the guard counts towards a trip could hold the runaway.
      self._log(f'\nstep {step}: checkpoint held back, the runaway guard counts '
                f'({self.guard.count} of {t.guard.patience}: {self.guard.reason}).')
      return
    if save:
      self.save(step)
    if archive:
      self._archive(step)

  def _holding_back(self):
    return self.guard.suspicious and guard_lib.resolve_action(self.config.training) != 'warn'

  def _check_runaway(self, metrics, step):
    reason = self.guard.update(step, metrics)
    if reason is None or not self.guard.tripped:
      return
    message = (f'runaway at step {step}: {reason} for {self.guard.count} checks in a row; '
               f'last good checkpoint: {self.last_good or "none"}')
    if guard_lib.resolve_action(self.config.training) == 'warn':
      self._log(f'\nwarning: {message} (training.guard.action=warn: going on)')
      self.guard.count = 0
      return
    raise RunawayError(
        f'{message}; lower optim.hat_lr, raise langevin.steps or langevin.max_drift, resume an '
        'older checkpoint with --checkpoint=STEP, or set --config.training.guard.action=warn')
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
    """Restores the last good checkpoint with the learning rates lowered; False if it may not.

    Rollback r runs at rollback_lr_factor**r times the checkpoint's rate and draws a fresh RNG
    stream from (seed, r): each retry differs from the one before instead of replaying it."""
    t = self.config.training
    allowed = (guard_lib.resolve_action(t) == 'rollback' if isinstance(error, RunawayError)
               else t.rollback_on_divergence)
    if not allowed or not hasattr(self.task, 'lr_scale'):
      return False
    if self.last_good is None or self._rollbacks >= t.max_rollbacks:
      if self._rollbacks:
        raise type(error)(f'{error}; {self._rollbacks} rollbacks did not help') from error
      return False
    self._rollbacks += 1
    self._restore(self.last_good)
    factor = t.rollback_lr_factor ** self._rollbacks
    self.task.lr_scale.assign(self.task.lr_scale * factor)
    if hasattr(self.task, 'rng'):
      self.task.rng.reset_from_seed([self.config.seed, self._rollbacks])
    step = int(self.step.numpy())
    self.guard.reset(step)
    self._log(f'\n{error}\nRolled back to {self.last_good} (step {step}); learning rates '
              f'x{factor:g} of that checkpoint\'s (now x{float(self.task.lr_scale.numpy()):g}), '
              f'fresh RNG stream (rollback {self._rollbacks} of {t.max_rollbacks}).')
    return True

  def _check_finite(self, metrics, step):
    bad = sorted(k for k, v in metrics.items() if not np.isfinite(v))
    if bad:
      raise DivergenceError(
          f'non-finite {", ".join(bad)} at step {step}; nothing of this state was saved; '
          f'last good checkpoint: {self.last_good or "none"}')

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


def check_training_config(t, end):
  """One-line errors for training fields out of range (read here, by the trainer)."""
  if end <= 0:
    raise ValueError(f'training.num_steps must be > 0, not {end}')
  for key in ('steps_per_loop', 'keep_checkpoints'):
    if t[key] < 1:
      raise ValueError(f'training.{key} must be >= 1, not {t[key]}')
  for key in ('log_every', 'checkpoint_every', 'sample_every', 'archive_every', 'max_rollbacks'):
    if t[key] < 0:
      raise ValueError(f'training.{key} must be >= 0 (0: never), not {t[key]}')
  if _eval_every(t) < 0:
    raise ValueError(f'training.eval_every must be >= 0 (0: never), not {t.eval_every}')
  if not 0 < t.rollback_lr_factor < 1:
    raise ValueError(f'training.rollback_lr_factor must be in (0, 1), not {t.rollback_lr_factor}')
  g = t.guard
  if g.action not in guard_lib.ACTIONS:
    raise ValueError(f'training.guard.action must be one of {", ".join(guard_lib.ACTIONS)}, '
                     f'not {g.action!r}')
  for key, low in (('patience', 1), ('window', 1), ('warmup', 0), ('max_abs_energy_diff', 0),
                   ('growth_factor', 0)):
    if g[key] < low:
      raise ValueError(f'training.guard.{key} must be >= {low}, not {g[key]}')
  if 0 < g.growth_factor <= 1:
    raise ValueError(f'training.guard.growth_factor must be > 1 (or 0: off), not {g.growth_factor}')


def _variables(item):
  if isinstance(item, tf.Variable):
    return [item]
  variables = getattr(item, 'variables', [])
  return list(variables() if callable(variables) else variables)


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
