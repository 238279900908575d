"""Input pipelines: tfds datasets, the embedded scikit-learn digits and a user's own images
(folder:<path>, array:<path>: image_sources.py), pixels in [-1, 1].

Every pipeline is built per input pipeline from a `tf.distribute.InputContext` (sharded by
pipeline id, batched to the per-replica batch with drop_remainder=True so shapes are static for
TPU).
"""
import socket
import threading

import numpy as np
import tensorflow as tf

from tf_hat_ebm import image_sources
from tf_hat_ebm.validation import check_dataset  # noqa: F401 (the data module's check)
from tf_hat_ebm.validation import CROPS
from tf_hat_ebm.validation import DATASETS

TFDS_DATASETS = DATASETS[1:]

# Fixed split of the 1,797 scikit-learn digits: a seeded permutation, the last 297 for test.
DIGITS_TEST_SIZE = 297
DIGITS_SPLIT_SEED = 0


def to_unit_range(image):
  """uint8 [0, 255] -> float32 [-1, 1]."""
  return tf.cast(image, tf.float32) / 127.5 - 1.0


def digits_arrays(split):
  """The embedded digits as float32 [n, 8, 8, 1] in [-1, 1] (scikit-learn ships them offline)."""
  from sklearn.datasets import load_digits  # pylint: disable=g-import-not-at-top
  digits = load_digits()
  images = digits.images.astype(np.float32) / 16.0 * 2.0 - 1.0
  order = np.random.RandomState(DIGITS_SPLIT_SEED).permutation(len(images))
  test, train = order[:DIGITS_TEST_SIZE], order[DIGITS_TEST_SIZE:]
  if split == 'train':
    idx = train
  elif split == 'test':
    idx = test
  else:
    raise ValueError(f'unknown split {split!r} for digits; use train or test')
  return images[idx][..., None], digits.target[idx]


def select_classes(images, labels, classes):
  """(images, labels) of the examples whose label is in `classes` (empty or None: all)."""
  if classes is None or len(classes) == 0:
    return images, labels
  keep = np.isin(labels, list(classes))
  return images[keep], labels[keep]


def _resize(image, size, method):
  return tf.image.resize(image, [size, size], method=method)


def center_crop_resize(image, size):
  """CelebA: central square crop of the face region, bilinear resize (antialiased) to size."""
  shape = tf.shape(image)
  side = tf.minimum(shape[0], shape[1])
  top, left = (shape[0] - side) // 2, (shape[1] - side) // 2
  image = tf.image.crop_to_bounding_box(image, top, left, side, side)
  return tf.image.resize(image, [size, size], method='bilinear', antialias=True)


def random_resized_crop(image, size, area_range, seed=None):
  """Random crop of area_range of the image, aspect 3/4..4/3, resized to size."""
  bbox = tf.zeros([1, 0, 4])
  begin, crop_size, _ = tf.image.sample_distorted_bounding_box(
      tf.shape(image), bbox, min_object_covered=0.0, aspect_ratio_range=(0.75, 1.333),
      area_range=area_range, max_attempts=10, use_image_if_no_bounding_boxes=True, seed=seed or 0)
  image = tf.slice(image, begin, crop_size)
  return tf.image.resize(image, [size, size], method='bilinear', antialias=True)


def resize_shorter_side(image, size):
  """Bilinear (antialiased) resize so that the shorter side is `size`, aspect kept."""
  shape = tf.cast(tf.shape(image)[:2], tf.float32)
  scale = float(size) / tf.reduce_min(shape)
  new_shape = tf.maximum(tf.cast(tf.round(shape * scale), tf.int32), size)
  return tf.image.resize(image, new_shape, method='bilinear', antialias=True)


def release_crop(image, size, seed=None):
  """ImageNet as the authors' release: shorter side to size, then a random size x size crop."""
  image = resize_shorter_side(image, size)
  return tf.image.random_crop(image, [size, size, tf.shape(image)[2]], seed=seed)


