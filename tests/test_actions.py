"""Each action of the training loop on its own (actions.py), with a stand-in task."""
import os
import signal

import ml_collections
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import actions
from tf_hat_ebm import registry
from tf_hat_ebm import summaries
from tf_hat_ebm.trainer import _next_chunk


class FakeTask:
  """What the actions read of a task: one network-like variable, a learning-rate scale, an RNG."""
  metric_names = ('energy_diff', 'hat_grad_norm')
  progress_metrics = ('energy_diff',)

  def __init__(self):
    self.weight = tf.Variable([1.0, 2.0])
    self.lr_scale = tf.Variable(1.0)
    self.rng = tf.random.Generator.from_seed([0])
    self.initialized = 0
    self.evaluations = 0

  def checkpoint_items(self):
    return dict(weight=self.weight, lr_scale=self.lr_scale, rng=self.rng)

  def local_checkpoint_items(self):
    return {}

  def initialize(self):
    self.initialized += 1

  def learning_rates(self):
    return {'hat_lr': 0.5}

  def evaluate(self):
    self.evaluations += 1
    return {'mse': 0.25}

  def grid_samples(self, num):
    return {'x': np.zeros([num, 4, 4, 1], np.float32), 'y': np.ones([num, 4, 4, 1], np.float32)}


def training(**fields):
  t = registry.defaults('autoencoder').training
  t.update(checkpoint_every=2, archive_every=0, keep_checkpoints=2, **fields)
  return t


def checkpoints(tmp_path, task, hold=lambda: None, **fields):
  """(the save policy, the resume policy, the step) over one run's checkpoints."""
  step = tf.Variable(0, dtype=tf.int64)
  t = training(**fields)
  state = actions.Checkpoints(task, step, str(tmp_path / 'checkpoints'), t, (1, 0, True))
  return (actions.Saves(state, t.checkpoint_every, t.archive_every, hold, log=lambda m: None),
          actions.Resume(state, log=lambda m: None), step)


def chunk(step, end=100, **metrics):
  return actions.Chunk(step, end, metrics or {'energy_diff': 0.1, 'hat_grad_norm': 1.0}, 5.0)


def test_checkpoints_save_when_due_restore_and_initialize_fresh_runs(tmp_path):
  task = FakeTask()
  saves, resume, step = checkpoints(tmp_path, task)
  assert not resume.restore_or_initialize() and task.initialized == 1
  step.assign(1)
  saves(chunk(1))
  assert not os.path.exists(tmp_path / 'checkpoints' / 'ckpt-1.index')  # not due
  step.assign(2)
  saves(chunk(2))
  assert saves.checkpoints.last_good.endswith('ckpt-2')
  task.weight.assign([5.0, 6.0])
  _, again, _ = checkpoints(tmp_path, task)
  assert again.restore_or_initialize() and again.resumed_at == 2
  np.testing.assert_array_equal(task.weight.numpy(), [1.0, 2.0])


def test_checkpoints_are_held_back_and_never_non_finite(tmp_path):
  task = FakeTask()
  reasons = ['the guard counts']
  saves, _, _ = checkpoints(tmp_path, task, hold=lambda: reasons[0])
  saves(chunk(2))
  assert not os.path.exists(tmp_path / 'checkpoints')
  reasons[0] = None
  task.weight.assign([np.inf, 0.0])
  with pytest.raises(actions.DivergenceError, match='non-finite weights in weight at step 2'):
    saves(chunk(2))


def test_an_action_runs_when_its_condition_holds():
  calls = []
  action = actions.Conditional(actions.Every(4), calls.append)
  assert action.intervals == (4,)
  for step in (3, 4, 6, 7):
    action(chunk(step, end=7))
  assert [c.step for c in calls] == [4, 7]  # due, and the last step
  never = actions.Conditional(actions.Every(0), calls.append)
  never(chunk(8, end=8))
  assert len(calls) == 2


def guard_config(**guard):
  config = ml_collections.ConfigDict(dict(seed=3, training=training(rollback_on_divergence=True)))
  config.training.guard.update(dict(patience=2, **guard))
  return config


