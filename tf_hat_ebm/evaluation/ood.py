"""Out-of-distribution detection with the energy H(x): AUROC of in-distribution vs OOD energies.

Higher energy = more out-of-distribution (the paper's Table 3: CIFAR-10 test vs SVHN, CIFAR-100,
CelebA). OOD sets are either tfds datasets, resized to the model's resolution, or sets built
offline for the embedded digits:

  inverted_digits   the test digits with pixel values negated (white background, dark strokes)
  resampled_digits  the test digits upscaled 8 -> size by the other method than the model's data
                    (nearest-neighbour 2x2 blocks for bilinear data, bilinear for nearest)
  uniform_noise     pixels U(-1, 1)
  gaussian_noise    pixels N(0, 0.5^2), clipped to [-1, 1]
  other_digits      the test digits of the labels the model did not train on (data.classes set):
                    a semantic near-OOD set
  natural_patches   random square crops (32 to 160 px) of scikit-learn's two bundled photos
                    (china.jpg, flower.jpg), greyscale, resized (antialiased) to size
"""
import os

import ml_collections
import numpy as np
from sklearn.metrics import roc_auc_score
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import export
from tf_hat_ebm import figures
from tf_hat_ebm import outputs
from tf_hat_ebm import progress
from tf_hat_ebm import result_files
from tf_hat_ebm import trained_run
from tf_hat_ebm import summaries
# The sets' names live with the datasets (TensorBoard's HPARAMS columns name them too).
from tf_hat_ebm.data import default_ood_sets as default_sets
from tf_hat_ebm.data import NEAR_OOD_SETS, OFFLINE_OOD_SETS, TFDS_OOD_SETS


def auroc(in_energies, ood_energies):
  """AUROC of telling OOD (positive) from in-distribution by a higher energy."""
  labels = np.concatenate([np.zeros(len(in_energies)), np.ones(len(ood_energies))])
  return float(roc_auc_score(labels, np.concatenate([in_energies, ood_energies])))


def energies(energy_fn, batches, total=None):
  """Energies of every image of an iterable of batches ([b, size, size, c] float32); progress
  over them (progress.py) when the number of images expected, `total`, is given."""
  bar = progress.Progress(total, unit='images') if total else None
  out, seen = [], 0
  for b in batches:
    out.append(np.asarray(energy_fn(tf.convert_to_tensor(b, tf.float32))))
    seen += len(out[-1])
    if bar is not None:
      bar.update(min(seen, total))
  if bar is not None:
    bar.finish(seen)
  return np.concatenate(out)


# ---- OOD sets --------------------------------------------------------------------------------
def _natural_patches(num, size, channels, rng):
  import sklearn  # pylint: disable=g-import-not-at-top
  # The JPEGs ship with scikit-learn; decoded by TF (load_sample_images would need Pillow).
  directory = os.path.join(os.path.dirname(sklearn.__file__), 'datasets', 'images')
  photos = [tf.io.decode_jpeg(tf.io.read_file(os.path.join(directory, name))).numpy()
            for name in ('china.jpg', 'flower.jpg')]
  patches = []
  for _ in range(num):
    photo = photos[rng.randint(len(photos))]
    side = rng.randint(32, 161)
    top, left = rng.randint(photo.shape[0] - side), rng.randint(photo.shape[1] - side)
    patch = tf.image.resize(photo[top:top + side, left:left + side].astype(np.float32),
                            [size, size], antialias=True)
    if channels == 1:
      patch = tf.image.rgb_to_grayscale(patch)
    patches.append(patch.numpy())
  return np.clip(np.stack(patches) / 127.5 - 1.0, -1.0, 1.0).astype(np.float32)


def offline_set(name, data_cfg, num, seed=0):
  """One of OFFLINE_OOD_SETS or NEAR_OOD_SETS as float32 [num, size, size, channels] in [-1, 1]."""
  rng = np.random.RandomState(seed)
  size, channels = data_cfg.image_size, data_cfg.channels
  shape = [num, size, size, channels]
  if name in ('inverted_digits', 'resampled_digits', 'other_digits'):
    if data_cfg.name != 'digits':
      raise ValueError(f'OOD set {name} is built from the digits; the model is on {data_cfg.name}')
    digits, labels = data_lib.digits_arrays(data_cfg.test_split)
    classes = data_cfg.get('classes') or ()
    if name == 'other_digits':
      if not classes:
        raise ValueError('OOD set other_digits needs a model of some of the digits '
                         '(data.classes), e.g. --config.data.classes=0,1,2,3,4')
      others = [c for c in range(10) if c not in classes]
      digits, _ = data_lib.select_classes(digits, labels, others)
      return tf.image.resize(digits[:num], [size, size], method=data_cfg.resize_method).numpy()
    digits = data_lib.select_classes(digits, labels, classes)[0][:num]
    if name == 'inverted_digits':
      method = data_cfg.resize_method
      return -tf.image.resize(digits, [size, size], method=method).numpy()
    other = 'bilinear' if data_cfg.resize_method == 'nearest' else 'nearest'
    return tf.image.resize(digits, [size, size], method=other).numpy()
  if name == 'uniform_noise':
    return rng.uniform(-1, 1, shape).astype(np.float32)
  if name == 'gaussian_noise':
    return np.clip(rng.normal(0, 0.5, shape), -1, 1).astype(np.float32)
  if name == 'natural_patches':
    return _natural_patches(num, size, channels, rng)
  known = ', '.join(OFFLINE_OOD_SETS + NEAR_OOD_SETS + TFDS_OOD_SETS)
  raise ValueError(f'unknown OOD set {name!r}; known: {known}')