def preprocess_fn(cfg, training):
  """Maps a raw uint8 image to float32 [size, size, channels] in [-1, 1] for dataset cfg.name."""
  size = cfg.image_size
  if cfg.crop not in CROPS:
    raise ValueError(f'data.crop must be one of {CROPS}, not {cfg.crop!r}')

  def fn(image):
    if cfg.name == 'celeb_a':
      image = center_crop_resize(tf.cast(image, tf.float32), size)
    elif cfg.name == 'imagenet2012':
      if not training:
        image = center_crop_resize(tf.cast(image, tf.float32), size)
      elif cfg.crop == 'release':
        image = release_crop(tf.cast(image, tf.float32), size)
      else:
        image = random_resized_crop(tf.cast(image, tf.float32), size, tuple(cfg.crop_area_range))
    elif image.shape[0] != size:
      image = _resize(tf.cast(image, tf.float32), size, 'bilinear')
    image = to_unit_range(image)
    return tf.ensure_shape(image, [size, size, cfg.channels])

  return fn


# tfds looks for a prepared copy on Google Cloud Storage before the dataset's own URLs: if this
# host cannot be reached there is no network, and tfds would retry for minutes before failing.
TFDS_PROBE_HOST = ('storage.googleapis.com', 443)
PROBE_TIMEOUT = 5.0  # seconds


def _can_connect(address):
  """Whether a TCP connection to address opens within PROBE_TIMEOUT (name lookup included)."""
  timeout, result = PROBE_TIMEOUT, []

  def connect():
    try:
      socket.create_connection(address, timeout=timeout).close()
      result.append(True)
    except OSError:
      result.append(False)

  # A thread, because socket timeouts do not cover the name lookup, which can hang on its own.
  thread = threading.Thread(target=connect, daemon=True)
  thread.start()
  thread.join(timeout)
  return bool(result and result[0])


def _download_error(cfg, reason):
  return ValueError(
      f'tfds dataset {cfg.name!r} could not be downloaded (data.download=True): {reason}; set '
      '--config.data.data_dir to a directory holding a prepared copy (and data.download=False), '
      f'or prepare it on a machine with network (tfds build {cfg.name} --data_dir=DIR) and copy '
      'DIR here')


def _download_and_prepare(cfg, builder, download_config):
  """builder.download_and_prepare, failing in seconds with one line when offline."""
  import requests  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  # A prepared copy needs no network; a manual dataset (imagenet2012) is read from manual_dir.
  if not builder.is_prepared() and not builder.MANUAL_DOWNLOAD_INSTRUCTIONS:
    host = f'{TFDS_PROBE_HOST[0]}:{TFDS_PROBE_HOST[1]}'
    if not _can_connect(TFDS_PROBE_HOST):
      raise _download_error(cfg, f'cannot reach {host} within {PROBE_TIMEOUT:g} s (no network?)')
  try:
    builder.download_and_prepare(download_config=download_config)
  except (requests.exceptions.RequestException, tfds.download.DownloadError) as e:
    lines = str(e).strip().splitlines()
    raise _download_error(cfg, lines[0] if lines else type(e).__name__) from e


def _tfds_images(cfg, split, input_context, shuffle_files):
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  read_config = tfds.ReadConfig(input_context=input_context, shuffle_seed=cfg.seed)
  download_config = None
  if cfg.name == 'imagenet2012' and cfg.manual_dir:
    download_config = tfds.download.DownloadConfig(manual_dir=cfg.manual_dir)
  # Without download, a dataset missing locally must fail at once: tfds would otherwise look its
  # metadata up on GCS, minutes of retries without network. tfds has only this switch for it.
  gcs = tfds.core.utils.gcs_utils
  gcs_disabled = gcs._is_gcs_disabled  # pylint: disable=protected-access
  gcs._is_gcs_disabled = gcs_disabled or not cfg.download  # pylint: disable=protected-access
  try:
    builder = tfds.builder(cfg.name, data_dir=cfg.data_dir or None)
    if cfg.download:
      _download_and_prepare(cfg, builder, download_config)
    ds = builder.as_dataset(split=split, shuffle_files=shuffle_files, read_config=read_config)
  except (tfds.core.registered.DatasetNotFoundError, AssertionError, FileNotFoundError) as e:
    first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    raise ValueError(f'tfds dataset {cfg.name!r} (split {split!r}) is not available in data_dir '
                     f'{cfg.data_dir or "(tfds default)"} and download is '
                     f'{"on" if cfg.download else "off"}: {first_line}') from e
  finally:
    gcs._is_gcs_disabled = gcs_disabled  # pylint: disable=protected-access
  return ds.map(lambda ex: ex['image'], num_parallel_calls=tf.data.AUTOTUNE)


