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

from tf_hat_ebm import export
from tf_hat_ebm import figures
from tf_hat_ebm import interrupts
from tf_hat_ebm import outputs
from tf_hat_ebm import progress as progress_lib
from tf_hat_ebm import result_files
from tf_hat_ebm import trained_run
from tf_hat_ebm import workdir as workdir_lib

GRID_SIZE = 100  # images per PNG grid
ARRAYS = ('images', 'generator_images', 'residuals')
# The PNG grids are figures.SAMPLE_PANELS, in files <name>_grid_NNN.png: a name no training grid
# (samples/samples_<step>.png) can have.


def path_figure(model, path, title, out=None, num_chains=4):
  """The labelled Langevin-path figure (figures.path_figure) of `sample_path`'s output, with
  the mean energy H(X) of the chains at each recorded step; returns its metadata."""
  images = np.asarray(path['images'])[:, :num_chains]
  energies = np.stack([np.asarray(model.energy(tf.constant(x, tf.float32))['energy'])
                       for x in images])
  return figures.path_figure(path, title, out, energies=energies, num_chains=num_chains)


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
  # Each batch's chain in a thread: Ctrl-C stops within a second, not when the chain ends.
  for batch in interrupts.interruptible_iter(sample_batches(model, num_samples, batch_size, seed)):
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


def chain_steps(model):
  """K of the model's sampling chain (recorded in every export's chain_settings), or '?'."""
  try:
    return int(model.chain_settings['steps'].numpy())
  except (AttributeError, KeyError, TypeError):
    return '?'


def run_name(path):
  """The name a figure title gives a workdir or SavedModel: its last path component, not the
  absolute path (which says where it lies, not what it is)."""
  return os.path.basename(os.path.normpath(path)) or path


