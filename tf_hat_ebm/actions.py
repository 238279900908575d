"""What the training loop does between its chunks of steps, one unit per job (Orbit's actions).

Each action is called with the `Chunk` that just ran. When it runs is a condition outside it
(`Conditional(Every(n), action)`, as Orbit's ConditionalAction), whose `intervals` say at which
steps the loop (trainer.py) ends a chunk. The loop runs them in order: the divergence guard first
(a diverged chunk writes nothing), `Saves` last. The checkpoints' three jobs are apart: `Resume`
(what a run resumes from), `Saves` (when a checkpoint is written, held back while the guard's
`hold_back` gives a reason) and `FiniteState` (no non-finite state is ever written), around
`Checkpoints`, the run's checkpointed state. `Signals` is the SIGTERM / Ctrl-C handling.
"""
import dataclasses
import os
import signal
import threading
from typing import Any, Callable, Dict, Optional

import numpy as np
import tensorflow as tf

from tf_hat_ebm import checkpoints as checkpoints_lib
from tf_hat_ebm import guard as guard_lib
from tf_hat_ebm import progress as progress_lib
from tf_hat_ebm import summaries
from tf_hat_ebm.errors import DivergenceError


class RunawayError(DivergenceError):
  """The runaway guard fired: finite metrics running away."""


@dataclasses.dataclass
class Chunk:
  """One call of the training loop: the step it ended at, its mean metrics, its speed."""
  step: int
  end: int                        # the step training stops at
  metrics: Dict[str, float]
  steps_per_sec: float = 0.0

  def due(self, every):
    return due(self.step, every) or self.step == self.end


def due(step, every):
  return bool(every) and every > 0 and step % every == 0


Action = Callable[[Chunk], Any]
Hold = Callable[[], Optional[str]]  # why no checkpoint may be taken now, or None


class Every:
  """The condition of an action due every `every` steps and at the last step (0: never)."""

  def __init__(self, every):
    self.every = every
    self.intervals = (every,)

  def __call__(self, chunk):
    return bool(self.every) and chunk.due(self.every)


class EveryAndAt(Every):
  """Every `every` steps, at the last step, and once at step `at` (0: not): an early grid."""

  def __init__(self, every, at):
    super().__init__(every)
    self.at = at
    self.stops = (at,) if at else ()  # a chunk ends at `at`

  def __call__(self, chunk):
    return super().__call__(chunk) or bool(self.at) and chunk.step == self.at


class Conditional:
  """`action` on the chunks where `condition` holds (Orbit's ConditionalAction); the loop ends a
  chunk at every step the condition names (its `intervals`, and its single `stops`)."""

  def __init__(self, condition: Callable[[Chunk], bool], action: Action):
    self.condition, self.action = condition, action
    self.intervals = tuple(getattr(condition, 'intervals', ()))
    self.stops = tuple(getattr(condition, 'stops', ()))  # single steps it names

  def __call__(self, chunk):
    return self.action(chunk) if self.condition(chunk) else None


class FiniteState:
  """The finiteness check of a state about to be saved: every float variable of the task's
  checkpointed items, one reduction per item on device, one host transfer."""

  def __init__(self, task):
    self.task, self._finite_fn = task, None

  def __call__(self, step, last_good):
    """Raises DivergenceError naming the non-finite items, unless all are finite."""
    items = {**self.task.checkpoint_items(), **self.task.local_checkpoint_items()}
    names = sorted(items)
    if self._finite_fn is None:
      groups = [[v for v in _variables(items[k]) if v.dtype.is_floating] for k in names]

      @tf.function
      def finite():
        return tf.stack([tf.reduce_all([tf.reduce_all(tf.math.is_finite(v)) for v in g])
                         if g else tf.constant(True) for g in groups])

      self._finite_fn = finite
    bad = [k for k, ok in zip(names, self._finite_fn().numpy()) if not ok]
    if bad:
      raise DivergenceError(f'non-finite weights in {", ".join(bad)} at step {step}; not saved; '
                            f'last good checkpoint: {last_good or "none"}')


