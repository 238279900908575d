"""The runaway guard: its decision on metric sequences, and its stop / rollback in the trainer."""
import math
import os
import random
import types

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm.tasks.autoencoder import AutoencoderTask
from tf_hat_ebm import registry
from tf_hat_ebm.guard import RunawayGuard, doubling_steps, replay
from tf_hat_ebm.tasks.sngan import SNGANTask
from tf_hat_ebm.tasks.synthesis import SynthesisTask
from tf_hat_ebm import actions
from tf_hat_ebm.actions import RunawayError
from tf_hat_ebm.trainer import Trainer

from conftest import tiny

NAMES = SynthesisTask.metric_names
STRATEGY = tf.distribute.get_strategy()


def guard_config(**overrides):
  cfg = registry.defaults('synthesis').training.guard
  cfg.update(overrides)
  return cfg


def first_trip(guard, chunks, steps_per_chunk=10):
  """Feeds (energy_diff, hat_grad_norm) per chunk; the step at which the guard trips, or None."""
  for i, (diff, norm) in enumerate(chunks):
    step = (i + 1) * steps_per_chunk
    guard.update(step, dict(energy_diff=diff, hat_grad_norm=norm, gen_loss=1.0))
    if guard.tripped:
      return step
  return None


def test_band_fires_after_patience_consecutive_chunks():
  chunks = [(0.5, 1.0)] * 10 + [(-200.0, 1.0)] * 3
  assert first_trip(RunawayGuard(guard_config(), NAMES), chunks) == 130
  # interrupted: a quiet chunk resets the count
  chunks = [(0.5, 1.0)] * 10 + [(-200.0, 1.0)] * 2 + [(0.5, 1.0)] + [(-200.0, 1.0)] * 2
  assert first_trip(RunawayGuard(guard_config(), NAMES), chunks) is None
  assert first_trip(RunawayGuard(guard_config(patience=1), NAMES), chunks) == 110


def test_growth_fires_after_warmup_on_a_gradient_norm_running_away():
  # |energy_diff| inside the band; hat_grad_norm x10 per chunk from step 310 on
  chunks = [(0.5, 1.0)] * 30 + [(0.5, 10.0 ** k) for k in range(1, 10)]
  # 10, 100, 1000 (not > 1000 x 1), then 1e4 (1), 1e5 (2), 1e6 (3): step 360
  assert first_trip(RunawayGuard(guard_config(trend_window=0), NAMES), chunks) == 360
  assert first_trip(RunawayGuard(guard_config(growth_factor=0, trend_window=0), NAMES),
                    chunks) is None
  # before the warm-up the growth test is not made
  early = [(0.5, 1.0)] * 3 + [(0.5, 10.0 ** k) for k in range(1, 10)]
  assert first_trip(RunawayGuard(guard_config(trend_window=0), NAMES), early) is None


def geometric(start, level, doubling, end=6000, every=10):
  """hat_grad_norm `level` up to step `start`, then doubling every `doubling` steps."""
  return [(0.5, level * 2 ** (max(s - start, 0) / doubling)) for s in range(every, end, every)]


def test_trend_catches_geometric_growth_long_before_the_band():
  # The shipped digits refinement at hat lr 1e-4: ~400 at first, doubling every 40 steps from 50
  guard = RunawayGuard(guard_config(), NAMES)
  step = first_trip(guard, geometric(50, 400.0, 40))
  # 10x its early level (the median of steps 10-100: ~480) at step ~190; three chunks later
  assert 190 <= step <= 250
  assert guard.reason.startswith('hat_grad_norm ') and 'doubles every 4' in guard.reason
  assert first_trip(RunawayGuard(guard_config(max_doubling=0), NAMES),
                    geometric(50, 400.0, 40, end=600)) is None  # off: the old tests alone
  # The same growth from a later start (a run that was healthy for 1,000 steps) is caught too
  assert 1130 <= first_trip(RunawayGuard(guard_config(), NAMES), geometric(1000, 400.0, 40)) <= 1250