def write_samples(model, output_dir, num_samples, seed=0, batch_size=250, path_chains=4,
                  tensorboard_dir=None, step=0, verbose=False, source=''):
  """Writes labelled grids, samples.npz and langevin_path.png (also to TensorBoard) into the
  local directory `output_dir`; `source` names the model in the titles. Returns (written paths,
  the path figure's metadata, its chain steps).

  Samples stream to disk batch by batch (memory-mapped .npy parts, zipped into samples.npz at the
  end without loading them), so memory stays bounded whatever `num_samples`.
  """
  parts = {k: os.path.join(output_dir, f'.{k}.npy') for k in ARRAYS}
  arrays, written = None, []
  progress = progress_lib.Progress(num_samples, unit='samples') if verbose else None
  steps = chain_steps(model)
  if verbose:  # a long chain shows nothing until its batch ends: say what is coming
    count = -(-num_samples // batch_size)
    print(f'drawing {num_samples} samples: {count} batch{"es" if count > 1 else ""} of up to '
          f'{batch_size} chains of {steps} Langevin steps (sampling.steps); a line per batch',
          flush=True)
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
        written += _write_grids(arrays, output_dir, i, f'{source}, seed {seed}')
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

  if verbose:
    print(f'the Langevin path figure: {path_chains} more chains of {steps} steps (--path_chains; '
          f'{progress_lib.duration(progress.clock() - progress.t0)} for the samples)', flush=True)
  path = interrupts.interruptible(model.sample_path, num_samples=path_chains, seed=seed)
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
    writer.close()
  return written, meta, meta['steps']


def _write_grids(arrays, output_dir, i, what):
  written = []
  for name, _, key, label, kind, _ in figures.SAMPLE_PANELS:
    images = arrays[key][i * GRID_SIZE:(i + 1) * GRID_SIZE]
    path = os.path.join(output_dir, f'{name}_grid_{i:03d}.png')
    figures.grid_figure([(label, images, kind)], f'{label}: {what}', path)
    written.append(path)
  return written


def _npy_bytes(array):
  buffer = io.BytesIO()
  np.save(buffer, array)
  return buffer.getvalue()


def sample_run(workdir=None, saved_model=None, output=None, num_samples=100, seed=0,
               batch_size=250, path_chains=4, path_steps=None, overwrite=False, **load):
  """tf-hat-ebm-sample: `write_samples` of a workdir's run (at `load`'s checkpoint) or of a
  SavedModel, into `output` (default <workdir>/generated or <saved_model>_samples), which
  holds only this command's files (outputs.OwnedOutput: `overwrite` replaces exactly those).
  Returns the written paths."""
  if bool(workdir) == bool(saved_model):
    raise ValueError('give exactly one of --workdir and --saved_model')
  if not workdir and load.get('checkpoint'):
    raise ValueError('--checkpoint applies to --workdir')
  if not workdir and path_steps:
    raise ValueError('--path_steps applies to --workdir; a SavedModel records its path steps at '
                     'export (tf-hat-ebm-export --path_steps)')
  output = output or (os.path.join(workdir, 'generated') if workdir
                      else os.path.normpath(saved_model) + '_samples')
  out = outputs.OwnedOutput(output, 'sample', overwrite, 'output')
  out.check()  # before the model is loaded
  if workdir:
    run = trained_run.load_run(workdir, **load)
    model = export.build_module(run, path_steps=result_files.int_list(path_steps, 'path_steps'))
    step, source = run.step, f'step {run.step} of {run_name(workdir)}'
  else:
    model, step, source = (export.load_saved_model(saved_model, 'saved_model'), 0,
                           run_name(saved_model))
  with out:
    written, figure, steps = write_samples(
        model, out.staging, num_samples, seed, batch_size, path_chains,
        os.path.join(out.staging, 'tensorboard'), step, verbose=True, source=source)
    out.commit()
  print(f'{num_samples} samples of {source} (seed {seed}) written to {output}:')
  for path in written:
    print(f'  {os.path.basename(path)}')
  print(f'  langevin path: {path_chains} chains, rows {", ".join(figure["rows"][:3])} ... '
        f'at steps {steps}, {figure["size"][0]}x{figure["size"][1]} px; TensorBoard: '
        f'{os.path.join(output, "tensorboard")}')
  return [os.path.join(output, os.path.basename(p)) for p in written]


def gallery(workdir, out='docs/gallery.png', num=36, path_chains=3, seed=0, overwrite=False,
            **load):
  """tf-hat-ebm-gallery: the README's figure, `num` samples X = G(Z) + Y, G(Z) and Y of the
  run's sampling chain as three labelled panels, the Langevin path of `path_chains` chains
  below them, in one PNG `out`. Returns the image [height, width, 4]."""
  with outputs.ResultWriter([out], overwrite, 'gallery.py', 'out'):
    return _gallery(workdir, out, num, path_chains, seed, load)


def _gallery(workdir, out, num, path_chains, seed, load):
  run = trained_run.load_run(workdir, **load)
  module = export.build_module(run)
  drawn = module.sample(num_samples=num, seed=seed)
  what = f'{run.config.name}, step {run.step}'
  grids = figures.grid_figure(
      [('X = G(Z) + Y', drawn['images'].numpy(), 'image'),
       ('G(Z)', drawn['generator_images'].numpy(), 'image'),
       ('Y', drawn['residuals'].numpy(), 'residual')],
      f'Hat EBM samples: {what}', None, columns=int(np.ceil(np.sqrt(num))))
  chain = path_figure(module, module.sample_path(num_samples=path_chains, seed=seed),
                      f'Langevin chains: {what}', None, path_chains)
  image = figures.stack([figures.decode(grids), figures.decode(chain)])
  if os.path.dirname(out):
    tf.io.gfile.makedirs(os.path.dirname(out))
  # Through a temporary file and a rename: a link at `out` is replaced, never written through.
  workdir_lib.write_atomic(out, tf.io.encode_png(image).numpy())
  print(f'wrote {out} ({image.shape[1]}x{image.shape[0]} px) from {what}')
  return image
