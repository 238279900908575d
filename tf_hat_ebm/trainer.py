"""The one training loop of tf_hat_ebm: every experiment is a task (tasks/base.py) run by `Trainer`.

The trainer owns everything but the task's state and step: the strategy-distributed input,
`steps_per_loop` training steps per host call inside one tf.function, resume, checkpoints,
TensorBoard summaries, sample grids, evaluations, the progress bar, the divergence guards
(non-finite values; a finite runaway, guard.py) and clean exit on SIGTERM. The workdir's layout,
lock, config check and checkpoint managers are in workdir.py; run_info.py records the precision,
hardware and timing of every run.
"""
import contextlib
import os
import signal
import threading
import time

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import guard as guard_lib
from tf_hat_ebm import run_info
from tf_hat_ebm import summaries
from tf_hat_ebm import workdir as workdir_lib
from tpu_utils.strategy import worker_info


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
    (self.checkpoint, self.manager, self.local_checkpoint, self.local_manager,
     self.archive) = workdir_lib.checkpoint_managers(
         self.ckpt_dir, self.step, task.checkpoint_items(), task.local_checkpoint_items(),
         config.training.keep_checkpoints, self.worker_index, self.is_chief,
         self.num_workers > 1)
    self._stop_requested = self._interrupted = False
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
      path = workdir_lib.checkpoint_path(self.ckpt_dir, spec)
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
    items = {**self.task.checkpoint_items(), **self.task.local_checkpoint_items()}
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

  # ---- input ---------------------------------------------------------------------------------
  def _iterator(self):
    cfg, batch = self.config.data, self.config.training.batch_size
    # Tasks taking several batches per step (SN-GAN's n_dis discriminator steps) get them at once.
    batch *= self.task.batches_per_step
    dataset = self.strategy.distribute_datasets_from_function(
        lambda ctx: data_lib.train_dataset(cfg, batch, ctx))
    return iter(dataset)

  # ---- the loop ------------------------------------------------------------------------------
  def make_train_loop(self):
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
    workdir_lib.check_config(self.workdir, self.config, self.ckpt_dir,
                             self.allow_config_change)
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
    if self.is_chief:
      workdir_lib.write_config(self.workdir, self.config)
    if end == step:
      self._log(f'Already at step {step} = training.num_steps: nothing to train.')
      return {}
    run.start(self.task, self.strategy, step)
    writer = (tf.summary.create_file_writer(os.path.join(self.workdir, 'tensorboard'))
              if self.is_chief else tf.summary.create_noop_writer())
    self.report = summaries.RunReport(self.task, self.config, self.workdir, writer, self.is_chief)
    self.report.start(step)
    train_loop = self.make_train_loop()
    shown = self.task.progress_metrics
    progbar = tf.keras.utils.Progbar(end, stateful_metrics=list(self.task.metric_names) +
                                     ['steps/s']) if self.verbose and self.is_chief else None
    if progbar is not None and step:
      progbar.update(step)
    metrics = {}
    restore_handler = self._install_signal_handlers()
    try:
      while step < end and not self._stop_requested:
        if self._interrupted:
          raise KeyboardInterrupt  # Ctrl-C, raised here: between chunks, never lost
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
            self.report.scalars(step, metrics, {
                **self.task.learning_rates(), 'steps_per_sec': rate,
                'guard_count': self.guard.count, 'rollbacks': self._rollbacks})
          if _eval_every(t) and (_due(step, _eval_every(t)) or step == end):
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
    self.report.finish(step)
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
        tf.summary.scalar(f'eval/{k}', v, description=summaries.description(k))
    self._log(f'\nstep {step}: ' + ', '.join(f'{k} {v:.4g}' for k, v in results.items()))
    return results

  def write_grids(self, writer, step):
    # On every worker: the sampling is collective; only the chief writes.
    return self.report.grids(step, self.task.grid_samples(self.config.training.num_grid_samples))

  def _rollback(self, error):
    """Restores the last good checkpoint with the learning rates lowered; False if it may not.

    Rollback r runs at rollback_lr_factor**r times the checkpoint's rate and draws a fresh RNG
    stream from (seed, r): each retry differs from the one before instead of replaying it."""
    t = self.config.training
    allowed = (guard_lib.resolve_action(t) == 'rollback' if isinstance(error, RunawayError)
               else t.rollback_on_divergence)
    if not allowed:
      return False
    if self.last_good is None or self._rollbacks >= t.max_rollbacks:
      if self._rollbacks:
        raise type(error)(f'{error}; {self._rollbacks} rollbacks did not help') from error
      return False
    self._rollbacks += 1
    self._restore(self.last_good)
    factor = t.rollback_lr_factor ** self._rollbacks
    self.task.lr_scale.assign(self.task.lr_scale * factor)
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

  def _install_signal_handlers(self):
    """SIGTERM: save and stop after the current chunk. Ctrl-C: stop after it without saving; a
    second Ctrl-C stops at once. (A KeyboardInterrupt raised wherever Python happens to be can
    land in a destructor, where it is printed and ignored, and the run went on.)"""
    self._interrupted = False
    if threading.current_thread() is not threading.main_thread():
      return lambda: None

    def on_sigterm(signum, frame):  # pylint: disable=unused-argument
      self._stop_requested = True

    def on_sigint(signum, frame):  # pylint: disable=unused-argument
      if self._interrupted:
        raise KeyboardInterrupt
      self._interrupted = True

    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGTERM, on_sigterm),
                                                    (signal.SIGINT, on_sigint))}
    return lambda: [signal.signal(s, h) for s, h in previous.items()]

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


def _eval_every(training_cfg):
  # Only configs of tasks with an evaluation define training.eval_every.
  return training_cfg.get('eval_every', 0) or 0


def _due(step, every):
  return bool(every) and every > 0 and step % every == 0
