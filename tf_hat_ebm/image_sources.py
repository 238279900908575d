"""A user's own images as a dataset: `data.name = 'folder:<path>'` or `'array:<path>'`.

folder: every PNG or JPEG file under the path, nested folders included (their names are not
  used: the models are unconditional). Other files are skipped and counted; an image file whose
  PNG/JPEG signature (or a PNG's end chunk) is missing is a one-line error naming it. Files are
  read and decoded (tf.io.decode_image) one by one as the pipeline runs, never all at once; a file
  that passes that check and still fails to decode is skipped with a warning.
array: an .npy (read as fixed-length records, never loaded whole) or an .npz (loaded: a zip member
  cannot be memory-mapped; its array `images`, `x` or its only one) of images [n, h, w] or
  [n, h, w, c] (HWC). uint8 is read as [0, 255]; another dtype's range is taken from its first
  images: within [0, 1], within [-1, 1], else within [0, 255] (printed as one line).

Every image: channels made data.channels (grey repeated to RGB, RGB to grey, alpha dropped), the
central square crop resized (bilinear, antialiased) to data.image_size, so mixed sizes are fine;
pixels in [-1, 1]. A folder with subfolders named data.train_split and data.test_split (an .npz with
arrays of those names) keeps that split; otherwise a seeded permutation (data.split_seed) holds
out data.test_fraction of the images for test.
"""
import hashlib
import os

import numpy as np
import tensorflow as tf

from tf_hat_ebm import validation

FOLDER, ARRAY = validation.USER_SOURCES
IMAGE_EXTENSIONS = ('.png', '.jpg', '.jpeg')
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
JPEG_SIGNATURE = b'\xff\xd8\xff'
NPZ_KEYS = ('images', 'x')
RANGE_SAMPLE = 1024  # images read to decide a float array's value range


def source_of(name):
  """(kind, path) of a user source name ('folder:<path>' -> ('folder', path)), else None."""
  for prefix in validation.USER_SOURCES:
    if name.startswith(prefix):
      return prefix[:-1], name[len(prefix):]
  return None


def label(name):
  """A file-name-safe label of a dataset name: a user source's kind, base name and path digest."""
  source = source_of(name)
  if source is None:
    return name
  kind, path = source
  base = ''.join(c if c.isalnum() else '_' for c in os.path.basename(path.rstrip('/')))[:40]
  digest = hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:8]
  return f'{kind}_{base}_{digest}'


def _check_image_file(path):
  """One line naming an image file that is not a whole PNG or JPEG (by its bytes), else None."""
  with tf.io.gfile.GFile(path, 'rb') as f:
    head = f.read(8)
    size = f.size()
    if head.startswith(PNG_SIGNATURE):
      f.seek(max(0, size - 64))
      return None if b'IEND' in f.read() else f'{path}: a truncated PNG (no end chunk)'
  if head.startswith(JPEG_SIGNATURE):
    return None
  return f'{path}: not a PNG or JPEG image ({size} bytes)'


_SAID = set()  # what folder_files said: once per folder and contents in a process


def folder_files(folder):
  """The image files under `folder` (sorted, checked), said once with what was skipped."""
  if not tf.io.gfile.isdir(folder):
    raise FileNotFoundError(f'data.name=folder:{folder}: no such folder')
  images, skipped = [], []
  for root, _, files in tf.io.gfile.walk(folder):
    for name in files:
      path = os.path.join(root, name)
      (images if name.lower().endswith(IMAGE_EXTENSIONS) else skipped).append(path)
  images.sort()  # the walk's order is the file system's: the split must not depend on it
  skipped.sort()
  if not images:
    raise ValueError(f'data.name=folder:{folder} holds no PNG or JPEG file'
                     f'{f" ({len(skipped)} other files)" if skipped else ""}')
  for path in images:
    problem = _check_image_file(path)
    if problem:
      raise ValueError(f'data.name=folder:{folder}: {problem}; remove or replace it')
  note = f'; skipped {len(skipped)} non-image file(s), e.g. {skipped[0]}' if skipped else ''
  if (folder, len(images), note) not in _SAID:
    _SAID.add((folder, len(images), note))
    print(f'folder {folder}: {len(images)} images{note}', flush=True)
  return tuple(images)


def split_indices(n, cfg, split, source):
  """The indices of `split` among n images with no split of their own: a permutation by
  data.split_seed, the first round(n * data.test_fraction) (at least 1) for test. (An array's
  split is read in its stored order.)"""
  if n < 2:
    raise ValueError(f'{source} holds {n} image: a train/test split needs at least 2')
  if split not in (cfg.train_split, cfg.test_split):
    raise ValueError(f'{source} has no split {split!r}; use data.train_split '
                     f'({cfg.train_split!r}) or data.test_split ({cfg.test_split!r})')
  order = np.random.RandomState(cfg.split_seed).permutation(n)
  num_test = min(n - 1, max(1, int(round(n * cfg.test_fraction))))
  # In the permutation's order: class folders read in sorted order would come one class at a time.
  return order[:num_test] if split == cfg.test_split else order[num_test:]


