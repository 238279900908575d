"""The one training loop of tf_hat_ebm: every experiment is a task (tasks/base.py) run by `Trainer`.

The trainer owns the strategy-distributed input and the loop: `steps_per_loop` training steps per
host call inside one tf.function, then the actions (actions.py) on that chunk: divergence guard,
progress bar, TensorBoard scalars, evaluation, sample grids, checkpoints, each when its condition
(actions.Every) says. Resuming is actions.Resume's, saving actions.Saves' (held back by the
guard's hold); the workdir's layout, lock and config check are workdir.py's; run_record.py
records the precision, hardware and timing of every run.
"""
import contextlib
import os
import time

import tensorflow as tf

from tf_hat_ebm import actions as actions_lib
from tf_hat_ebm import checkpoints as checkpoints_lib
from tf_hat_ebm import data as data_lib
from tf_hat_ebm import generators
from tf_hat_ebm import perf
from tf_hat_ebm import progress
from tf_hat_ebm import registry
from tf_hat_ebm import run_record
from tf_hat_ebm import summaries
from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.errors import DivergenceError
from tpu_utils import hardware
from tpu_utils.strategy import make_strategy, worker_info


def validate(config):
  """The checks of every config field (validation.py) against its kind's defaults."""
  return validation.validate(config, registry.for_config(config).defaults())


def train(config, workdir, strategy, num_steps=None, verbose=True, allow_config_change=False,
          resume_from=None):
  """Trains the config's kind of task in workdir: the one entry of every training script.

  Returns (the Trainer, the last step's metrics)."""
  validate(config)  # before the task builds anything: one line per out-of-range field
  generators.adopt_pin(config, workdir, allow_config_change)
  task = registry.for_config(config).make_task(config, strategy)
  trainer = Trainer(task, config, workdir, strategy, verbose=verbose,
                    allow_config_change=allow_config_change, resume_from=resume_from)
  return trainer, trainer.train(num_steps)


def train_command(config, workdir=None, tpu=None, allow_config_change=False, checkpoint=None):
  """tf-hat-ebm-train: trains `config` in `workdir` (default workdir/<config name>) on the
  strategy of `tpu` (tpu_utils.make_strategy), resuming from `checkpoint` or the latest one."""
  if workdir is not None and not workdir.strip():
    raise ValueError('--workdir is empty: give a directory (or leave the flag out for '
                     f'workdir/{config.name})')
  workdir = workdir or os.path.join('workdir', config.name)
  try:
    return train(config, workdir, make_strategy(tpu),
                 allow_config_change=allow_config_change, resume_from=checkpoint)
  except KeyboardInterrupt as e:
    raise KeyboardInterrupt(interrupted_message(workdir)) from e


def interrupted_message(workdir):
  """The Ctrl-C line of a training run: where a rerun resumes from."""
  steps = checkpoints_lib.list_checkpoints(os.path.join(workdir, 'checkpoints'))
  if not steps:  # nothing to resume: say what a rerun does
    return (f'interrupted before the first checkpoint (nothing saved in {workdir}); the same '
            'command starts the run over')
  return (f'interrupted (last checkpoint: step {steps[-1]} in {workdir}); resume with the same '
          'command')


