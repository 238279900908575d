"""Features a user names: any SavedModel (or Keras model file) mapping images to vectors, for FID,
KID and precision/recall on data Inception and the digits classifier do not fit.

The network's input size and channels are read from its signature (`serving_default`, else the
Keras model's input); a size left open there is the data's. Its input range is stated
(`--features_range`, default [0, 1], TF-Hub's image convention). A dict output gives `pool_3`
(TF-GAN's Inception from a local copy) or its only entry. The network is named by a fingerprint
of its files, so scores and cached statistics of different networks are never mixed.
"""
import hashlib
import os

import tensorflow as tf

from tf_hat_ebm.keras_compat import keras

POOL_KEY = 'pool_3'  # TF-GAN's Inception's pooled features
DEFAULT_RANGE = (0.0, 1.0)


def fingerprint(path):
  """sha256 of a file, or of a directory's files (relative paths and contents, sorted)."""
  digest = hashlib.sha256()
  files = [path] if not tf.io.gfile.isdir(path) else sorted(
      os.path.join(root, name) for root, _, names in tf.io.gfile.walk(path) for name in names)
  for name in files:
    digest.update(os.path.relpath(name, path).encode())
    with tf.io.gfile.GFile(name, 'rb') as f:
      for block in iter(lambda: f.read(1 << 20), b''):  # pylint: disable=cell-var-from-loop
        digest.update(block)
  return digest.hexdigest()


def _load(path):
  """(callable on a batch, its input TensorSpec, the object holding its variables)."""
  if not tf.io.gfile.exists(path):
    raise FileNotFoundError(f'--features={path}: no such file or directory')
  try:
    if path.endswith(('.keras', '.h5')):
      model = keras.models.load_model(path, compile=False)
      return model, tf.TensorSpec(model.input_shape, tf.float32), model
    loaded = tf.saved_model.load(path)
  except (OSError, ValueError, tf.errors.OpError) as e:
    raise ValueError(f'--features={path} is not a SavedModel or Keras model: '
                     f'{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}'
                     ) from e
  signature = getattr(loaded, 'signatures', {}).get('serving_default')
  if signature is None:
    raise ValueError(f'--features={path} has no serving_default signature mapping images to '
                     'vectors; save it with one (tf.saved_model.save(..., signatures=...))')
  specs = list(signature.structured_input_signature[1].values())
  if len(specs) != 1 or specs[0].shape.rank != 4 or not (specs[0].dtype.is_floating
                                                         or specs[0].dtype == tf.uint8):
    raise ValueError(f'--features={path}: its serving_default takes {specs}; expected one image '
                     'batch [n, height, width, channels], float or uint8')
  (name, spec), = signature.structured_input_signature[1].items()
  return lambda images: signature(**{name: images}), spec, loaded


def _vectors(output, path):
  """[n, d] features of a network's output (a tensor, or a dict of them)."""
  if isinstance(output, dict):
    keys = sorted(output)
    if POOL_KEY not in output and len(keys) != 1:
      raise ValueError(f'--features={path} returns {", ".join(keys)}; expected one output '
                       f'(or {POOL_KEY})')
    output = output[POOL_KEY if POOL_KEY in output else keys[0]]
  return tf.reshape(output, [tf.shape(output)[0], -1])


class NamedFeatures:
  """A user's feature network, as a feature network of fid.py: [-1, 1] images -> [n, d]."""

  def __init__(self, path, image_size, input_range=None):
    self.call, spec, self.module = _load(path)  # the module keeps its variables alive
    height, width, channels = spec.shape[1:]
    self.size = (height or image_size, width or image_size)
    self.channels = channels or 3
    self.dtype = spec.dtype
    try:
      low, high = self.range = tuple(float(v) for v in input_range or DEFAULT_RANGE)
    except (TypeError, ValueError):
      low = high = None
    if low is None or not low < high:
      raise ValueError(f'--features_range={",".join(map(str, input_range))}: expected two '
                       'numbers low,high with low < high')
    digest = fingerprint(path)
    self.path, self.fingerprint = path, digest
    self.name = f'features_{digest[:12]}'
    self.description = (f'{path} (sha256 {digest[:12]}; input {self.size[0]}x{self.size[1]}x'
                        f'{self.channels} in [{low:g}, {high:g}])')
    self._features = tf.function(self._compute)

  def _compute(self, images):
    images = tf.clip_by_value(images, -1.0, 1.0)
    if images.shape[-1] != self.channels:
      images = (tf.image.grayscale_to_rgb(images) if self.channels == 3
                else tf.image.rgb_to_grayscale(images))
    images = tf.image.resize(images, self.size, method='bilinear', antialias=True)
    low, high = self.range
    images = low + (images + 1.0) / 2.0 * (high - low)
    if self.dtype == tf.uint8:
      images = tf.round(tf.clip_by_value(images, 0.0, 255.0))
    return _vectors(self.call(tf.cast(images, self.dtype)), self.path)

  def __call__(self, images):
    return tf.cast(self._features(tf.convert_to_tensor(images, tf.float32)), tf.float32)
