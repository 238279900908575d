"""FID's parts: the feature networks, activations streamed batch by batch, the Frechet distance
by TF-GAN (tfgan_compat; metrics.py scores every metric with them; evaluate.py is the command).

Feature networks map images in [-1, 1] ([N, size, size, channels] float32) to activations [N, d]:
  * the standard Inception (TF-GAN's `INCEPTION_TFHUB`, pool_3), for numbers comparable with the
    paper: loaded once from a local copy or TF-Hub (TFHUB_CACHE_DIR honoured), never replaced
    silently by anything else;
  * a small classifier trained on the dataset (`features.py`: the shipped one, or with
    --feature_net=classifier_retrained one trained on this machine), for data where Inception
    features mean little (the 16x16 digits).
Only activations are kept in memory, never all the images. Data activations are cached per
dataset / split / resolution / feature network in `<workdir>/fid_stats/`.
"""
import io
import os
import zipfile

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import image_sources
from tf_hat_ebm import progress
from tf_hat_ebm import tfgan_compat
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import named_features

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


@tf.function(input_signature=[tf.TensorSpec([None, None], tf.float64)] * 2)
def _frechet_graph(activations1, activations2):
  # One graph for every set size: a calibration computes hundreds of FIDs, and TF-GAN's ops run
  # one by one eagerly cost ~16 ms per FID of 64 features.
  return tfgan_compat.frechet_distance(activations1, activations2)


def frechet_distance(activations1, activations2):
  """FID between two sets of activations [n, d] (float64 math, unbiased covariances)."""
  return float(_frechet_graph(tf.constant(activations1, tf.float64),
                              tf.constant(activations2, tf.float64)))


def batch_activations(images, feature_net):
  """float32 activations [n, d] of one batch of images."""
  return np.asarray(tfgan_compat.run_classifier_fn(images, feature_net), np.float32)


def activations(batches, feature_net, total=None, label=None, verbose=True):
  """Features of every image of an iterable of image batches, kept as float32 activations only."""
  progbar = progress.Progress(total, unit='images') if verbose and total else None
  if verbose and label:
    print(label, flush=True)
  out, seen = [], 0
  for batch in batches:
    out.append(batch_activations(batch, feature_net))
    seen += len(out[-1])
    if progbar is not None:
      progbar.update(seen)
  return np.concatenate(out)


def stats_path(cache_dir, data_cfg, split, feature_net):
  classes = ''.join(f'{c}' for c in data_cfg.get('classes') or ())
  name = (f'{image_sources.label(data_cfg.name)}_{split}_{data_cfg.image_size}px_'
          f'c{data_cfg.channels}_'
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


def score_table(rows, first='samples', digits=None):
  """The markdown table every evaluation script prints: rows [(label, {column: value})], a value
  a number or (mean, std) shown as 'mean ± std' (std None: the mean alone). Decimals per column
  from `digits`, else FID with 2, other scores with 3."""
  columns = []
  for _, values in rows:
    columns += [c for c in values if c not in columns]

  def cell(column, value):
    if value is None:
      return '-'
    mean, std = value if isinstance(value, tuple) else (value, None)
    n = (digits or {}).get(column, 2 if column.startswith('FID') else 3)
    return f'{mean:.{n}f}' + ('' if std is None else f' ± {std:.{n}f}')

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


def feature_net_name(data_cfg, feature_net=None, features_path=None):
  """The feature network `feature_net` names ('named': the user's network at features_path, or
  data.features), by default the classifier for the digits and Inception for tfds data; a user's
  own images have no default."""
  if features_path or (not feature_net and data_cfg.get('features')):
    return 'named'
  if not feature_net and image_sources.source_of(data_cfg.name):
    raise ValueError(f'{data_cfg.name} has no default feature network: pass --features=PATH (a '
                     'SavedModel mapping images to vectors; --features_range its input range) or '
                     '--feature_net=inception with --inception_path=DIR')
  return feature_net or ('classifier' if data_cfg.name == 'digits' else 'inception')


def feature_network(data_cfg, feature_net=None, inception_path=None, cache_dir=None,
                    features_path=None, features_range=None):
  """The feature network of an evaluation: a user's own (features_path or data.features),
  Inception, or the dataset's classifier (the default for the digits, where Inception features
  mean little)."""
  name = feature_net_name(data_cfg, feature_net, features_path)
  if name == 'named':
    return named_features.NamedFeatures(
        features_path or data_cfg.features, data_cfg.image_size,
        features_range or (None if features_path else data_cfg.get('features_range')))
  if name == 'inception':
    return InceptionFeatures(inception_path)  # loaded once, used for every set
  return features.classifier_features(data_cfg, cache_dir,
                                      retrain=name == 'classifier_retrained')