def test_trend_is_silent_on_slow_growth_and_oscillation():
  rng = random.Random(0)
  # the paper-recipe refinement: doubling every ~500 steps, x4,000 over 6,000 steps, noisy
  slow = [(0.5, v * math.exp(rng.gauss(0, 0.3))) for _, v in geometric(0, 400.0, 500)]
  assert first_trip(RunawayGuard(guard_config(), NAMES), slow) is None
  # noisy oscillation by x3 either way with a period of 100 steps (half the fit's window),
  # around a level that rises to 20x the early one over 1,000 steps
  wave = [(0.5, 20 ** min(s / 1000, 1) * 3 ** math.sin(2 * math.pi * s / 100) *
           math.exp(rng.gauss(0, 0.3))) for s in range(10, 6000, 10)]
  assert first_trip(RunawayGuard(guard_config(), NAMES), wave) is None
  # a fast rise that stops below min_rise x the early level
  capped = [(0.5, min(v, 9.0)) for _, v in geometric(300, 1.0, 20)]
  assert first_trip(RunawayGuard(guard_config(), NAMES), capped) is None


def test_doubling_steps():
  assert doubling_steps([(s, 3 * 2 ** (s / 40)) for s in range(0, 200, 10)]) == pytest.approx(40)
  assert doubling_steps([(s, 5.0) for s in range(0, 200, 10)]) == math.inf
  assert doubling_steps([(s, 2 ** (-s / 40)) for s in range(0, 200, 10)]) == math.inf


def test_a_digits_like_runaway_trips_within_300_steps():
  # energy_diff of digits seed 1 with a 10,000-entry bank (docs/experiments.md): ~0.5, then -226
  # at step 100, -1.9e5 at 200
  def diff(step):
    if step <= 60:
      return -0.5
    if step <= 100:
      return -226.0 ** ((step - 60) / 40)
    return -226.0 * (1.9e5 / 226.0) ** ((step - 100) / 100)
  chunks = [(diff(s), 1.0) for s in range(10, 1000, 10)]
  assert first_trip(RunawayGuard(guard_config(), NAMES), chunks) == 120


def test_healthy_noisy_metrics_never_trip():
  rng = random.Random(0)
  chunks = [(rng.gauss(0, 2), math.exp(rng.gauss(0, 1))) for _ in range(1000)]
  guard = RunawayGuard(guard_config(), NAMES)
  assert first_trip(guard, chunks) is None


def test_tasks_without_the_metrics_are_not_watched():
  for names in (SNGANTask.metric_names, AutoencoderTask.metric_names):
    guard = RunawayGuard(guard_config(), names)
    assert not guard.watching
    assert first_trip(guard, [(1e9, 1e9)] * 10) is None
  assert not RunawayGuard(guard_config(action='off'), NAMES).watching


class RunawayTask(SynthesisTask):
  """The tandem task with energy_diff pushed up 10x per 2-step chunk after `start` steps."""

  start = 6

  def __init__(self, config, strategy):
    super().__init__(config, strategy)
    self.calls = tf.Variable(0.0, trainable=False)

  def replica_step(self, images):
    out = super().replica_step(images)
    self.calls.assign_add(1.0)
    out['energy_diff'] += tf.where(self.calls > self.start,
                                   10.0 ** ((self.calls - self.start) / 2), 0.0)
    return out


def runaway_trainer(workdir, figures=False, **guard):
  config = tiny(**{'training.max_rollbacks': 3, 'training.figures': figures})
  config.training.guard.update(guard)
  task = RunawayTask(config, STRATEGY)
  trainer = Trainer(task, config, str(workdir), STRATEGY, verbose=False)
  saved = {}
  save = trainer.checkpoints.save

  def save_and_snapshot(step):
    save(step)
    saved[step] = [v.numpy().copy() for v in task.hat.variables + task.generator.variables]

  trainer.checkpoints.save = save_and_snapshot
  return trainer, saved


def test_guard_stops_a_runaway_and_saves_nothing_while_counting(tmp_path):
  trainer, saved = runaway_trainer(tmp_path, figures=True)  # the stopped run's curves
  with pytest.raises(RunawayError, match=r'runaway at step 16: \|energy_diff\| .* > training.guard'
                     r'.max_abs_energy_diff 100 for 3 checks in a row; last good checkpoint: '
                     r'.*ckpt-10; lower optim.hat_lr.*resume an older checkpoint'):
    trainer.train(40)
  assert sorted(saved) == [2, 4, 6, 8, 10]
  assert os.path.getsize(tmp_path / 'training_curves.png') > 0  # a stopped run shows its curves
  assert not [p for p in os.listdir(tmp_path / 'checkpoints') if p.startswith(('ckpt-12',
                                                                               'ckpt-14'))]