class Checkpoints:
  """A run's checkpointed state (checkpoints.py's managers): `restore` a path, `save` or
  `save_archive` at a step (never a state `check_finite` refuses), and `last_good`, the
  checkpoint this process restored or saved last. When to save is `Saves`', what to resume
  from `Resume`'s."""

  def __init__(self, task, step, ckpt_dir, training, worker, check_finite=None):
    """worker: (number of workers, this worker's index, is chief)."""
    self.task, self.step, self.ckpt_dir = task, step, ckpt_dir
    num_workers, index, self.is_chief = worker
    (self.checkpoint, self.manager, self.local_checkpoint, self.local_manager,
     self.archive) = checkpoints_lib.checkpoint_managers(
         ckpt_dir, step, task.checkpoint_items(), task.local_checkpoint_items(),
         training.keep_checkpoints, index, self.is_chief, num_workers > 1)
    self.check_finite = check_finite or FiniteState(task)
    self.last_good = None

  def track_input(self, iterator):
    """Makes the input position part of the state: a resumed run reads the batches it would have.
    Each worker reads its own shard, so with several workers it is worker-local state."""
    (self.local_checkpoint or self.checkpoint).data_iterator = iterator

  def restore(self, path):
    """Restores the whole state from `path`; a one-line ValueError if it does not restore."""
    try:
      checkpoints_lib.restore_checkpoint(self.checkpoint, path)
      if self.local_checkpoint is not None:
        local = os.path.join(self.local_manager.directory, os.path.basename(path))
        if not tf.io.gfile.exists(local + '.index'):
          raise ValueError(f'replica-local state {local} of this worker is missing')
        checkpoints_lib.restore_checkpoint(self.local_checkpoint, local)
    except ValueError as e:
      raise ValueError(f'cannot restore checkpoint {path} (corrupt or truncated?): {e}; it was '
                       'left as it is') from e
    self.last_good = path

  def save(self, step):
    """Writes a checkpoint of the current state at `step`, on every worker; a non-finite state
    is a DivergenceError and is never written."""
    self.check_finite(step, self.last_good)
    if self.local_manager is not None:
      self.local_manager.save(checkpoint_number=step)
    self.manager.save(checkpoint_number=step)
    if not self.is_chief:
      tf.io.gfile.rmtree(self.manager.directory)
    self.last_good = os.path.join(self.ckpt_dir, f'ckpt-{step}')

  def save_archive(self, step):
    """A kept-forever snapshot in checkpoints/archive (training.archive_every)."""
    self.check_finite(step, self.last_good)
    self.archive.save(checkpoint_number=step)


class Resume:
  """The resume policy: the checkpoint `resume_from` names (a step, a path, or LATEST_INTACT),
  by default the latest; a fresh run only when the workdir has no checkpoint at all."""

  def __init__(self, checkpoints, resume_from=None, log=print):
    self.checkpoints, self.resume_from, self.log = checkpoints, resume_from, log
    self.ckpt_dir = checkpoints.ckpt_dir
    self.resumed_at = None

  def restore_or_initialize(self):
    """Resumes, or initialises the task's state; never guesses: when checkpoints exist but the
    one asked for does not restore, a ValueError lists them. Whether it resumed."""
    steps = checkpoints_lib.checkpoint_steps(self.ckpt_dir)
    spec = self.resume_from
    if spec is not None and str(spec) == checkpoints_lib.LATEST_INTACT:
      return self._restore_latest_intact(steps)
    if spec is not None and str(spec) != '':
      path = checkpoints_lib.checkpoint_path(self.ckpt_dir, spec)
    elif not steps:
      self.checkpoints.task.initialize()
      return False
    else:
      path = checkpoints_lib.state_file_checkpoint(self.ckpt_dir)
      if path is None:
        raise checkpoints_lib.resume_error(
            self.ckpt_dir, 'its `checkpoint` state file is missing, unreadable or names a '
            'checkpoint whose files are gone')
    try:
      self.checkpoints.restore(path)
    except ValueError as e:
      raise checkpoints_lib.resume_error(self.ckpt_dir, str(e)) from e
    return self._resumed(path)

  def _restore_latest_intact(self, steps):
    if not steps:
      self.checkpoints.task.initialize()
      self.log(f'No checkpoint in {self.ckpt_dir}: a new run.')
      return False
    skipped = []
    for s in steps:
      path = os.path.join(self.ckpt_dir, f'ckpt-{s}')
      try:
        self.checkpoints.restore(path)
      except ValueError:
        skipped.append(f'ckpt-{s}')
        continue
      if skipped:
        self.log(f'Skipped checkpoints that do not restore: {", ".join(skipped)} (left in '
                 'place; later saves at their steps overwrite them).')
      return self._resumed(path)
    raise checkpoints_lib.resume_error(self.ckpt_dir, 'none of its checkpoints restores',
                                       none_restores=True)

  def _resumed(self, path):
    self.resumed_at = int(self.checkpoints.step.numpy())
    self.log(f'Resumed from {path} at step {self.resumed_at}.')
    return True


