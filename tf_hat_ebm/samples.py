"""Writing samples of a Hat EBM: PNG grids, an .npz, and the Langevin-path figure of the paper.

Works with anything that has the `sample` / `sample_path` functions of `export.HatEBMModule`: the
in-process module of a workdir or a loaded SavedModel, so both give the same files for a seed.
"""
import io
import os
import shutil
import zipfile

import numpy as np
import tensorflow as tf

from tf_hat_ebm import images as images_lib

GRID_SIZE = 100  # images per PNG grid
ARRAYS = ('images', 'generator_images', 'residuals')
# (file name prefix, array, magnification) of the PNG grids: <name>_grid_NNN.png, a name no
# training grid (samples/samples_<step>.png) can have.
PANELS = (('samples', 'images', 1.0), ('generator', 'generator_images', 1.0),
          ('residual_x5', 'residuals', 5.0))
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


def stream_seed(seed, batch, run=0):
  """The seed of batch `batch` of evaluation run `run` for a user's `seed`: a hash of the whole
  key (numpy's SeedSequence of the fixed-length [seed, batch, run]), so no two keys share a stream
  (seed + batch would make batch 1 of seed 0 batch 0 of seed 1). 31 bits: every export's seed dtype
  holds it."""
  key = [int(seed), int(batch), int(run)]
  return int(np.random.SeedSequence(key).generate_state(1)[0] >> 1)


def sample_batches(model, num_samples, batch_size, seed, run=0):
  """`model.sample` outputs per batch; batch b draws the stream (seed, b, run)."""
  for b, start in enumerate(range(0, num_samples, batch_size)):
    n = min(batch_size, num_samples - start)
    # Python ints: converted to the signature's dtype (int64 now, int32 in older exports).
    yield model.sample(num_samples=n, seed=stream_seed(seed, b, run))


def batches(model, num_samples, batch_size, seed):
  """(start, {'images', 'generator_images', 'residuals'} numpy) per batch."""
  start = 0
  for batch in sample_batches(model, num_samples, batch_size, seed):
    out = {k: batch[k].numpy() for k in ARRAYS}
    yield start, out
    start += len(out['images'])


def draw(model, num_samples, batch_size, seed):
  """{'images', 'generator_images', 'residuals'} numpy for num_samples (in memory)."""
  out = {}
  for _, batch in batches(model, num_samples, batch_size, seed):
    for k in ARRAYS:
      out.setdefault(k, []).append(batch[k])
  return {k: np.concatenate(v) for k, v in out.items()}


def check_space(output_dir, num_samples, image_shape):
  """Refuses a request whose samples.npz cannot fit on the output's disk, before any sampling."""
  needed = 2 * len(ARRAYS) * num_samples * int(np.prod(image_shape)) * 4  # .npy parts + the .npz
  try:
    free = shutil.disk_usage(output_dir).free
  except OSError:
    return
  if needed > free:
    raise ValueError(f'{num_samples} samples of {list(image_shape)} need about {needed / 1e9:.3g} '
                     f'GB in {output_dir} (samples.npz and its parts), {free / 1e9:.3g} GB free: '
                     'ask for fewer --num_samples')


def write_samples(model, output_dir, num_samples, seed=0, batch_size=250, path_chains=8,
                  tensorboard_dir=None, step=0, verbose=False):
  """Writes grids, samples.npz and langevin_path.png (also to TensorBoard) into the local
  directory `output_dir`; returns (written paths, path figure, path steps).

  Samples stream to disk batch by batch (memory-mapped .npy parts, zipped into samples.npz at the
  end without loading them), so memory stays bounded whatever `num_samples`.
  """
  parts = {k: os.path.join(output_dir, f'.{k}.npy') for k in ARRAYS}
  arrays, written = None, []
  progress = tf.keras.utils.Progbar(num_samples, unit_name='sample') if verbose else None
  for start, batch in batches(model, num_samples, batch_size, seed):
    if arrays is None:  # the image shape is known from the first batch
      shape = batch['images'].shape[1:]
      check_space(output_dir, num_samples, shape)
      arrays = {k: np.lib.format.open_memmap(p, mode='w+', dtype=np.float32,
                                             shape=(num_samples, *shape))
                for k, p in parts.items()}
    for k in ARRAYS:
      arrays[k][start:start + len(batch[k])] = batch[k]
    end = start + len(batch['images'])
    # A grid is written once its GRID_SIZE samples (or the last ones) are on disk.
    for i in range(start // GRID_SIZE, -(-end // GRID_SIZE)):
      if min((i + 1) * GRID_SIZE, num_samples) <= end:
        written += _write_grids(arrays, output_dir, i)
    if progress is not None:
      progress.update(end)
  for array in arrays.values():
    array.flush()
  del arrays
  npz = os.path.join(output_dir, 'samples.npz')
  with zipfile.ZipFile(npz, 'w', zipfile.ZIP_STORED, allowZip64=True) as f:
    f.writestr('seed.npy', _npy_bytes(np.asarray(seed)))
    for k, part in parts.items():
      f.write(part, arcname=f'{k}.npy')  # copied in chunks
      os.remove(part)
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
    writer.close()
  return written, figure, steps


def _write_grids(arrays, output_dir, i):
  written = []
  for name, key, magnify in PANELS:
    images = arrays[key][i * GRID_SIZE:(i + 1) * GRID_SIZE]
    path = os.path.join(output_dir, f'{name}_grid_{i:03d}.png')
    images_lib.write_png(path, images_lib.grid(images_lib.to_uint8(images, magnify=magnify)))
    written.append(path)
  return written


def _npy_bytes(array):
  buffer = io.BytesIO()
  np.save(buffer, array)
  return buffer.getvalue()