class Trainer:

  def __init__(self, task, config, workdir, strategy, verbose=True, allow_config_change=False,
               resume_from=None):
    """resume_from: a checkpoint path or step to resume from, or workdir.LATEST_INTACT for the
    newest checkpoint that restores; None resumes the latest one and refuses to guess."""
    self.task, self.config, self.workdir, self.strategy = task, config, workdir, strategy
    self.verbose, self.allow_config_change = verbose, allow_config_change
    self.ckpt_dir = os.path.join(workdir, 'checkpoints')
    with strategy.scope():
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name='step',
                              aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
    worker = worker_info(strategy)
    self.is_chief = worker[2]
    t = config.training
    self.checkpoints = actions_lib.Checkpoints(task, self.step, self.ckpt_dir, t, worker)
    self.resume = actions_lib.Resume(self.checkpoints, resume_from, log=self.log)
    self.guard = actions_lib.Guard(task, config, self.checkpoints, log=self.log)
    self.jit_compile, self.jit_reason = perf.jit_compile(
        config, hardware.compute_platform(strategy), task.precision or 'float32',
        strategy.num_replicas_in_sync)
    # No checkpoint while the runaway guard counts: the guard's hold on the saves.
    self.saves = actions_lib.Saves(self.checkpoints, t.checkpoint_every, t.archive_every,
                                   hold=self.guard.hold_back, log=self.log)

  def restore_or_initialize(self):
    resumed = self.resume.restore_or_initialize()
    self.guard.reset(int(self.step.numpy()))
    return resumed

  def save(self, step):
    self.checkpoints.save(step)

  def make_train_loop(self):
    task, strategy, step = self.task, self.strategy, self.step
    names = task.metric_names
    # XLA compiles the step, not the loop: the iterator and the step counter stay outside it.
    replica_step = (tf.function(task.replica_step, jit_compile=True) if self.jit_compile
                    else task.replica_step)

    @tf.function
    def train_loop(iterator, num_steps):
      totals = {k: tf.constant(0.0) for k in names}
      for _ in tf.range(num_steps):
        per_replica = strategy.run(replica_step, args=(next(iterator),))
        totals = {k: totals[k] + strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica[k],
                                                 axis=None) for k in names}
        step.assign_add(1)
      return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    return train_loop

  def make_actions(self, end, step):
    """The actions run after every chunk, in order (the guard first: a diverged chunk is never
    logged, drawn or saved), and the run's report (summaries.RunReport), started."""
    t, chief = self.config.training, self.is_chief
    writer = (tf.summary.create_file_writer(os.path.join(self.workdir, 'tensorboard'))
              if chief else tf.summary.create_noop_writer())
    self.report = summaries.RunReport(self.task, self.config, self.workdir, writer, chief)
    self.report.start(step)
    progress = ([actions_lib.TrainingProgress(self.task, end, step)]
                if self.verbose and chief else [])
    every = actions_lib.Every
    # Without figures no grid is sampled: the fixed-seed grid chain feeds only the figures.
    at = actions_lib.EveryAndAt(t.sample_every, t.get('first_grid', 0))
    grids = ([actions_lib.Conditional(at, actions_lib.Grids(self.task, self.report,
                                                            t.num_grid_samples))]
             if self.report.figures else [])
    return writer, [
        self.guard, *progress,
        actions_lib.Conditional(every(t.log_every),
                                actions_lib.Scalars(self.task, self.report, self.guard)),
        actions_lib.Conditional(every(_eval_every(t)),
                                actions_lib.Evaluation(self.task, writer, log=self.log)),
        *grids, self.saves]

  def train(self, num_steps=None):
    """Trains until `num_steps` (default config.training.num_steps) and returns the last metrics."""
    t = self.config.training
    end = int(num_steps or t.num_steps)
    check_training_config(t, end)
    workdir_lib.check_config(self.workdir, self.config, self.ckpt_dir,
                             registry.for_config(self.config), self.allow_config_change)
    lock = (workdir_lib.WorkdirLock(self.workdir, log=self._log) if self.is_chief
            else contextlib.nullcontext())
    with lock:
      return self._train(end)

  def _train(self, end):
    run = run_record.RunRecord(self.workdir, write=self.is_chief, log=self._log)
    if self.is_chief:
      workdir_lib.clean_orphans(self.workdir, [self.ckpt_dir, os.path.join(self.ckpt_dir,
                                                                           'archive')],
                                log=self._log)
    batch = self.config.training.batch_size * self.task.batches_per_step  # SN-GAN: n_dis batches
    iterator = iter(self.strategy.distribute_datasets_from_function(
        lambda ctx: data_lib.train_dataset(self.config.data, batch, ctx)))
    if self.config.training.checkpoint_data_iterator:
      self.checkpoints.track_input(iterator)
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
    if 'perf' in self.config and 'jit_compile' in self.config.perf:
      self._log(f'XLA for the training step: {"on" if self.jit_compile else "off"} '
                f'({self.jit_reason})')
    train_loop = self.make_train_loop()
    writer, actions = self.make_actions(end, step)
    intervals = [every for action in actions for every in getattr(action, 'intervals', ())]
    stops = [s for action in actions for s in getattr(action, 'stops', ())]
    metrics = {}
    try:
      with actions_lib.Signals() as signals:
        while step < end and not signals.stop_requested:
          signals.check()
          n = _next_chunk(step, end, self.config.training.steps_per_loop, intervals, stops)
          start = time.time()
          with run.steps(n):
            metrics = {k: float(v) for k, v in train_loop(iterator, tf.constant(n)).items()}
          chunk = actions_lib.Chunk(int(self.step.numpy()), end, metrics,
                                    n / max(time.time() - start, 1e-9))
          step = chunk.step
          try:
            for action in actions:
              action(chunk)
          except DivergenceError as e:
            try:
              if not self.guard.rollback(e):  # raises itself when out of rollbacks
                raise
            except DivergenceError:
              self.report.finish(step)  # the curves of a stopped run show what the guard saw
              raise
            step = int(self.step.numpy())
        if signals.stop_requested and step < end:
          self._stop(step)
    finally:
      writer.flush()
    self.report.finish(step)
    run.finish(step)
    if self.is_chief and step >= end:
      kind = registry.for_config(self.config)
      self._log(progress.run_outputs(self.workdir, self.report.written,
                                     hat_ebm=kind.inference is not None,
                                     fid=kind.hook('samplers') is not None))
    return metrics

  def _stop(self, step):
    """SIGTERM: a checkpoint now, unless the guard holds checkpoints back."""
    if self.saves.hold():
      self._log(f'\nStopped by SIGTERM at step {step}; no checkpoint written while the '
                f'runaway guard counts; last good checkpoint: '
                f'{self.checkpoints.last_good or "none"}.')
    else:
      self.save(step)
      self._log(f'\nStopped by SIGTERM at step {step}; checkpoint written.')

  def log(self, msg):
    # Through _log, looked up at each call: tests replace it to read the messages.
    self._log(msg)

  def _log(self, msg):
    if self.verbose:
      print(msg, flush=True)


def _next_chunk(step, end, steps_per_loop, intervals, stops=()):
  """Steps until the next step some action wants (every `intervals` steps, or at one of `stops`)
  or the end, at most steps_per_loop."""
  n = min(steps_per_loop, end - step)
  for every in intervals:
    if every and every > 0:
      n = min(n, every - step % every)
  for stop in stops:
    if stop > step:
      n = min(n, stop - step)
  return max(n, 1)


def check_training_config(t, end):
  """One-line errors for training fields out of range (validation.py) and the end step."""
  if end <= 0:
    raise ValueError(f'training.num_steps must be > 0, not {end}')
  validation.check_training(t)


def _eval_every(training_cfg):
  # Only configs of tasks with an evaluation define training.eval_every.
  return training_cfg.get('eval_every', 0) or 0