class Saves:
  """The save policy: a checkpoint every `every` steps and at the end, an archived one every
  `archive_every`, none while `hold` gives a reason (the runaway guard's `hold_back`)."""

  def __init__(self, checkpoints, every, archive_every=0, hold: Hold = lambda: None, log=print):
    self.checkpoints, self.hold, self.log = checkpoints, hold, log
    self.save_due, self.archive_due = Every(every), Every(archive_every)
    self.intervals = (every, archive_every)

  def __call__(self, chunk):
    save = self.save_due(chunk)
    archive = self.checkpoints.archive is not None and due(chunk.step, self.archive_due.every)
    if not (save or archive):
      return
    reason = self.hold()
    if reason:
      self.log(f'\nstep {chunk.step}: checkpoint held back, {reason}.')
      return
    if save:
      self.checkpoints.save(chunk.step)
    if archive:
      self.checkpoints.save_archive(chunk.step)


class Guard:
  """Stops on a non-finite metric or a runaway (guard.py), or rolls back to the last good
  checkpoint with lower learning rates when the config allows it. Its `hold_back` is the hold
  the trainer gives `Saves`: no checkpoint while the runaway guard counts."""

  intervals = ()

  def __init__(self, task, config, checkpoints, log=print):
    self.task, self.config, self.checkpoints, self.log = task, config, checkpoints, log
    self.runaway = guard_lib.RunawayGuard(config.training.guard, task.metric_names)
    self.rollbacks = 0

  def reset(self, step):
    self.runaway.reset(step)

  def hold_back(self):
    """Why no checkpoint may be taken now (the runaway guard counts towards a trip), or None."""
    if self.runaway.suspicious and guard_lib.resolve_action(self.config.training) != 'warn':
      t = self.config.training
      return (f'the runaway guard counts ({self.runaway.count} of {t.guard.patience}: '
              f'{self.runaway.reason})')
    return None

  def __call__(self, chunk):
    step, last_good = chunk.step, self.checkpoints.last_good or 'none'
    bad = sorted(k for k, v in chunk.metrics.items() if not np.isfinite(v))
    if bad:
      raise DivergenceError(f'non-finite {", ".join(bad)} at step {step}; nothing of this state '
                            f'was saved; last good checkpoint: {last_good}')
    reason = self.runaway.update(step, chunk.metrics)
    if reason is None or not self.runaway.tripped:
      return
    message = (f'runaway at step {step}: {reason} for {self.runaway.count} checks in a row; '
               f'last good checkpoint: {last_good}')
    if guard_lib.resolve_action(self.config.training) == 'warn':
      self.log(f'\nwarning: {message} (training.guard.action=warn: going on)')
      self.runaway.count = 0
      return
    # Resuming is advice only where a checkpoint exists to resume from.
    resume = ('resume an older checkpoint with --checkpoint=STEP, '
              if self.checkpoints.last_good else '')
    raise RunawayError(
        f'{message}; lower optim.hat_lr, raise langevin.steps or langevin.max_drift, {resume}'
        'or set --config.training.guard.action=warn')

  def rollback(self, error):
    """Restores the last good checkpoint with the learning rates lowered; False if it may not.

    Rollback r runs at rollback_lr_factor**r times the checkpoint's rate and draws a fresh RNG
    stream from (seed, r): each retry differs from the one before instead of replaying it."""
    t, task, last_good = self.config.training, self.task, self.checkpoints.last_good
    allowed = (guard_lib.resolve_action(t) == 'rollback' if isinstance(error, RunawayError)
               else t.rollback_on_divergence)
    if not allowed:
      return False
    if last_good is None or self.rollbacks >= t.max_rollbacks:
      if self.rollbacks:
        raise type(error)(f'{error}; {self.rollbacks} rollbacks did not help') from error
      return False
    self.rollbacks += 1
    self.checkpoints.restore(last_good)
    factor = t.rollback_lr_factor ** self.rollbacks
    task.lr_scale.assign(task.lr_scale * factor)
    task.rng.reset_from_seed([self.config.seed, self.rollbacks])
    step = int(self.checkpoints.step.numpy())
    self.reset(step)
    self.log(f'\n{error}\nRolled back to {last_good} (step {step}); learning rates '
             f'x{factor:g} of that checkpoint\'s (now x{float(task.lr_scale.numpy()):g}), '
             f'fresh RNG stream (rollback {self.rollbacks} of {t.max_rollbacks}).')
    return True


