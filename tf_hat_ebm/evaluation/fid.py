"""FID: feature activations streamed batch by batch, Frechet distance by TF-GAN (tfgan_compat).

Feature networks map images in [-1, 1] ([N, size, size, channels] float32) to activations [N, d]:
  * the standard Inception (TF-GAN's `INCEPTION_TFHUB`, pool_3), for numbers comparable with the
    paper: loaded once from a local copy or TF-Hub (TFHUB_CACHE_DIR honoured), never replaced
    silently by anything else;
  * a small classifier trained on the dataset (`features.py`), for data where Inception features
    mean little (the 16x16 digits).
Only activations are kept in memory, never all the images. Data activations are cached per
dataset / split / resolution / feature network in `<workdir>/fid_stats/`.
"""
import io
import os
import zipfile
import time
from typing import Dict, List, Optional, Protocol, Tuple

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import progress
from tf_hat_ebm import registry
from tf_hat_ebm import run_lib
from tf_hat_ebm import trained_run
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm import summaries
from tf_hat_ebm import tfgan_compat
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.evaluation import features

INCEPTION_HELP = (
    'provide it with --inception_path=DIR, a local copy of {url} (download '
    '{url}?tf-hub-format=compressed and extract the .tar.gz into DIR), or set TFHUB_CACHE_DIR to a '
    'TF-Hub cache that holds it; for small data use --feature_net=classifier')


class FeatureNetUnavailableError(ValueError):
  """The requested feature network cannot be loaded (no silent fallback to another one)."""


def to_inception_input(images):
  """[-1, 1] images -> Inception input as TF-GAN's `preprocess_image` builds it.

  Pixels are quantised to uint8 first (what a saved image holds; samples may overshoot [-1, 1]),
  greyscale is repeated to RGB, then bilinear resize to 299 and (x - 128) / 128.
  """
  images = tf.convert_to_tensor(images, tf.float32)
  pixels = tf.round((tf.clip_by_value(images, -1.0, 1.0) + 1.0) * 127.5)
  if pixels.shape[-1] == 1:
    pixels = tf.tile(pixels, [1, 1, 1, 3])
  size = tfgan_compat.INCEPTION_DEFAULT_IMAGE_SIZE
  resized = tf.compat.v1.image.resize(pixels, [size, size],
                                      method=tf.image.ResizeMethod.BILINEAR)
  return (resized - 128.0) / 128.0


class InceptionFeatures:
  """pool_3 activations (2048) of TF-GAN's Inception, loaded once."""

  def __init__(self, inception_path=None):
    source = inception_path or tfgan_compat.INCEPTION_TFHUB
    try:
      self.module = tfgan_compat.import_hub().load(source)
    except Exception as e:  # pylint: disable=broad-except  (hub raises OSError, URLError, ...)
      first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
      cache = os.environ.get('TFHUB_CACHE_DIR', '(TFHUB_CACHE_DIR not set)')
      raise FeatureNetUnavailableError(
          f'cannot load the Inception network for FID from {source} (TF-Hub cache: {cache}): '
          f'{first}; ' + INCEPTION_HELP.format(url=tfgan_compat.INCEPTION_TFHUB)) from e
    self.name = 'inception_pool3'
    self.description = f'Inception pool_3 ({source})'

  @tf.function
  def _features(self, images):
    out = self.module(to_inception_input(images))
    return tf.reshape(out[tfgan_compat.INCEPTION_FINAL_POOL], [tf.shape(images)[0], -1])

  def __call__(self, images):
    return self._features(tf.convert_to_tensor(images, tf.float32))


def check_memory(num_samples, dim=2048, sets=4):
  """Refuses an FID whose activations (`sets` sets of num_samples x dim float32, as the rows of
  a joint run) cannot fit in this machine's memory, before any sampling."""
  needed = sets * num_samples * dim * 4
  try:
    total = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
  except (ValueError, OSError, AttributeError):
    return
  if needed > total / 2:
    raise ValueError(f'--num_samples={num_samples}: the FID activations need about '
                     f'{needed / 1e9:.3g} GB, more than half of this machine\'s '
                     f'{total / 1e9:.3g} GB of memory; ask for fewer samples')


def frechet_distance(activations1, activations2):
  """FID between two sets of activations [n, d] (float64 math, unbiased covariances)."""
  return float(tfgan_compat.frechet_distance(
      tf.constant(activations1, tf.float64), tf.constant(activations2, tf.float64)))


def activations(batches, feature_net, total=None, label=None, verbose=True):
  """Features of every image of an iterable of image batches, kept as float32 activations only."""
  progbar = progress.Progress(total, unit='images') if verbose and total else None
  if verbose and label:
    print(label, flush=True)
  out, seen = [], 0
  for batch in batches:
    out.append(np.asarray(tfgan_compat.run_classifier_fn(batch, feature_net), np.float32))
    seen += len(out[-1])
    if progbar is not None:
      progbar.update(seen)
  return np.concatenate(out)


