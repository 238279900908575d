"""Sampling CLI pieces: the Langevin-path figure's rows and steps, grids, npz, TensorBoard."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import runs
from tf_hat_ebm import export
from tf_hat_ebm import images as images_lib
from tf_hat_ebm import samples as samples_lib


def cell(figure, row, col, size=16, pad=1):
  top, left = pad + row * (size + pad), pad + col * (size + pad)
  return figure[top:top + size, left:left + size]


def test_path_figure_has_rows_x_gz_y_per_chain_and_a_column_per_step(trained_workdir, tmp_path):
  module = export.build_module(runs.load_run(trained_workdir), path_steps=[0, 1, 2])
  written, figure, steps = samples_lib.write_samples(
      module, str(tmp_path), num_samples=5, seed=3, batch_size=4, path_chains=2,
      tensorboard_dir=str(tmp_path / 'tb'), step=7)
  assert steps == [0, 1, 2]
  assert figure.shape == (3 * 2 * 17 + 1, 3 * 17 + 1, 1)  # 2 chains x 3 rows, 3 steps
  path = module.sample_path(2, 3)
  for chain in range(2):
    for col in range(3):
      np.testing.assert_array_equal(cell(figure, 3 * chain, col),
                                    images_lib.to_uint8(path['images'][col, chain]))
      np.testing.assert_array_equal(cell(figure, 3 * chain + 1, col),
                                    images_lib.to_uint8(path['generator_images'][chain]))
      np.testing.assert_array_equal(cell(figure, 3 * chain + 2, col),
                                    images_lib.to_uint8(path['residuals'][col, chain], 5.0))
  names = sorted(os.path.basename(p) for p in written)
  assert names == ['generator_grid_000.png', 'langevin_path.png', 'residual_x5_grid_000.png',
                   'samples.npz', 'samples_grid_000.png']
  npz = np.load(tmp_path / 'samples.npz')
  assert npz['images'].shape == (5, 16, 16, 1) and int(npz['seed']) == 3
  # batch b draws the stream (seed, b)
  np.testing.assert_allclose(npz['images'][:4],
                             module.sample(4, samples_lib.stream_seed(3, 0))['images'], atol=1e-6)
  tags = [v.tag for e in tf.compat.v1.train.summary_iterator(
      os.path.join(tmp_path / 'tb', os.listdir(tmp_path / 'tb')[0])) for v in e.summary.value]
  assert 'langevin_path' in tags


def test_path_figure_of_a_joint_chain_shows_g_of_z_at_each_step():
  """In a joint chain Z moves: its G(Z) row changes from column to column."""
  rng = np.random.RandomState(0)
  path = {k: rng.uniform(-1, 1, [3, 2, 16, 16, 1]).astype(np.float32)
          for k in ('images', 'generator_images', 'residuals')}
  figure = samples_lib.path_figure(path)
  assert figure.shape == (3 * 2 * 17 + 1, 3 * 17 + 1, 1)
  for chain in range(2):
    for col in range(3):
      np.testing.assert_array_equal(cell(figure, 3 * chain + 1, col),
                                    images_lib.to_uint8(path['generator_images'][col, chain]))


def test_bad_path_steps_are_rejected(trained_workdir):
  run = runs.load_run(trained_workdir)
  with pytest.raises(ValueError, match=r'path steps must lie in 0\.\.2'):
    export.build_module(run, path_steps=[0, 5])
