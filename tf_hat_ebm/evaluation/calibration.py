"""How far a small-data FID can go at a sample size N, and what it cannot see.

At the report's N the digits FID (features of the dataset's classifier, features.py, against the
train split's statistics) has a floor well above 0: N held-out test digits score it, mostly
small-sample bias. N *training* digits score the memorisation bound: a generator that copied its
training set. No image is drawn twice: where a set has fewer than N images (the 297 test digits),
its FID at N is extrapolated from a fit FID(n) = a + b / n over subsamples without replacement
(the bias of the covariance estimate falls as 1/n; subsampling a finite pool removes the pool's
own 1/n term, so a is the FID of i.i.d. digits as n grows), with the fit's standard error. A
missing class moves this FID far more than the floor's spread (N test digits without one class),
and each model's samples also get the class histogram by the same classifier and the distance of
each sample to its nearest training image beside the test digits' own.
"""
import os
import zipfile

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import trained_run
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import fid

# The fit's subsample sizes, as fractions of the pool, short of the whole pool (whose draws would
# all be one set); below ~0.3 of the 297 test digits (n < 90 for 64 features) single draws
# scatter by +-5 and dominate an unweighted fit. 20 draws per size make the fit's error ~0.3.
FIT_FRACTIONS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
FIT_DRAWS = 20  # subsamples per size
# The fit's standard error is conditional on the one pool: every subsample shares its images. Its
# spread over pools is measured by the delete-d jackknife (Shao and Wu 1989): the fit redone on
# subsets of POOL_KEEP of the pool, their variance x keep / (1 - keep). A bootstrap pool (drawn with
# replacement) repeats images, which inflates its subsamples' FID and spread (simulated:
# benchmarks/floor_coverage.py). An sd from 50 replicates is itself within ~10%.
POOL_KEEP = 0.8
POOL_REPLICATES = 50


def _mean_std(values):
  mean, std = fid.mean_std(values)
  return dict(mean=mean, std=std, runs=len(values))


def fit_inverse_n(sizes, values, at):
  """Least-squares fit of values = a + b / sizes, each size weighted by 1 / the spread of its
  values (small subsamples scatter most), and its prediction at `at` with the standard error
  from the fit's covariance: {mean, std, a, b, a_std, b_std}."""
  sizes, values = np.asarray(sizes, np.float64), np.asarray(values, np.float64)
  spread = {n: np.std(values[sizes == n], ddof=1) if np.sum(sizes == n) > 1 else 0.0
            for n in set(sizes.tolist())}
  weights = None if min(spread.values()) <= 0 else np.array([1.0 / spread[n] for n in sizes])
  (b, a), cov = np.polyfit(1.0 / sizes, values, 1, w=weights, cov=True)
  v = np.array([1.0 / at, 1.0])
  return dict(mean=float(a + b / at), std=float(np.sqrt(v @ cov @ v)), a=float(a), b=float(b),
              a_std=float(np.sqrt(cov[1, 1])), b_std=float(np.sqrt(cov[0, 0])))


def fid_at(train, acts, num, runs, rng, keep=None, copies=False, spread=None,
           replicates=POOL_REPLICATES):
  """FID against `train` of `num` rows of `acts` (only rows where `keep`), none drawn twice;
  `copies` (the memorisation bound, whose pool is the train split itself): a pool smaller than
  num is drawn with replacement, as a generator that copies its training images repeats them.

  num <= the pool: `runs` draws without replacement (one: the whole pool), method 'measured'.
  Larger: a fit (fit_inverse_n) over subsamples of FIT_FRACTIONS of the pool, FIT_DRAWS each,
  extrapolated to num, method 'extrapolated' with {mean, std (the fit's standard error),
  fit: {a, b, ..., sizes, values}}; with `spread` (a RandomState of its own, so the other
  draws stay as they were), also the pool's own variance over `replicates` subsets of it:
  pool_spread and total_std (its sd, the fit's noise included).
  """
  rows = np.arange(len(acts)) if keep is None else np.flatnonzero(keep)
  pool = len(rows)
  if copies and num > pool:
    draws = [rng.choice(rows, num, replace=True) for _ in range(runs)]
    return dict(_mean_std([fid.frechet_distance(train, acts[d]) for d in draws]),
                method='with replacement', pool=pool)
  if num <= pool:
    draws = [rows] if num == pool else [rng.choice(rows, num, replace=False)
                                        for _ in range(runs)]
    return dict(_mean_std([fid.frechet_distance(train, acts[d]) for d in draws]),
                method='measured', pool=pool)
  sizes, values = subsample_values(train, acts, rows, rng)
  fit = fit_inverse_n(sizes, values, num)
  out = dict(mean=fit.pop('mean'), std=fit.pop('std'), runs=len(values), method='extrapolated',
             pool=pool, fit=dict(fit, sizes=sizes, values=values))
  if spread is not None:
    out['pool_spread'] = pool_spread(train, acts, rows, num, spread, replicates)
    out['total_std'] = out['pool_spread']['std']
  return out


