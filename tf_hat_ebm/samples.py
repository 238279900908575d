"""Writing samples of a Hat EBM: PNG grids, an .npz, and the Langevin-path figure of the paper.

Works with anything that has the `sample` / `sample_path` functions of `export.HatEBMModule`: the
in-process module of a workdir or a loaded SavedModel, so both give the same files for a seed.
"""
import io
import os

import numpy as np
import tensorflow as tf

from tf_hat_ebm import images as images_lib

GRID_SIZE = 100  # images per PNG grid
PATH_ROWS = ('X = G(Z) + Y', 'G(Z)', 'Y x5')


def path_figure(path, num_chains=None, magnify=5.0):
  """Rows X, G(Z), Y (magnified about 0) for each chain, one column per recorded chain step.

  `path` is `sample_path`'s output: images and residuals [steps, N, h, w, c], generator_images
  [N, h, w, c] (conditional chain, Z fixed) or [steps, N, h, w, c] (joint chain). Returns a uint8
  [3 * chains * (h + 1) + 1, steps * (w + 1) + 1, c] image.
  """
  x, y = np.asarray(path['images']), np.asarray(path['residuals'])
  g_z = np.asarray(path['generator_images'])
  steps, n = x.shape[:2]
  n = min(n, num_chains or n)
  rows = []
  for i in range(n):
    g_row = g_z[:, i] if g_z.ndim == x.ndim else np.repeat(g_z[i][None], steps, axis=0)
    rows += [images_lib.to_uint8(x[:, i]), images_lib.to_uint8(g_row),
             images_lib.to_uint8(y[:, i], magnify=magnify)]
  return images_lib.grid(np.concatenate(rows), columns=steps)


def draw(model, num_samples, batch_size, seed):
  """{'images', 'generator_images', 'residuals'} numpy for num_samples; batch b seeded seed + b."""
  out = {}
  for b, start in enumerate(range(0, num_samples, batch_size)):
    n = min(batch_size, num_samples - start)
    # Python ints: converted to the signature's dtype (int64 now, int32 in older exports).
    batch = model.sample(num_samples=n, seed=seed + b)
    for k in ('images', 'generator_images', 'residuals'):
      out.setdefault(k, []).append(batch[k].numpy())
  return {k: np.concatenate(v) for k, v in out.items()}


def write_samples(model, output_dir, num_samples, seed=0, batch_size=250, path_chains=8,
                  tensorboard_dir=None, step=0):
  """Writes grids, samples.npz and langevin_path.png (also to TensorBoard). Returns the paths."""
  samples = draw(model, num_samples, batch_size, seed)
  written = []
  panels = (('samples', samples['images'], 1.0), ('generator', samples['generator_images'], 1.0),
            ('residual_x5', samples['residuals'], 5.0))
  for name, images, magnify in panels:
    for i, start in enumerate(range(0, num_samples, GRID_SIZE)):
      path = os.path.join(output_dir, f'{name}_{i:03d}.png')
      images_lib.write_png(path, images_lib.grid(
          images_lib.to_uint8(images[start:start + GRID_SIZE], magnify=magnify)))
      written.append(path)
  npz = os.path.join(output_dir, 'samples.npz')
  buffer = io.BytesIO()  # np.savez seeks: build in memory, then write (works on GCS too)
  np.savez(buffer, seed=seed, **samples)
  with tf.io.gfile.GFile(npz, 'wb') as f:
    f.write(buffer.getvalue())
  written.append(npz)

  path = model.sample_path(num_samples=path_chains, seed=seed)
  figure = path_figure(path)
  figure_path = os.path.join(output_dir, 'langevin_path.png')
  images_lib.write_png(figure_path, figure)
  written.append(figure_path)
  steps = [int(s) for s in path['steps'].numpy()]
  if tensorboard_dir:
    writer = tf.summary.create_file_writer(tensorboard_dir)
    with writer.as_default(step=step):
      tf.summary.image('langevin_path', figure[None],
                       description=f'rows {", ".join(PATH_ROWS)} per chain; columns: chain steps '
                                   f'{steps}')
    writer.flush()
  return written, figure, steps
