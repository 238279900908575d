"""Loading a run back from its workdir."""
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import checkpoints


def test_load_run_restores_the_trained_networks(trained_workdir):
  run = checkpoints.load_run(trained_workdir)
  assert run.step == 2 and run.checkpoint.endswith('ckpt-2')
  assert run.config.model.hat_width == 8
  saved = tf.train.load_variable(run.checkpoint,
                                 'hat/head/kernel/.ATTRIBUTES/VARIABLE_VALUE')
  np.testing.assert_array_equal(run.task.hat.head.kernel.numpy(), saved)
  assert run.task.bank is None  # inference builds no bank


def test_missing_workdir_and_checkpoint_are_one_line_errors(trained_workdir, tmp_path):
  with pytest.raises(ValueError, match='no config.json in workdir'):
    checkpoints.load_run(str(tmp_path / 'nowhere'))
  shutil.copy(os.path.join(trained_workdir, 'config.json'), tmp_path / 'config.json')
  with pytest.raises(ValueError, match=r'^no checkpoint in .*checkpoints: train first'):
    checkpoints.load_run(str(tmp_path))