@pytest.mark.graph  # 40 steps: a graph is faster than running them eagerly
def test_guard_rollback_restores_the_last_good_checkpoint_and_compounds(tmp_path):
  trainer, saved = runaway_trainer(tmp_path, figures=True, action='rollback')
  task, after = trainer.task, []
  rollback = trainer.guard.rollback

  def rollback_and_record(error):
    done = rollback(error)
    if done:
      after.append(dict(step=int(trainer.step.numpy()), lr_scale=float(task.lr_scale.numpy()),
                        rng=task.rng.state.numpy().copy(),
                        weights=[v.numpy().copy() for v in
                                 task.hat.variables + task.generator.variables]))
    return done

  trainer.guard.rollback = rollback_and_record
  with pytest.raises(RunawayError, match='3 rollbacks did not help'):
    trainer.train(40)
  assert [a['step'] for a in after] == [10, 10, 10]
  assert os.path.getsize(tmp_path / 'training_curves.png') > 0  # out of rollbacks: its curves
  np.testing.assert_allclose([a['lr_scale'] for a in after], [0.5, 0.25, 0.125])
  assert len({a['rng'].tobytes() for a in after}) == 3  # each retry draws a fresh stream
  for a in after:
    for w, s in zip(a['weights'], saved[10]):
      np.testing.assert_array_equal(w, s)


@pytest.mark.graph  # 40 steps: a graph is faster than running them eagerly
def test_guard_is_quiet_on_a_healthy_run(tmp_path):
  config = tiny(**{'training.steps_per_loop': 5, 'training.log_every': 10,
                   'training.checkpoint_every': 10, 'training.sample_every': 40})
  config.training.guard.update(warmup=10, window=20)  # the growth test runs too
  trainer = Trainer(SynthesisTask(config, STRATEGY), config, str(tmp_path), STRATEGY,
                    verbose=False)
  counts = []
  update = trainer.guard.runaway.update

  def update_and_record(step, metrics):
    reason = update(step, metrics)
    counts.append(trainer.guard.runaway.count)
    return reason

  trainer.guard.runaway.update = update_and_record
  trainer.train(40)
  assert trainer.guard.runaway.watching and len(counts) == 8 and max(counts) == 0
  assert tf.train.latest_checkpoint(str(tmp_path / 'checkpoints')).endswith('ckpt-40')


def test_replay_of_logged_curves():
  runaway = {'energy_diff': [(s, -0.1) for s in range(50, 1000, 50)],
             'hat_grad_norm': [(s, 400 * 2 ** (s / 40)) for s in range(50, 1000, 50)]}
  step, reason = replay(guard_config(), runaway)
  assert step == 350 and reason.startswith('hat_grad_norm')  # every 50 steps: 250, 300, 350
  healthy = dict(runaway, hat_grad_norm=[(s, 400 * 2 ** (s / 500)) for s in range(50, 1000, 50)])
  assert replay(guard_config(), healthy) is None


def test_a_runaway_before_any_checkpoint_does_not_suggest_resuming_one():
  # The trainer's guard action on the metrics of chunks, with no checkpoint saved or restored (a
  # training to its trip, seconds of CPU, is test_guard_stops_a_runaway_...'s).
  task = types.SimpleNamespace(metric_names=NAMES)
  guard = actions.Guard(task, tiny(), types.SimpleNamespace(last_good=None))
  for step in (2, 4):
    guard(actions.Chunk(step, 40, dict(energy_diff=0.5, hat_grad_norm=1.0, gen_loss=1.0)))
  with pytest.raises(RunawayError, match=r'runaway at step 10: .*last good checkpoint: none; '
                     r'lower optim.hat_lr') as error:
    for step in (6, 8, 10):
      guard(actions.Chunk(step, 40, dict(energy_diff=-200.0, hat_grad_norm=1.0, gen_loss=1.0)))
  assert '--checkpoint' not in str(error.value)
  guard = actions.Guard(task, tiny(), types.SimpleNamespace(last_good='ckpt-4'))
  with pytest.raises(RunawayError, match='resume an older checkpoint with --checkpoint'):
    for step in (2, 4, 6):
      guard(actions.Chunk(step, 40, dict(energy_diff=-200.0, hat_grad_norm=1.0, gen_loss=1.0)))
