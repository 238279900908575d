"""A kind is one object (registry.Kind): a kind defined in two files outside the library
(tests/toykind/: its module and its config) trains, samples, exports and has its FLOP formula."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm import flops
from tf_hat_ebm import registry
from tf_hat_ebm.trainer import Trainer

from conftest import tiny

TOY_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'toykind',
                          'frozen_synthesis_config.py')


@pytest.fixture(name='toy_run', scope='module')
def toy_run_fixture(tmp_path_factory):
  """The toy kind trained for 4 steps: (workdir, task, generator weights before training)."""
  workdir = str(tmp_path_factory.mktemp('toy'))
  config = tiny(TOY_CONFIG)
  strategy = tf.distribute.get_strategy()
  task = registry.for_config(config).make_task(config, strategy)
  before = [v.numpy().copy() for v in task.generator.variables]
  hat_before = [v.numpy().copy() for v in task.hat.variables]
  trainer = Trainer(task, config, workdir, strategy, verbose=False)
  metrics = trainer.train()
  return workdir, task, before, hat_before, metrics


def test_a_kind_from_two_files_trains_with_a_frozen_generator(toy_run):
  workdir, task, before, hat_before, metrics = toy_run
  assert set(metrics) == set(task.metric_names) and all(np.isfinite(list(metrics.values())))
  for v, b in zip(task.generator.variables, before):
    np.testing.assert_array_equal(v.numpy(), b)
  assert any(not np.array_equal(v.numpy(), b) for v, b in zip(task.hat.variables, hat_before))
  assert os.path.exists(os.path.join(workdir, 'checkpoints', 'ckpt-4.index'))


@pytest.mark.graph  # the module's samples against the task's own chain: graphs, as scripts run
def test_a_kind_from_two_files_samples_and_exports(toy_run, tmp_path):
  workdir = toy_run[0]
  run = trained_run.load_run(workdir)
  assert run.step == 4 and run.config.experiment == 'toykind.frozen_synthesis'
  module = export.build_module(run)
  first = module.sample(num_samples=3, seed=5)['images'].numpy()
  assert first.shape == (3, 16, 16, 1) and np.all(np.abs(first) <= 1)
  loaded = tf.saved_model.load(export.save(module, str(tmp_path / 'toy')))
  np.testing.assert_allclose(loaded.sample(num_samples=3, seed=5)['images'].numpy(), first,
                             atol=1e-5)


def test_flop_formulas_come_from_the_kind():
  h, g, batch, steps = 10, 5, 2, 3

  def step_flops(kind):
    return flops.step_flops(registry.get(kind), None, h, g, batch, steps)

  # the toy: chain 2KBh + Bg, EBM update 6Bh, no generator update

  assert step_flops('toykind.frozen_synthesis') == (
      2 * 3 * 2 * 10 + 2 * 5 + 6 * 2 * 10, 2 * 3 * 2 * 10 + 2 * 5)
  # synthesis adds the generator's update: 4Bg in all
  assert step_flops('synthesis')[0] == 120 + 120 + 40
  assert step_flops('sngan') is None


def test_structural_fields_are_the_kinds():
  assert 'training.bank_size' in registry.get('synthesis').structural_keys()
  assert 'training.bank_size' not in registry.get('joint').structural_keys()
  assert registry.get('autoencoder').structural_keys() == registry.STRUCTURAL


def test_unknown_kinds_are_one_line_errors():
  with pytest.raises(ValueError, match="unknown experiment 'gan'; known: synthesis, joint"):
    registry.get('gan')
  with pytest.raises(ValueError, match='no module toykind.missing defining KIND'):
    registry.get('toykind.missing')
