"""Loading a run back from its workdir."""
import json
import logging
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import runs
from tf_hat_ebm import registry
from tf_hat_ebm import export

from conftest import REPO


def test_load_run_restores_the_trained_networks(trained_workdir):
  run = runs.load_run(trained_workdir)
  assert run.step == 2 and run.checkpoint.endswith('ckpt-2')
  assert run.config.model.hat_width == 8
  saved = tf.train.load_variable(run.checkpoint,
                                 'hat/head/kernel/.ATTRIBUTES/VARIABLE_VALUE')
  np.testing.assert_array_equal(run.model.hat.head.kernel.numpy(), saved)
  assert set(run.model.checkpoint_items()) == {'hat', 'generator'}  # no optimizer, no bank


def test_missing_workdir_and_checkpoint_are_one_line_errors(trained_workdir, tmp_path):
  with pytest.raises(ValueError, match='no config.json in workdir'):
    runs.load_run(str(tmp_path / 'nowhere'))
  shutil.copy(os.path.join(trained_workdir, 'config.json'), tmp_path / 'config.json')
  with pytest.raises(ValueError, match=r'^no checkpoint in .*checkpoints: train first'):
    runs.load_run(str(tmp_path))


# Fields added after early runs, stripped to make an older workdir's config.json.
ADDED_LATER = (('optim', 'hat_clip_mode'), ('optim', 'hat_lr_boundaries'), ('data', 'crop'),
               ('model', 'init'))


@pytest.fixture(scope='module')
def old_workdir(trained_workdir, tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp('old') / 'w')
  shutil.copytree(trained_workdir, workdir)
  path = os.path.join(workdir, 'config.json')
  with open(path) as f:
    old = json.load(f)
  for section, name in ADDED_LATER:
    del old[section][name]
  with open(path, 'w') as f:
    json.dump(old, f)
  return workdir


def test_old_config_json_gets_defaults_for_fields_added_since(old_workdir, trained_workdir, caplog):
  defaults = registry.defaults('synthesis')
  with caplog.at_level(logging.WARNING):
    config = runs.load_config(old_workdir)
  current = runs.load_config(trained_workdir)
  assert config.optim.hat_clip_mode == defaults.optim.hat_clip_mode
  assert list(config.optim.hat_lr_boundaries) == list(defaults.optim.hat_lr_boundaries)
  assert config.data.crop == defaults.data.crop
  assert config.model.init == 'mimicry' != defaults.model.init  # what runs before init used
  # Every value the file holds is kept (tiny widths, digits), and only the stripped fields filled.
  expected = current.to_dict()
  for section, name in ADDED_LATER:
    expected[section][name] = config[section][name]
  assert config.to_dict() == expected
  notes = [r.getMessage() for r in caplog.records if 'older version' in r.getMessage()]
  assert len(notes) == 1 and all(f'{s}.{n}' in notes[0] for s, n in ADDED_LATER), notes
  with caplog.at_level(logging.WARNING):
    caplog.clear()
    runs.load_config(trained_workdir)
  assert not [r for r in caplog.records if 'older version' in r.getMessage()]


def test_a_field_the_kind_does_not_have_is_named_not_kept(old_workdir, tmp_path):
  workdir = str(tmp_path / 'w')
  shutil.copytree(old_workdir, workdir)
  path = os.path.join(workdir, 'config.json')
  with open(path) as f:
    old = json.load(f)
  old['model']['hat_width_legacy'] = 3  # removed, misspelt or foreign: never silently ignored
  old['legacy'] = {'x': 1}
  with open(path, 'w') as f:
    json.dump(old, f)
  with pytest.raises(ValueError, match='unknown config fields legacy, model.hat_width_legacy'):
    runs.load_config(workdir)


def test_old_workdir_loads_for_sampling_export_and_evaluation(old_workdir, trained_workdir):
  run = runs.load_run(old_workdir)
  reference = runs.load_run(trained_workdir)
  assert run.step == 2
  images = np.random.RandomState(0).uniform(-1, 1, [3, 16, 16, 1]).astype(np.float32)
  np.testing.assert_allclose(run.model.hat(images).numpy(), reference.model.hat(images).numpy())
  module, reference_module = export.build_module(run), export.build_module(reference)
  np.testing.assert_allclose(module.sample(2, 7)['images'].numpy(),
                             reference_module.sample(2, 7)['images'].numpy(), atol=1e-5)


@pytest.mark.slow
def test_scripts_load_an_old_workdir(old_workdir, tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO)
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, 'experiments', 'sample.py'), f'--workdir={old_workdir}',
       f'--output={tmp_path / "s"}', '--num_samples=2', '--path_chains=1'],
      capture_output=True, text=True, env=env, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert 'defaults filled in for' in result.stderr and 'model.init' in result.stderr
  assert (tmp_path / 's' / 'samples.npz').exists()