def _folder_split(folder, cfg, split):
  if all(tf.io.gfile.isdir(os.path.join(folder, s)) for s in (cfg.train_split, cfg.test_split)):
    files = folder_files(os.path.join(folder, split))  # read in a seeded order, as a split's
    return [files[i] for i in np.random.RandomState(cfg.split_seed).permutation(len(files))]
  files = folder_files(folder)
  return [files[i] for i in split_indices(len(files), cfg, split, f'data.name=folder:{folder}')]


def _decoded(path, channels):
  # expand_animations=False: a GIF-like multi-frame file is its first frame, always [h, w, c].
  image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
  return tf.cast(image, tf.float32)


def folder_pixels(folder, cfg, split):
  """Images of a folder's split, float32 [h, w, data.channels] in [0, 255], decoded as read."""
  files = _folder_split(folder, cfg, split)
  ds = tf.data.Dataset.from_tensor_slices(files)
  ds = ds.map(lambda p: _decoded(p, cfg.channels), num_parallel_calls=tf.data.AUTOTUNE)
  return ds.ignore_errors(log_warning=True)


def _npz_array(path, split, cfg):
  """(array, whether it is the split's own) of an .npz."""
  with np.load(path) as arrays:
    names = arrays.files
    if cfg.train_split in names and cfg.test_split in names:
      return arrays[split], True
    named = [k for k in NPZ_KEYS if k in names]
    if not named and len(names) != 1:
      raise ValueError(f'data.name=array:{path} holds arrays {", ".join(names)}; name the '
                       f'images one of {", ".join(NPZ_KEYS)}')
    return arrays[(named or names)[0]], False


def _value_range(array, path):
  """The (low, high) value range assumed for an array's pixels."""
  if array.dtype == np.uint8:
    return 0.0, 255.0
  if not np.issubdtype(array.dtype, np.floating):
    raise ValueError(f'data.name=array:{path} has dtype {array.dtype}; expected uint8 or float')
  sample = np.asarray(array[:RANGE_SAMPLE], np.float64)
  low, high = float(sample.min()), float(sample.max())
  for candidate in ((0.0, 1.0), (-1.0, 1.0), (0.0, 255.0)):
    if candidate[0] <= low and high <= candidate[1]:
      return candidate
  raise ValueError(f'data.name=array:{path} has values in [{low:g}, {high:g}]; expected pixels '
                   'in [0, 1], [-1, 1] or [0, 255]')


def _with_channels_axis(shape, path):
  if len(shape) == 3:
    return tuple(shape) + (1,)
  if len(shape) != 4 or shape[-1] not in (1, 3, 4):
    raise ValueError(f'data.name=array:{path} has shape {tuple(shape)}; expected images '
                     '[n, height, width] or [n, height, width, channels] with 1, 3 or 4 channels')
  return tuple(shape)


def _to_channels(image, channels):
  """[h, w, 1|3|4] -> [h, w, channels]: alpha dropped, grey repeated, RGB to grey by luma."""
  have = image.shape[-1]
  if have == 4:
    image, have = image[..., :3], 3
  if have == channels:
    return image
  return tf.image.grayscale_to_rgb(image) if channels == 3 else tf.image.rgb_to_grayscale(image)


def array_pixels(path, cfg, split):
  """Images of an array's split, float32 [h, w, data.channels] in [0, 255]."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'data.name=array:{path}: no such file')
  if path.endswith('.npz'):
    array, own_split = _npz_array(path, split, cfg)
    shape = _with_channels_axis(array.shape, path)
    ds = tf.data.Dataset.from_tensor_slices(array.reshape(shape))
  elif path.endswith('.npy'):
    array, own_split = np.load(path, mmap_mode='r'), False
    shape = _with_channels_axis(array.shape, path)
    if array.dtype.byteorder == '>' or not array.flags.c_contiguous:
      raise ValueError(f'data.name=array:{path} is big-endian or Fortran-ordered; save it with '
                       'np.save(path, np.ascontiguousarray(images))')
    record = int(np.prod(shape[1:])) * array.dtype.itemsize
    ds = tf.data.FixedLengthRecordDataset(path, record, header_bytes=array.offset).map(
        lambda r: tf.reshape(tf.io.decode_raw(r, tf.as_dtype(array.dtype)), shape[1:]))
  else:
    raise ValueError(f'data.name=array:{path}: expected an .npy or .npz file')
  low, high = _value_range(array, path)
  print(f'array {path}: {shape[0]} images {shape[1]}x{shape[2]}x{shape[3]} {array.dtype}, '
        f'pixels assumed in [{low:g}, {high:g}]', flush=True)
  if not own_split:
    keep = np.zeros(shape[0], bool)
    keep[split_indices(shape[0], cfg, split, f'data.name=array:{path}')] = True
    keep = tf.constant(keep)
    ds = ds.enumerate().filter(lambda i, _: tf.gather(keep, i)).map(lambda _, x: x)
  scale = 255.0 / (high - low)
  return ds.map(lambda x: _to_channels((tf.cast(x, tf.float32) - low) * scale, cfg.channels))


def pixels(cfg, split):
  """The unbatched images of a user source's split: float32 [h, w, channels] in [0, 255]."""
  kind, path = source_of(cfg.name)
  return (folder_pixels if kind == 'folder' else array_pixels)(path, cfg, split)