def stats_path(cache_dir, data_cfg, split, feature_net):
  classes = ''.join(f'{c}' for c in data_cfg.get('classes') or ())
  name = (f'{data_cfg.name}_{split}_{data_cfg.image_size}px_c{data_cfg.channels}_'
          f'{f"classes{classes}_" if classes else ""}{feature_net.name}.npz')
  return os.path.join(cache_dir, 'fid_stats', name)


def data_activations(data_cfg, split, feature_net, cache_dir, batch_size=250, verbose=True):
  """Activations of a whole data split, computed once and cached in cache_dir/fid_stats/."""
  path = stats_path(cache_dir, data_cfg, split, feature_net)
  if tf.io.gfile.exists(path):
    try:
      with tf.io.gfile.GFile(path, 'rb') as f:
        cached = np.load(io.BytesIO(f.read()))['activations']
      if cached.ndim == 2 and len(cached) and np.all(np.isfinite(cached)):
        return cached
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, tf.errors.OpError):
      pass  # truncated or foreign: derived data, computed again and replaced below
    if verbose:
      print(f'{path} is unreadable (truncated?): computing it again', flush=True)
  total = int(data_lib.images_dataset(data_cfg, split, training=False).cardinality())
  acts = activations(data_lib.eval_dataset(data_cfg, split, batch_size), feature_net,
                     total=total if total >= 0 else None,
                     label=f'features of {data_cfg.name} {split} split', verbose=verbose)
  tf.io.gfile.makedirs(os.path.dirname(path))
  buffer = io.BytesIO()  # np.savez seeks: build the file in memory, then write it (GCS too)
  np.savez(buffer, activations=acts)
  workdir_lib.write_atomic(path, buffer.getvalue())  # never a half-written cache
  return acts


def fids_over_runs(batches, feature_net, reference, runs, verbose=True, what='samples',
                   total=None):
  """{method: [FID per run]} against `reference` activations: `batches(r)` yields the
  {method: images} batches of run r, `total` images of each method per run (shown as progress
  over the sampling, which takes most of the time); only activations are kept, batch by batch."""
  fids = {}
  for r in range(runs):
    if verbose:
      print(f'FID run {r + 1}/{runs}: {what}', flush=True)
    bar = progress.Progress(total, unit='samples') if verbose and total else None
    acts, seen = {}, 0
    start = time.perf_counter()
    for out in batches(r):
      for name, x in out.items():
        acts.setdefault(name, []).append(
            np.asarray(tfgan_compat.run_classifier_fn(x, feature_net), np.float32))
      seen += len(acts[name][-1])
      if bar is not None:
        bar.update(min(seen, total))
    for name, parts in acts.items():
      fids.setdefault(name, []).append(frechet_distance(reference, np.concatenate(parts)))
    if verbose:  # sampling, features and distances of every method of the run
      print(f'FID run {r + 1}/{runs} took {time.perf_counter() - start:.1f} s', flush=True)
  return fids


def sample_fids(module, feature_net, reference, num_samples, batch_size=250, runs=1, seed=0,
                verbose=True):
  """FID of `runs` independent sets of samples against reference activations.

  Returns {'hat_ebm': [fid per run], 'generator': [...]}: X = G(Z) + Y and G(Z) of the same chains.
  Batch b of run r draws the stream (seed, b, r) (samples.stream_seed): runs share no chain.
  """
  def batches(r):
    for out in samples_lib.sample_batches(module, num_samples, batch_size, seed, r):
      # G(Z) is scored as an image, clipped to [-1, 1] as the Hat EBM samples are.
      yield {'hat_ebm': out['images'],
             'generator': tf.clip_by_value(out['generator_images'], -1.0, 1.0)}
  return fids_over_runs(batches, feature_net, reference, runs, verbose,
                        f'{num_samples} samples', total=num_samples)


def score_table(rows, first='samples'):
  """The markdown table every evaluation script prints: rows [(label, {column: value})], a value
  a number or (mean, std) shown as 'mean ± std' (std None: the mean alone). FID with 2 decimals,
  other scores with 3."""
  columns = []
  for _, values in rows:
    columns += [c for c in values if c not in columns]

  def cell(column, value):
    if value is None:
      return '-'
    mean, std = value if isinstance(value, tuple) else (value, None)
    digits = 2 if column.startswith('FID') else 3
    return f'{mean:.{digits}f}' + ('' if std is None else f' ± {std:.{digits}f}')

  table = [[label] + [cell(c, values.get(c)) for c in columns] for label, values in rows]
  widths = [max(len(r[i]) for r in table + [[first] + columns]) for i in range(len(columns) + 1)]

  def line(cells):
    return '| ' + ' | '.join(c.ljust(w) for c, w in zip(cells, widths)) + ' |'

  return [line([first] + columns), '|' + '|'.join('-' * (w + 2) for w in widths) + '|'] + [
      line(r) for r in table]


