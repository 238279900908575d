"""The tandem training loop: distributed run, resume, divergence guard, script errors."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trainer as trainer_lib
from tf_hat_ebm.tasks.synthesis import SynthesisTask
from tf_hat_ebm.trainer import DivergenceError, Trainer

from conftest import copy_of, run_command, tiny


def variables_of(item):
  if isinstance(item, tf.Variable):
    return [item]
  if isinstance(item, tf.random.Generator):
    return [item.state]
  return item.variables


def snapshot(task):
  items = {**task.checkpoint_items(), **task.local_checkpoint_items()}
  return {k: [w.numpy().copy() for w in variables_of(v)] for k, v in items.items()}


def test_two_replica_training_changes_bank_and_stays_finite(two_replicas, tmp_path):
  config = tiny(**{'training.figures': True})
  task = SynthesisTask(config, two_replicas)
  trainer = Trainer(task, config, str(tmp_path), two_replicas, verbose=False)
  trainer.restore_or_initialize()
  bank0 = {k: v.numpy().copy() for k, v in task.bank.checkpoint_items(two_replicas).items()}
  hat0 = [v.numpy().copy() for v in task.hat.trainable_variables]
  metrics = trainer.train(4)
  assert int(trainer.step.numpy()) == 4
  assert set(metrics) == set(SynthesisTask.metric_names)
  assert all(np.isfinite(v) for v in metrics.values())
  bank1 = {k: v.numpy() for k, v in task.bank.checkpoint_items(two_replicas).items()}
  assert len(bank1) == 4  # z and x of each replica
  for k in bank1:
    changed = np.any(bank1[k] != bank0[k], axis=tuple(range(1, bank1[k].ndim)))
    assert 0 < changed.sum() <= 4 * 2  # at most 4 steps x 2 entries per replica
  assert not np.array_equal(bank1['bank_z_replica0'], bank1['bank_z_replica1'])
  assert any(not np.array_equal(a, b.numpy()) for a, b in zip(hat0, task.hat.trainable_variables))
  # workdir: checkpoints, TensorBoard events, sample grids
  assert tf.train.latest_checkpoint(str(tmp_path / 'checkpoints')).endswith('ckpt-4')
  assert os.listdir(tmp_path / 'tensorboard')
  assert sorted(os.listdir(tmp_path / 'samples')) == [
      'data.png', 'generator_0000004.png', 'residual_0000004.png', 'samples_0000004.png']


def test_resume_restores_every_piece_of_state_and_reproduces_the_uninterrupted_run(tmp_path):
  strategy = tf.distribute.get_strategy()
  config = tiny()
  first = SynthesisTask(config, strategy)
  Trainer(first, config, str(tmp_path / 'resumed'), strategy, verbose=False).train(3)
  saved = snapshot(first)
  hat3 = [v.numpy().copy() for v in first.hat.trainable_variables]
  # a new process would build everything afresh: the restore must bring back the same state (at
  # step 3, between two of the 2-step chunks)
  second = SynthesisTask(config, strategy)
  trainer2 = Trainer(second, config, str(tmp_path / 'resumed'), strategy, verbose=False)
  assert trainer2.restore_or_initialize()
  assert int(trainer2.step.numpy()) == 3
  restored = snapshot(second)
  assert saved.keys() == restored.keys()
  assert {'hat', 'generator', 'hat_optimizer', 'gen_optimizer', 'rng',
          'bank_z_replica0', 'bank_x_replica0'} <= set(saved)
  for k in saved:
    for a, b in zip(saved[k], restored[k]):
      np.testing.assert_array_equal(a, b, err_msg=k)
  assert int(second.optimizers['hat'].iterations.numpy()) == 3
  # and training continues from there to the requested end, where a run never stopped gets
  trainer2.train(6)
  assert int(trainer2.step.numpy()) == 6
  # The run never stopped keeps one checkpoint and archives every 2 steps (the rotation below):
  # what it saves does not change what it trains.
  rotating = tiny(**{'training.keep_checkpoints': 1, 'training.archive_every': 2})
  straight = SynthesisTask(rotating, strategy)
  Trainer(straight, rotating, str(tmp_path / 'straight'), strategy, verbose=False).train(6)
  for task in (straight, second):  # steps 4-6 moved the weights: the comparison can fail
    assert not np.array_equal(task.hat.trainable_variables[0].numpy(), hat3[0])
  for a, b in zip(straight.hat.trainable_variables + straight.generator.trainable_variables,
                  second.hat.trainable_variables + second.generator.trainable_variables):
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
  # Resume checkpoints rotate; archived snapshots stay.
  ckpt = tmp_path / 'straight' / 'checkpoints'
  assert tf.train.get_checkpoint_state(str(ckpt)).all_model_checkpoint_paths == [
      str(ckpt / 'ckpt-6')]
  archived = tf.train.get_checkpoint_state(str(ckpt / 'archive')).all_model_checkpoint_paths
  assert [os.path.basename(p) for p in archived] == ['ckpt-2', 'ckpt-4', 'ckpt-6']


def moving_means(generator):
  return [v.numpy().copy() for v in generator.variables if 'moving_mean' in v.name]


@pytest.mark.parametrize('update', ['current', 'cooperative', 'cooperative_bn'])
def test_current_samples_ablation_and_cooperative_baseline_run_without_bank(update, tmp_path):
  """All fit G to the current samples; only cooperative learning with batch norm's G uses batch
  statistics."""
  config = tiny(**{'training.generator_update': update})
  strategy = tf.distribute.get_strategy()
  task = SynthesisTask(config, strategy)
  assert task.bank is None
  before = moving_means(task.generator)
  metrics = Trainer(task, config, str(tmp_path), strategy, verbose=False).train(2)
  assert np.isfinite(metrics['gen_loss'])
  moved = [not np.array_equal(a, b) for a, b in zip(before, moving_means(task.generator))]
  assert before and all(moved) == (update == 'cooperative_bn') and any(moved) == all(moved)


@pytest.mark.parametrize('recompute', [False, True])
def test_cooperative_bn_chain_starts_from_the_generator_in_its_fitting_mode(recompute):
  """Coop (BN): G(Z) at the chain's start with batch statistics, as in the generator's fit."""
  config = tiny(**{'training.generator_update': 'cooperative_bn',
                   'perf.recompute_generator': recompute})
  task = SynthesisTask(config, tf.distribute.get_strategy())
  z = tf.random.normal([8, *task.generator.latent_shape])
  _, _, g_z, _ = task.chain(task.rng, 8, task.settings, z0=z)
  batch_mode = task.generator(z, training=True).numpy()
  moving = task.generator(z, training=False).numpy()
  assert np.abs(batch_mode - moving).max() > 1e-2  # the two modes differ at these weights
  np.testing.assert_allclose(g_z.numpy(), batch_mode, atol=1e-5)


def test_divergence_stops_before_any_checkpoint_of_that_state(tmp_path):
  config = tiny(**{'optim.hat_lr': 1e30, 'optim.gen_lr': 1e30})
  config.training.checkpoint_every = 1
  config.training.steps_per_loop = 1
  strategy = tf.distribute.get_strategy()
  task = SynthesisTask(config, strategy)
  trainer = Trainer(task, config, str(tmp_path), strategy, verbose=False)
  with pytest.raises(DivergenceError, match='non-finite .* at step') as info:
    trainer.train(30)
  ckpt = tmp_path / 'checkpoints'
  latest = tf.train.latest_checkpoint(str(ckpt))
  assert ('none' in str(info.value)) == (latest is None)
  written = os.listdir(ckpt) if ckpt.exists() else []
  for prefix in [str(ckpt / p[:-len('.index')]) for p in written if p.endswith('.index')]:
    for name, _ in tf.train.list_variables(prefix):  # every checkpoint written: finite state
      if 'data_iterator' in name:  # a serialized input-pipeline state, not numbers
        continue
      value = tf.train.load_variable(prefix, name)
      if isinstance(value, np.ndarray) and value.dtype.kind == 'f':
        assert np.all(np.isfinite(value)), (prefix, name)


def test_batch_not_divisible_by_replicas(two_replicas):
  config = tiny(**{'training.batch_size': 5})
  with pytest.raises(ValueError, match='global batch 5 cannot be split evenly over 2 replicas'):
    SynthesisTask(config, two_replicas)


def test_validate_rejects_unknown_dataset_and_size():
  config = tiny(**{'data.name': 'imagenet'})
  with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
    trainer_lib.validate(config)
  config = tiny(**{'data.image_size': 24})
  with pytest.raises(ValueError, match='image size 24'):
    trainer_lib.validate(config)


def test_script_rejects_misspelt_override(tmp_path):
  result = run_command('train_synthesis.py', f'--workdir={tmp_path}', '--config.langevin.stepz=3')
  assert result.returncode != 0
  assert 'stepz' in result.stderr and 'steps' in result.stderr  # "Did you mean steps"
  assert not os.path.exists(tmp_path / 'checkpoints')


def test_script_rejects_unknown_dataset_in_one_line(tmp_path):
  result = run_command('train_synthesis.py', f'--workdir={tmp_path}', '--config.data.name=cifar11')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      "error: unknown dataset 'cifar11'; known datasets: digits, cifar10, cifar100, "
      'svhn_cropped, celeb_a, imagenet2012, or your images as folder:<path> or '
      'array:<path.npy|.npz>')


def test_workdir_of_another_config_is_refused_and_left_intact(trained_workdir, tmp_path):
  strategy = tf.distribute.get_strategy()
  workdir = copy_of(trained_workdir, tmp_path)  # tiny() trained 2 steps
  files = sorted(os.listdir(workdir / 'checkpoints'))
  other = tiny(**{'model.hat_width': 16})
  with pytest.raises(ValueError, match=r'different config \(model: .*--allow_config_change'):
    Trainer(SynthesisTask(other, strategy), other, str(workdir), strategy,
            verbose=False).train(4)
  assert sorted(os.listdir(workdir / 'checkpoints')) == files
  # a longer run of the same config is accepted and resumes (run here to the step it holds:
  # the restore, not seconds of tracing the training steps)
  longer = tiny(**{'training.num_steps': 6})
  trainer = Trainer(SynthesisTask(longer, strategy), longer, str(workdir), strategy,
                    verbose=False)
  assert trainer.train(2) == {}
  assert trainer.resume.resumed_at == 2 and int(trainer.step.numpy()) == 2


def test_unwritable_workdir_is_a_clear_error(tmp_path):
  blocker = tmp_path / 'file'
  blocker.write_text('not a directory')
  strategy = tf.distribute.get_strategy()
  config = tiny()
  with pytest.raises(PermissionError, match='cannot create workdir'):
    Trainer(SynthesisTask(config, strategy), config, str(blocker / 'run'), strategy,
            verbose=False).train(2)


def test_rollback_restores_last_good_checkpoint_and_lowers_learning_rate(
    trained_workdir, tmp_path):
  strategy = tf.distribute.get_strategy()
  workdir = copy_of(trained_workdir, tmp_path)  # tiny() trained 2 steps
  first = SynthesisTask(tiny(), strategy)
  tf.train.Checkpoint(hat=first.hat).read(str(workdir / 'checkpoints' / 'ckpt-2')).expect_partial()
  good = [v.numpy().copy() for v in first.hat.trainable_variables]
  # resumed with absurd learning rates: the next steps diverge, the run rolls back to step 2 and
  # continues with both rates x 1e-35 (effectively 1e-5), so it finishes finite
  absurd = tiny(**{'optim.hat_lr': 1e30, 'optim.gen_lr': 1e30,
                   'training.rollback_on_divergence': True,
                   'training.rollback_lr_factor': 1e-35, 'training.max_rollbacks': 1})
  task = SynthesisTask(absurd, strategy)
  trainer = Trainer(task, absurd, str(workdir), strategy, verbose=False)
  metrics = trainer.train(4)
  assert trainer.guard.rollbacks == 1
  assert int(trainer.step.numpy()) == 4
  assert all(np.isfinite(v) for v in metrics.values())
  np.testing.assert_allclose(float(task.lr_scale.numpy()), 1e-35, rtol=1e-4)
  drift = max(float(np.max(np.abs(a - b.numpy())))
              for a, b in zip(good, task.hat.trainable_variables))
  assert drift < 1e-3  # two steps at an effective lr of 1e-5 from the restored weights


def test_truncated_checkpoint_is_a_clear_error_and_is_left_in_place(trained_workdir, tmp_path):
  strategy = tf.distribute.get_strategy()
  config = tiny()
  workdir = copy_of(trained_workdir, tmp_path)  # tiny() trained 2 steps
  ckpt = workdir / 'checkpoints'
  data = [p for p in os.listdir(ckpt) if p.startswith('ckpt-2.data')][0]
  with open(ckpt / data, 'r+b') as f:
    f.truncate(100)
  before = sorted(os.listdir(ckpt))
  with pytest.raises(ValueError, match=r'cannot restore checkpoint .*ckpt-2'):
    Trainer(SynthesisTask(config, strategy), config, str(workdir), strategy,
            verbose=False).train(4)
  assert sorted(os.listdir(ckpt)) == before and os.path.getsize(ckpt / data) == 100