def subsample_values(train, acts, rows, rng, distance=None):
  """(sizes, FIDs) of FIT_DRAWS subsamples of each FIT_FRACTIONS of `rows` (indices into `acts`,
  drawn without replacement of their positions)."""
  distance = distance or fid.frechet_distance
  sizes, values = [], []
  for fraction in FIT_FRACTIONS:
    n = int(round(fraction * len(rows)))
    for _ in range(FIT_DRAWS):
      sizes.append(n)
      values.append(distance(train, acts[rng.choice(rows, n, replace=False)]))
  return sizes, values


def pool_spread(train, acts, rows, num, rng, replicates=POOL_REPLICATES, distance=None):
  """The fit's estimate at `num` over pools of the pool: `replicates` subsets of POOL_KEEP of
  `rows` without replacement, each refitted; {std: the delete-d jackknife's sd of the estimate over
  pools (the fit's own noise included), mean, keep, replicates}."""
  keep = int(round(POOL_KEEP * len(rows)))
  estimates = np.asarray([
      fit_inverse_n(*subsample_values(train, acts, rng.choice(rows, keep, replace=False), rng,
                                      distance), num)['mean'] for _ in range(replicates)])
  scale = keep / (len(rows) - keep)
  return dict(std=float(np.sqrt(scale) * estimates.std(ddof=1)), mean=float(estimates.mean()),
              keep=keep, replicates=replicates)


def split_images(data_cfg, split):
  """The split's images as the model sees them ([n, size, size, c] in [-1, 1])."""
  return np.concatenate(list(data_lib.eval_dataset(data_cfg, split, 500).as_numpy_iterator()))


def predict_classes(feature_net, images, batch_size=500):
  """Class of each image by the FID feature classifier's own head."""
  model = feature_net.model
  return np.concatenate([np.argmax(model(tf.convert_to_tensor(images[i:i + batch_size]),
                                         training=False), axis=-1)
                         for i in range(0, len(images), batch_size)])


def class_histogram(classes, num_classes):
  """{counts, rarest_class, rarest_share} of predicted classes."""
  counts = np.bincount(np.asarray(classes, np.int64), minlength=num_classes)
  rarest = int(np.argmin(counts))
  return dict(counts=counts.tolist(), rarest_class=rarest,
              rarest_share=float(counts[rarest] / max(counts.sum(), 1)))


def nearest_distances(images, train_images, batch_size=500):
  """L2 distance (pixels in [-1, 1]) of each image to its nearest training image."""
  train = train_images.reshape(len(train_images), -1).astype(np.float64)
  train_sq = (train ** 2).sum(1)
  out = []
  for i in range(0, len(images), batch_size):
    x = np.asarray(images[i:i + batch_size], np.float64).reshape(-1, train.shape[1])
    d2 = (x ** 2).sum(1)[:, None] - 2 * x @ train.T + train_sq[None]
    out.append(np.sqrt(np.maximum(d2.min(1), 0.0)))
  return np.concatenate(out)


def calibrate(data_cfg, feature_net, cache_dir, num, runs=3, seed=0,
              replicates=POOL_REPLICATES):
  """The metric's reference points at `num` samples (fid_at: measured over `runs` draws without
  replacement, or extrapolated from a fit where a set is smaller than `num`).

  Returns {num, test_size, floor, memorisation, dropped_class, test}: FID against the train
  split's statistics of held-out test digits, of training digits, and of test digits without
  one class (the rarest of the test split: a generator that misses a mode); `test` is the test
  digits' class histogram and their distances to the nearest training image (the reference of
  `coverage`).
  """
  rng = np.random.RandomState(seed)
  train = fid.data_activations(data_cfg, data_cfg.train_split, feature_net, cache_dir,
                               verbose=False)
  test = fid.data_activations(data_cfg, data_cfg.test_split, feature_net, cache_dir,
                              verbose=False)
  test_images = split_images(data_cfg, data_cfg.test_split)
  train_images = split_images(data_cfg, data_cfg.train_split)
  classes = predict_classes(feature_net, test_images)
  num_classes = int(feature_net.model.output_shape[-1])
  histogram = class_histogram(classes, num_classes)
  dropped = fid_at(train, test, num, runs, rng, classes != histogram['rarest_class'])
  distances = nearest_distances(test_images, train_images)
  return dict(num=num, test_size=len(test),
              floor=fid_at(train, test, num, runs, rng, replicates=replicates,
                           spread=np.random.RandomState([seed, 1]) if replicates else None),
              memorisation=fid_at(train, train, num, runs, rng, copies=True),
              dropped_class=dict(dropped, label=histogram['rarest_class']),
              test=dict(histogram, nn_mean=float(distances.mean()),
                        nn_p5=float(np.percentile(distances, 5))))


