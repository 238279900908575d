"""Loading a run back from its workdir."""
import json
import logging
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import registry
from tf_hat_ebm import export

from conftest import run_command


def test_load_run_restores_the_trained_networks(trained_workdir):
  run = trained_run.load_run(trained_workdir)
  assert run.step == 2 and run.checkpoint.endswith('ckpt-2')
  assert run.config.model.hat_width == 8
  saved = tf.train.load_variable(run.checkpoint,
                                 'hat/head/kernel/.ATTRIBUTES/VARIABLE_VALUE')
  np.testing.assert_array_equal(run.model.hat.head.kernel.numpy(), saved)
  assert set(run.model.checkpoint_items()) == {'hat', 'generator'}  # no optimizer, no bank


def test_missing_workdir_and_checkpoint_are_one_line_errors(trained_workdir, tmp_path):
  with pytest.raises(ValueError, match='no config.json in workdir'):
    trained_run.load_run(str(tmp_path / 'nowhere'))
  shutil.copy(os.path.join(trained_workdir, 'config.json'), tmp_path / 'config.json')
  with pytest.raises(ValueError, match=r'^no checkpoint in .*checkpoints: train first'):
    trained_run.load_run(str(tmp_path))


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
    config = trained_run.load_config(old_workdir)
  current = trained_run.load_config(trained_workdir)
  assert config.optim.hat_clip_mode == defaults.optim.hat_clip_mode
  assert list(config.optim.hat_lr_boundaries) == list(defaults.optim.hat_lr_boundaries)
  assert config.data.crop == defaults.data.crop
  assert config.model.init == defaults.model.init
  # Every value the file holds is kept (tiny widths, digits), and only the stripped fields filled.
  expected = current.to_dict()
  for section, name in ADDED_LATER:
    expected[section][name] = config[section][name]
  assert config.to_dict() == expected
  notes = [r.getMessage() for r in caplog.records if 'older version' in r.getMessage()]
  assert len(notes) == 1 and all(f'{s}.{n}' in notes[0] for s, n in ADDED_LATER), notes
  with caplog.at_level(logging.WARNING):
    caplog.clear()
    trained_run.load_config(trained_workdir)
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
    trained_run.load_config(workdir)


def test_old_workdir_loads_for_sampling_export_and_evaluation(old_workdir, trained_workdir):
  run = trained_run.load_run(old_workdir)
  reference = trained_run.load_run(trained_workdir)
  assert run.step == 2
  images = np.random.RandomState(0).uniform(-1, 1, [3, 16, 16, 1]).astype(np.float32)
  np.testing.assert_allclose(run.model.hat(images).numpy(), reference.model.hat(images).numpy())
  module, reference_module = export.build_module(run), export.build_module(reference)
  np.testing.assert_allclose(module.sample(2, 7)['images'].numpy(),
                             reference_module.sample(2, 7)['images'].numpy(), atol=1e-5)


def test_scripts_load_an_old_workdir(old_workdir, tmp_path, caplog):
  with caplog.at_level(logging.WARNING):
    result = run_command('sample.py', f'--workdir={old_workdir}', f'--output={tmp_path / "s"}',
                         '--num_samples=2', '--path_chains=1')
  assert result.returncode == 0, result.stderr[-2000:]
  assert any('defaults filled in for' in r.getMessage() for r in caplog.records)
  assert (tmp_path / 's' / 'samples.npz').exists()
