"""Writing samples of a Hat EBM: PNG grids, an .npz, and the Langevin-path figure of the paper.

Works with anything that has the `sample` / `sample_path` functions of `export.HatEBMModule`: the
in-process module of a workdir or a loaded SavedModel, so both give the same files for a seed.
"""
import io
import os

import numpy as np
import tensorflow as tf

from tf_hat_ebm import figures

GRID_SIZE = 100  # images per PNG grid
# Sample files: (name prefix, `sample` output, panel label, kind).
PANELS = (('samples', 'images', 'X = G(Z) + Y', 'image'),
          ('generator', 'generator_images', 'G(Z)', 'image'),
          ('residual', 'residuals', 'Y', 'residual'))


def path_figure(model, path, title, out=None, num_chains=4):
  """The labelled Langevin-path figure (figures.path_figure) of `sample_path`'s output, with
  the mean energy H(X) of the chains at each recorded step; returns its metadata."""
  images = np.asarray(path['images'])[:, :num_chains]
  energies = np.stack([np.asarray(model.energy(tf.constant(x, tf.float32))['energy'])
                       for x in images])
  return figures.path_figure(path, title, out, energies=energies, num_chains=num_chains)


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


def write_samples(model, output_dir, num_samples, seed=0, batch_size=250, path_chains=4,
                  tensorboard_dir=None, step=0, source=''):
  """Writes labelled grids, samples.npz and langevin_path.png (also to TensorBoard); `source`
  names the model in the titles. Returns (paths, the path figure's metadata, its chain steps)."""
  samples = draw(model, num_samples, batch_size, seed)
  written = []
  for name, key, label, kind in PANELS:
    for i, start in enumerate(range(0, num_samples, GRID_SIZE)):
      path = os.path.join(output_dir, f'{name}_{i:03d}.png')
      figures.grid_figure([(label, samples[key][start:start + GRID_SIZE], kind)],
                          f'{label}: {source}, seed {seed}', path)
      written.append(path)
  npz = os.path.join(output_dir, 'samples.npz')
  buffer = io.BytesIO()  # np.savez seeks: build in memory, then write (works on GCS too)
  np.savez(buffer, seed=seed, **samples)
  with tf.io.gfile.GFile(npz, 'wb') as f:
    f.write(buffer.getvalue())
  written.append(npz)

  path = model.sample_path(num_samples=path_chains, seed=seed)
  figure_path = os.path.join(output_dir, 'langevin_path.png')
  meta = path_figure(model, path, f'Langevin chains: {source}, seed {seed}', figure_path,
                     path_chains)
  written.append(figure_path)
  if tensorboard_dir:
    writer = tf.summary.create_file_writer(tensorboard_dir)
    with writer.as_default(step=step):
      tf.summary.image('samples/langevin_path', figures.decode(meta)[None],
                       description=f'rows {", ".join(meta["rows"])}; columns: chain steps '
                                   f'{meta["steps"]}; Y on +-{meta["y_scale"]:.3g}')
    writer.flush()
  return written, meta, meta['steps']