def coverage(images, feature_net, data_cfg, calibration):
  """A model's samples by the same classifier and against the training images.

  Returns the class histogram (with the rarest class's share), the mean distance to the nearest
  training image and the share of samples closer to it than 95% of the test digits are
  (calibration['test']['nn_p5']): ~5% for a model as novel as held-out data, ~100% for copies.
  """
  images = np.asarray(images, np.float32)
  num_classes = int(feature_net.model.output_shape[-1])
  out = class_histogram(predict_classes(feature_net, images), num_classes)
  distances = nearest_distances(images, split_images(data_cfg, data_cfg.train_split))
  out.update(nn_mean=float(distances.mean()), share_closer_than_test_p5=float(
      np.mean(distances < calibration['test']['nn_p5'])))
  return out


def _sample_files(entries):
  """[(label, path)] of --samples' label=path entries."""
  out = []
  for entry in entries or ():
    label, eq, path = entry.partition('=')
    if not eq or not label or not path:
      raise ValueError(f'--samples entry {entry!r}: give label=path/to/samples.npz')
    out.append((label, path))
  repeated = sorted({label for label, _ in out if [x for x, _ in out].count(label) > 1})
  if repeated:  # one entry per label: a label is covered or missing, never both
    raise ValueError(f'--samples repeats the label {", ".join(repeated)}: give each model once')
  return out


def check_sample_files(files):
  """Each present --samples file holds sample.py's `images` [N, H, W, C]: checked before the
  calibration's minutes, not after them (a missing file is reported as missing)."""
  for label, path in files:
    if not os.path.exists(path):
      continue
    try:
      with np.load(path) as npz:
        names = list(npz.files)
        shape = npz['images'].shape if 'images' in names else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
      raise ValueError(f'--samples {label}={path} is not a readable .npz ({e})') from None
    if shape is None or len(shape) != 4 or not shape[0]:
      held = f'its arrays are {", ".join(names) or "none"}' if shape is None else (
          f'its images are of shape {list(shape)}')
      raise ValueError(f'--samples {label}={path} has no images array [N, H, W, C] ({held}): '
                       'give a samples.npz written by sample.py')


def calibrate_command(workdir, output, num=1000, runs=3, samples=(), feature_cache_dir=None,
                      overwrite=False):
  """tf-hat-ebm-calibrate-fid: `calibrate` for the dataset of `workdir`'s run, and `coverage`
  of each label=samples.npz in `samples`; writes `output` (JSON)."""
  files = _sample_files(samples)
  check_sample_files(files)
  with outputs.ResultWriter([output], overwrite, 'calibrate_fid.py', 'output'):
    _calibrate(workdir, output, num, runs, files, feature_cache_dir)


def _calibrate(workdir, output, num, runs, files, feature_cache_dir):
  data_cfg = trained_run.load_config(workdir).data
  if data_cfg.name != 'digits':
    raise ValueError(f'--workdir={workdir} is a {data_cfg.name} run: the calibration uses the '
                     'digits classifier')
  data_cfg.classes = ()  # the whole dataset, whatever labels the run trained on
  cache = feature_cache_dir or features.default_cache_dir()
  net = features.classifier_features(data_cfg, cache)
  cal = calibrate(data_cfg, net, cache, num, runs)
  found, missing = {}, []
  for label, path in files:
    if not os.path.exists(path):
      missing.append(label)
      continue
    with np.load(path) as npz:
      found[label] = dict(coverage(npz['images'], net, data_cfg, cal), num=len(npz['images']))
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  result_files.write_json(output, dict(calibration=cal, coverage=found, missing=missing))
  floor = cal['floor']
  pooled = ('' if floor.get('total_std') is None else
            f'; ± {floor["total_std"]:.2f} with the pool\'s own variance')
  print(f'FID at N = {num}: floor {floor["mean"]:.2f} ± {floor["std"] or 0:.2f} '
        f'({floor["method"]}{pooled}), memorisation bound {cal["memorisation"]["mean"]:.2f}, '
        f'missing class {cal["dropped_class"]["mean"]:.2f}')
  for label, c in found.items():
    print(f'{label}: rarest class {c["rarest_class"]} at {100 * c["rarest_share"]:.1f}%, nearest '
          f'training image {c["nn_mean"]:.3f} (test digits {cal["test"]["nn_mean"]:.3f})')
  print(f'written to {output}' + (f'; no samples of {", ".join(missing)}' if missing else ''))