def test_guard_stops_on_non_finite_metrics_and_on_a_runaway(tmp_path):
  task = FakeTask()
  saves, _, _ = checkpoints(tmp_path, task)
  guard = actions.Guard(task, guard_config(action='stop'), saves.checkpoints, log=lambda m: None)
  with pytest.raises(actions.DivergenceError, match='non-finite hat_grad_norm at step 4'):
    guard(chunk(4, energy_diff=0.0, hat_grad_norm=np.nan))
  guard(chunk(6, energy_diff=500.0, hat_grad_norm=1.0))
  assert guard.hold_back() and 'runaway guard counts (1 of 2' in guard.hold_back()
  with pytest.raises(actions.RunawayError, match='runaway at step 8'):
    guard(chunk(8, energy_diff=500.0, hat_grad_norm=1.0))


def test_guard_rolls_back_with_lower_rates_and_a_fresh_stream(tmp_path):
  task = FakeTask()
  saves, resume, step = checkpoints(tmp_path, task)
  resume.restore_or_initialize()
  step.assign(2)
  saves.checkpoints.save(2)
  guard = actions.Guard(task, guard_config(), saves.checkpoints, log=lambda m: None)
  task.weight.assign([7.0, 7.0])
  step.assign(5)
  state = task.rng.state.numpy().copy()
  assert guard.rollback(actions.DivergenceError('nan'))
  np.testing.assert_array_equal(task.weight.numpy(), [1.0, 2.0])
  assert int(step.numpy()) == 2 and float(task.lr_scale.numpy()) == 0.5
  assert not np.array_equal(task.rng.state.numpy(), state)
  guard.rollbacks = guard.config.training.max_rollbacks
  with pytest.raises(actions.DivergenceError, match='3 rollbacks did not help'):
    guard.rollback(actions.DivergenceError('nan'))


def test_scalars_evaluation_and_grids_write_when_due(tmp_path):
  task = FakeTask()
  writer = tf.summary.create_file_writer(str(tmp_path / 'tb'))
  # A kind without an energy: the report draws the grids, no energy histograms.
  config = ml_collections.ConfigDict({'name': 'fake', 'experiment': 'sngan'})
  report = summaries.RunReport(task, config, str(tmp_path), writer)
  every = actions.Every(4)
  scalars = actions.Conditional(every, actions.Scalars(task, report))
  evaluation = actions.Conditional(every, actions.Evaluation(task, writer, log=lambda m: None))
  grids = actions.Conditional(every, actions.Grids(task, report, num=4))
  for action in (scalars, evaluation, grids):
    action(chunk(3))
  assert task.evaluations == 0 and not os.path.exists(tmp_path / 'samples')
  assert evaluation(chunk(4)) == {'mse': 0.25} and task.evaluations == 1
  grids(chunk(4))
  assert sorted(os.listdir(tmp_path / 'samples')) == ['residual_0000004.png',
                                                      'samples_0000004.png']
  scalars(chunk(4))
  writer.flush()
  tags = {v.tag for e in tf.compat.v1.train.summary_iterator(
      str(next((tmp_path / 'tb').iterdir()))) for v in e.summary.value}
  assert {summaries.tag(k) for k in ('energy_diff', 'hat_lr', 'steps_per_sec')} <= tags
  assert 'eval/mse' in tags


def test_signals_turn_sigterm_into_a_stop_and_ctrl_c_into_an_interrupt_between_chunks():
  previous = signal.getsignal(signal.SIGTERM)
  with actions.Signals() as signals:
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.stop_requested
    signals.check()  # no Ctrl-C yet
    os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
      signals.check()
  assert signal.getsignal(signal.SIGTERM) is previous


def test_chunks_end_where_an_action_wants_one():
  assert _next_chunk(0, 100, 10, (4, 0, 25)) == 4
  assert _next_chunk(4, 100, 10, (4, 25)) == 4
  assert _next_chunk(22, 100, 10, (25,)) == 3
  assert _next_chunk(98, 100, 10, ()) == 2


def test_an_early_grid_once_besides_every_sample_every():
  from tf_hat_ebm.actions import Chunk, EveryAndAt  # pylint: disable=g-import-not-at-top
  early = EveryAndAt(500, 100)
  due = [s for s in range(1, 1201) if early(Chunk(s, 1200, {}))]
  assert due == [100, 500, 1000, 1200]  # the early one, every 500, the last step
  assert _next_chunk(95, 1000, 10, (500,), (100,)) == 5  # a chunk ends at the early grid
  assert _next_chunk(100, 1000, 10, (500,), (100,)) == 10
  assert [s for s in range(1, 1001) if EveryAndAt(500, 0)(Chunk(s, 1000, {}))] == [500, 1000]
