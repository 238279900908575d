"""Sampling CLI pieces: the Langevin-path figure's rows and steps, grids, npz, TensorBoard."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm import samples as samples_lib


def test_path_figure_is_labelled_with_rows_x_y_per_chain_g_z_once_and_the_steps(
    trained_workdir, tmp_path):
  module = export.build_module(trained_run.load_run(trained_workdir), path_steps=[0, 1, 2])
  written, figure, steps = samples_lib.write_samples(
      module, str(tmp_path), num_samples=5, seed=3, batch_size=4, path_chains=2,
      tensorboard_dir=str(tmp_path / 'tb'), step=7, source='tiny')
  assert steps == [0, 1, 2]
  # G(Z) is fixed along a synthesis chain: one column for it, then a column per step.
  assert figure['rows'] == ['X #1', 'Y #1', 'X #2', 'Y #2']
  assert figure['labels'][:4] == ['G(Z)', 'step 0', 'step 1', 'step 2']
  assert 'mean H(X)' in figure['labels'] and figure['title'] == 'Langevin chains: tiny, seed 3'
  path = module.sample_path(2, 3)
  assert figure['y_scale'] == pytest.approx(float(np.max(np.abs(path['residuals']))))
  assert figure['tile_px'] >= 48
  png = tf.io.decode_png(tf.io.read_file(str(tmp_path / 'langevin_path.png'))).numpy()
  assert png.shape[1::-1] == figure['size']
  names = sorted(os.path.basename(p) for p in written)
  assert names == ['generator_grid_000.png', 'langevin_path.png', 'residual_grid_000.png',
                   'samples.npz', 'samples_grid_000.png']
  npz = np.load(tmp_path / 'samples.npz')
  assert npz['images'].shape == (5, 16, 16, 1) and int(npz['seed']) == 3
  # batch b draws the stream (seed, b)
  np.testing.assert_allclose(npz['images'][:4],
                             module.sample(4, samples_lib.stream_seed(3, 0))['images'], atol=1e-6)
  tags = [v.tag for e in tf.compat.v1.train.summary_iterator(
      os.path.join(tmp_path / 'tb', os.listdir(tmp_path / 'tb')[0])) for v in e.summary.value]
  assert 'samples/langevin_path' in tags


def test_bad_path_steps_are_rejected(trained_workdir):
  run = trained_run.load_run(trained_workdir)
  with pytest.raises(ValueError, match=r'path steps must lie in 0\.\.2'):
    export.build_module(run, path_steps=[0, 5])