def mean_std(values):
  """(mean, std) over FID runs; std is the sample std (ddof 1), None for a single run (one run
  says nothing of the spread)."""
  values = np.asarray(values, np.float64)
  return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else None


def feature_net_name(data_cfg, feature_net=None):
  """The feature network `feature_net` names, by default the classifier for the digits."""
  return feature_net or ('classifier' if data_cfg.name == 'digits' else 'inception')


def feature_network(data_cfg, feature_net=None, inception_path=None, cache_dir=None):
  """The feature network of an evaluation: Inception, or the dataset's classifier (the default
  for the digits, where Inception features mean little)."""
  if feature_net_name(data_cfg, feature_net) == 'inception':
    return InceptionFeatures(inception_path)  # loaded once, used for every set
  return features.classifier_features(data_cfg, cache_dir)


class FidRows(Protocol):
  """A kind's `fid_rows` hook (registry.Kind.hooks, evaluation/rows.py): the FID of each method
  a run of the kind offers, as ([(method, row label)], {method: [FID per run]}, chain)."""

  def __call__(self, run: trained_run.Run, net, train: np.ndarray, num_samples: int, runs: int,
               seed: int, batch_size: int, baselines: bool = True
               ) -> Tuple[List[Tuple[str, str]], Dict[str, List[float]], str]:
    ...


class LoadRun(Protocol):
  """A kind's `fid_run` hook: its run read for its FID rows when it has no inference model for
  trained_run.load_run (an SN-GAN's generator alone)."""

  def __call__(self, workdir: str, checkpoint: Optional[str] = None):
    ...


def load_for_fid(workdir, checkpoint=None, **load):
  """A run as its kind's FID rows read it, and those rows' function."""
  kind = registry.for_config(trained_run.load_config(workdir, load.get('trust_code', False)))
  rows: Optional[FidRows] = kind.load_hook('fid_rows')
  if rows is None:
    raise ValueError(f'--workdir={workdir}: {kind.name} runs offer no FID rows')
  load_run: Optional[LoadRun] = kind.load_hook('fid_run')
  run = (load_run(workdir, checkpoint) if load_run else
         trained_run.load_run(workdir, checkpoint=checkpoint, **load))
  return run, rows


def evaluate_run(workdir, num_samples=None, runs=3, batch_size=250,
                 feature_net=None, inception_path=None, feature_cache_dir=None, seed=0,
                 overwrite=False, baselines=True, **load):
  """tf-hat-ebm-evaluate-fid: the FID rows of the run's kind (its FidRows hook) beside the
  test split's FID, mean +- std over `runs` sample sets of `num_samples` (default 50,000 with
  Inception as in the paper, 5,000 with the classifier); the Hat EBM's row alone without
  `baselines`. Printed, written to <workdir>/fid.json
  (an existing one only with `overwrite`, never a non-finite result) and logged to the
  workdir's TensorBoard (eval/fid_<method>) at the checkpoint's step. Returns the result."""
  path = os.path.join(workdir, 'fid.json')
  run_lib.check_output_file(path, overwrite)
  run, rows_of = load_for_fid(workdir, **load)
  data_cfg = run.config.data
  inception = feature_net_name(data_cfg, feature_net) == 'inception'
  num_samples = num_samples or (50_000 if inception else 5_000)
  check_memory(num_samples)  # before any network is loaded or trained
  net = feature_network(data_cfg, feature_net, inception_path, feature_cache_dir)
  train, test = (data_activations(data_cfg, split, net, workdir, batch_size)
                 for split in (data_cfg.train_split, data_cfg.test_split))
  methods, fids, chain = rows_of(run, net, train, num_samples, runs, seed, batch_size,
                                 baselines=baselines)
  data_fid = frechet_distance(train, test)
  rows = [(f'{label} ({num_samples})', *mean_std(fids[key])) for key, label in methods]
  rows.append((f'data: {data_cfg.test_split} split ({len(test)})', data_fid, None))
  print(f'\nFID vs {data_cfg.name} {data_cfg.train_split} split ({len(train)} images), '
        f'step {run.step} of {workdir}')
  print(f'features: {net.description}; {runs} run(s) (mean ± sample std over runs); '
        f'sampling chain {chain}')
  print('\n'.join(score_table([(name, {'FID': (mean, std)}) for name, mean, std in rows])))
  result = dict(step=run.step, feature_net=net.name, feature_description=net.description,
                num_samples=num_samples, runs=runs, data_test_vs_train=data_fid,
                reference=f'{data_cfg.name}/{data_cfg.train_split}',
                **{key: fids[key] for key, _ in methods})
  run_lib.write_json(path, result)
  summaries.log_evaluation(
      workdir, run.step, {**{f'fid_{key}': mean_std(fids[key])[0] for key, _ in methods},
                          'fid_data_test_vs_train': data_fid}, summaries.EVAL)
  print(f'written to {path}; TensorBoard: {workdir}/tensorboard (eval/)')
  return result
