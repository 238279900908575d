"""Export of a joint Hat EBM (refinement over a user's SavedModel generator): refine(latents)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm.tasks.joint import JointTask
from tf_hat_ebm.trainer import Trainer

# saved_decoder is a fixture: imported so pytest finds it here.
from test_refinement import saved_decoder  # noqa: F401  pylint: disable=unused-import
from test_refinement import savedmodel_config


@pytest.mark.slow
def test_joint_export_round_trip_with_refine(saved_decoder, tmp_path):  # noqa: F811
  config = savedmodel_config(saved_decoder)
  strategy = tf.distribute.get_strategy()
  workdir = str(tmp_path / 'run')
  Trainer(JointTask(config, strategy), config, workdir, strategy, verbose=False).train(2)
  run = trained_run.load_run(workdir, trust_code=True)  # its SavedModel: our own
  module = export.build_module(run)
  latents = tf.random.stateless_normal([3, 4], [0, 1])
  first = module.refine(latents)
  assert first['images'].shape == (3, 16, 16, 1) and first['latents'].shape == (3, 4)
  assert not np.allclose(first['latents'].numpy(), latents.numpy())  # the chain moved Z
  np.testing.assert_array_equal(first['images'].numpy(), module.refine(latents)['images'].numpy())
  sample = module.sample(tf.constant(5, tf.int64), tf.constant(7, tf.int64))
  path = module.sample_path(tf.constant(5, tf.int64), tf.constant(7, tf.int64))
  np.testing.assert_allclose(path['images'][-1].numpy(), sample['images'].numpy(), atol=1e-5)
  # The model card describes the joint chain as the FID report does: both step sizes.
  s = run.model.sampling
  assert f'| sampling chain | {s.describe()} |' in export.model_card(module, run)
  assert f'eps_z={s.latent_step_size:g}' in s.describe()
  out = str(tmp_path / 'exported')
  export.save(module, out)
  np.save(tmp_path / 'latents.npy', latents.numpy())
  code = ('import numpy as np, tensorflow as tf, sys\n'
          f'm = tf.saved_model.load({out!r})\n'
          f'z = np.load({str(tmp_path / "latents.npy")!r})\n'
          'x = m.refine(tf.constant(z))["images"].numpy()\n'
          f'np.save({str(tmp_path / "refined.npy")!r}, x)\n'
          'print(sorted(m.signatures))\n')
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH='')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path), timeout=300)
  assert result.returncode == 0, result.stderr
  assert "'refine'" in result.stdout and "'sample'" in result.stdout
  np.testing.assert_allclose(np.load(tmp_path / 'refined.npy'), first['images'].numpy(),
                             atol=1e-5)