def tfds_set(name, data_cfg, num, batch_size):
  """Test split of tfds dataset `name`, preprocessed as that dataset is, at the model's size."""
  cfg = ml_collections.ConfigDict(data_cfg.to_dict())
  cfg.name, cfg.channels = name, 3
  ds = data_lib.images_dataset(cfg, 'test', training=False).take(num)
  if data_cfg.channels == 1:
    ds = ds.map(tf.image.rgb_to_grayscale)
  return ds.batch(batch_size)


def ood_batches(name, data_cfg, num, batch_size, seed=0):
  if name in TFDS_OOD_SETS:
    return tfds_set(name, data_cfg, num, batch_size)
  images = offline_set(name, data_cfg, num, seed)
  return [images[i:i + batch_size] for i in range(0, len(images), batch_size)]


def evaluate(energy_fn, data_cfg, set_names, num=10_000, batch_size=250, verbose=True,
             energies_out=None):
  """Energies of the test split and of each OOD set; AUROC per set.

  Returns {'in_distribution': {...}, 'sets': {name: {'auroc', 'num', 'mean_energy'}}}; a dict
  `energies_out` receives the energies themselves by set name (the test split under its name).
  """
  if verbose:
    print(f'energies of {data_cfg.name} {data_cfg.test_split} split', flush=True)
  in_e = energies(energy_fn, data_lib.eval_dataset(data_cfg, data_cfg.test_split, batch_size)
                  .take((num + batch_size - 1) // batch_size), num if verbose else None)[:num]
  result = {'in_distribution': {'name': f'{data_cfg.name}/{data_cfg.test_split}',
                                'num': len(in_e), 'mean_energy': float(in_e.mean())},
            'sets': {}}
  for name in set_names:
    if verbose:
      print(f'energies of {name}', flush=True)
    # Offline sets match the test split's size, so both classes weigh the same in the AUROC.
    size = min(num, len(in_e)) if name not in TFDS_OOD_SETS else num
    ood_e = energies(energy_fn, ood_batches(name, data_cfg, size, batch_size),
                     size if verbose else None)
    result['sets'][name] = {'auroc': auroc(in_e, ood_e), 'num': len(ood_e),
                            'mean_energy': float(ood_e.mean())}
    if energies_out is not None:
      energies_out[name] = ood_e
  if energies_out is not None:
    energies_out[result['in_distribution']['name']] = in_e
  return result


def evaluate_run(workdir, sets=None, num=10_000, batch_size=250, data_dir=None, overwrite=False,
                 **load):
  """tf-hat-ebm-evaluate-ood: `evaluate` of the run's energy against `sets` (default_sets), the
  in-distribution set being its dataset's test split (from `data_dir` if given). Printed, written
  to <workdir>/ood.json and ood_energies.png (histograms of H(x) per set; existing ones only with
  `overwrite`) and logged to its TensorBoard (eval/ood_auroc_<set>) at the checkpoint's step."""
  path, png = os.path.join(workdir, 'ood.json'), os.path.join(workdir, 'ood_energies.png')
  with outputs.ResultWriter([path, png], overwrite, 'evaluate_ood.py'):  # one writer at a time
    return _evaluate(path, png, workdir, sets, num, batch_size, data_dir, load)


def _evaluate(path, png, workdir, sets, num, batch_size, data_dir, load):
  run = trained_run.load_run(workdir, **load)
  data_cfg = run.config.data
  if data_dir:
    data_cfg.data_dir = data_dir
  module = export.build_module(run)
  names = sets or default_sets(data_cfg)
  energies_of = {}
  result = evaluate(lambda x: module.energy(x)['energy'], data_cfg, names, num, batch_size,
                    energies_out=energies_of)
  result['step'] = run.step
  ind = result['in_distribution']
  print(f'\nOOD detection by energy H(x), higher = OOD; step {run.step} of {workdir}')
  print(f'in-distribution: {ind["name"]} ({ind["num"]} images, mean H {ind["mean_energy"]:.4g})')
  print('\n'.join(auroc_table(result)))
  result_files.write_json(path, result)
  aurocs = {n: r['auroc'] for n, r in result['sets'].items()}
  figure = figures.energy_histograms(
      energies_of, f'H(x) of {ind["name"]} vs OOD sets: {run.config.name}, step {run.step}', png,
      reference=ind['name'], notes={n: f'AUROC {a:.3f}' for n, a in aurocs.items()})
  summaries.log_evaluation(
      workdir, run.step, {f'ood_auroc_{n}': a for n, a in aurocs.items()},
      {f'ood_auroc_{n}': f'AUROC of telling {n} from {ind["name"]} by H(x): 0.5 is chance, 1 '
       'perfect' for n in aurocs}, figure, energies_of)
  print(f'written to {path} and {png}; TensorBoard: {workdir}/tensorboard (eval/)')
  return result


def auroc_table(result):
  """The markdown lines of `evaluate`'s result: AUROC, images and mean energy per OOD set."""
  width = max(len(n) for n in list(result['sets']) + ['OOD set'])
  lines = [f'| {"OOD set".ljust(width)} | AUROC | images | mean H     |',
           f'|{"-" * (width + 2)}|-------|--------|------------|']
  for name, r in result['sets'].items():
    lines.append(f'| {name.ljust(width)} | {r["auroc"]:.3f} | {r["num"]:6d} | '
                 f'{r["mean_energy"]:<10.4g} |')
  return lines