def images_dataset(cfg, split, input_context=None, training=True):
  """Unbatched float32 images in [-1, 1] of shape [image_size, image_size, channels]."""
  check_dataset(cfg.name)
  if cfg.name == 'digits':
    images, _ = select_classes(*digits_arrays(split), cfg.get('classes'))
    ds = tf.data.Dataset.from_tensor_slices(images)
    if input_context is not None and input_context.num_input_pipelines > 1:
      ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    size = cfg.image_size
    return ds.map(lambda x: tf.ensure_shape(_resize(x, size, cfg.resize_method),
                                            [size, size, 1]))
  if image_sources.source_of(cfg.name):
    return _user_images(cfg, split, input_context, training)
  ds = _tfds_images(cfg, split, input_context, shuffle_files=training)
  return ds.map(preprocess_fn(cfg, training), num_parallel_calls=tf.data.AUTOTUNE)


def _user_images(cfg, split, input_context, training):
  """A user's folder or array: the central square crop resized, as celeb_a's (any sizes mixed)."""
  ds = image_sources.pixels(cfg, split)
  if input_context is not None and input_context.num_input_pipelines > 1:
    ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
  del training  # the same images for training and evaluation (train_dataset flips)
  size = cfg.image_size

  def fn(image):
    image = to_unit_range(center_crop_resize(image, size))
    return tf.ensure_shape(image, [size, size, cfg.channels])

  return ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE)


def random_flips(ds, seed):
  """Each image flipped left-right with probability 1/2, drawn anew at every pass: after the
  cache (else each image keeps its first draw), from a seeded random dataset with stateless ops
  (a stateful op makes the pipeline's position, training.checkpoint_data_iterator, unsavable)."""
  return tf.data.Dataset.zip((ds, tf.data.Dataset.random(seed=seed))).map(
      lambda image, draw: tf.image.stateless_random_flip_left_right(image, tf.stack([draw, 0])),
      num_parallel_calls=tf.data.AUTOTUNE)


def _tuned(ds, cfg):
  """tf.data autotuning for tfds sources; off for the embedded digits, which need none: its thread
  sleeps up to a minute between rounds and the iterator waits for it when destroyed (digits runs
  took up to a minute to exit after their last line)."""
  if cfg.name != 'digits':
    return ds
  options = tf.data.Options()
  options.autotune.enabled = False
  return ds.with_options(options)


def train_dataset(cfg, global_batch_size, input_context=None):
  """Shuffled, repeated, per-replica-batched training images (static shapes)."""
  batch = (input_context.get_per_replica_batch_size(global_batch_size)
           if input_context is not None else global_batch_size)
  ds = images_dataset(cfg, cfg.train_split, input_context, training=True)
  if cfg.cache:
    ds = ds.cache()
  ds = ds.shuffle(cfg.shuffle_buffer, seed=cfg.seed).repeat()
  if cfg.random_flip:
    ds = random_flips(ds, cfg.seed)
  return _tuned(ds.batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE), cfg)


def eval_dataset(cfg, split, batch_size):
  """One pass over split, in order, batched (last batch may be smaller)."""
  ds = images_dataset(cfg, split, training=False).batch(batch_size).prefetch(tf.data.AUTOTUNE)
  return _tuned(ds, cfg)


# Out-of-distribution sets of evaluation/ood.py: tfds sets resized to the model's resolution, or
# for the digits sets built offline.
TFDS_OOD_SETS = ('svhn_cropped', 'cifar100', 'celeb_a')
OFFLINE_OOD_SETS = ('inverted_digits', 'resampled_digits', 'uniform_noise', 'gaussian_noise',
                    'natural_patches')
NEAR_OOD_SETS = ('other_digits',)  # only for a model of some of the digits (data.classes)


def default_ood_sets(data_cfg):
  """The OOD sets a run of `data_cfg` is scored against by default."""
  if data_cfg.name == 'digits':
    return list(OFFLINE_OOD_SETS) + (list(NEAR_OOD_SETS) if data_cfg.get('classes') else [])
  return [name for name in TFDS_OOD_SETS if name != data_cfg.name]