class TrainingProgress:
  """Training progress (chief, verbose runs only): step, ETA, the task's progress metrics and
  speed; a bar on a terminal, one plain line per tenth of the run in a file (progress.py)."""

  def __init__(self, task, end, step, stream=None):
    self.shown = task.progress_metrics
    self.progress = progress_lib.Progress(end, unit='step', start=step, stream=stream)

  def __call__(self, chunk):
    values = {k: chunk.metrics[k] for k in self.shown if k in chunk.metrics}
    values['steps/s'] = round(chunk.steps_per_sec, 2)
    self.progress.update(chunk.step, values)


class Scalars:
  """TensorBoard scalars: the chunk's metrics, learning rates, speed and the guard's state,
  grouped and described (summaries.py)."""

  def __init__(self, task, report, guard=None):
    self.task, self.report, self.guard = task, report, guard

  def __call__(self, chunk):
    extra = {**self.task.learning_rates(), 'steps_per_sec': chunk.steps_per_sec}
    if self.guard is not None:
      extra.update(guard_count=self.guard.runaway.count, rollbacks=self.guard.rollbacks)
    self.report.scalars(chunk.step, chunk.metrics, extra)


class Evaluation:
  """The task's evaluation: TensorBoard under eval/, a log line; its results."""

  def __init__(self, task, writer, log=print):
    self.task, self.writer, self.log = task, writer, log

  def __call__(self, chunk):
    results = {k: float(v) for k, v in self.task.evaluate().items()}
    with self.writer.as_default(step=chunk.step):
      for k, v in results.items():
        tf.summary.scalar(f'eval/{k}', v, description=summaries.description(k))
    self.log(f'\nstep {chunk.step}: ' + ', '.join(f'{k} {v:.4g}' for k, v in results.items()))
    return results


class Grids:
  """Fixed-seed sample grids: labelled samples/*.png, their TensorBoard images and the energy
  histograms of data and samples (summaries.RunReport.grids)."""

  def __init__(self, task, report, num):
    self.task, self.report, self.num = task, report, num

  def __call__(self, chunk):
    self.write(chunk.step)

  def write(self, step):
    # On every worker: the sampling is collective; only the chief writes.
    return self.report.grids(step, self.task.grid_samples(self.num))


class Signals:
  """SIGTERM: save and stop after the current chunk. Ctrl-C: stop after it without saving; a
  second Ctrl-C stops at once. (A KeyboardInterrupt raised wherever Python happens to be can
  land in a destructor, where it is printed and ignored, and the run went on.)"""

  def __init__(self):
    self.stop_requested = self.interrupted = False
    self._previous = {}

  def __enter__(self):
    self.stop_requested = self.interrupted = False
    if threading.current_thread() is threading.main_thread():
      self._previous = {s: signal.signal(s, h) for s, h in ((signal.SIGTERM, self._on_sigterm),
                                                            (signal.SIGINT, self._on_sigint))}
    return self

  def __exit__(self, *exc):
    for s, h in self._previous.items():
      signal.signal(s, h)
    self._previous = {}
    return False

  def check(self):
    """Raises the Ctrl-C here, between chunks, where nothing is lost."""
    if self.interrupted:
      raise KeyboardInterrupt

  def _on_sigterm(self, signum, frame):  # pylint: disable=unused-argument
    self.stop_requested = True

  def _on_sigint(self, signum, frame):  # pylint: disable=unused-argument
    if self.interrupted:
      raise KeyboardInterrupt
    self.interrupted = True


def _variables(item):
  if isinstance(item, tf.Variable):
    return [item]
  variables = getattr(item, 'variables', [])
  return list(variables() if callable(variables) else variables)
