"""Small-data FID features: a small CNN classifier trained on the dataset's own train split.

Inception features of 16x16 greyscale digits say little, so for such data FID uses the penultimate
layer of a classifier trained on the train split. Two sources of that network:
  * shipped (`shipped_classifier`): the weights in `feature_classifiers/<cache_key>.npz` beside
    this module, trained once and fingerprinted in the `.json` beside them, so that every machine
    scores with the same features (a network retrained elsewhere differs in its last bits, and FID
    with it);
  * trained here (`trained_classifier`, --feature_net=classifier_retrained, and any dataset with
    none shipped): trained on first use and cached in
    `<cache_dir>/feature_classifier/<cache_key>/`.
A network's name carries the fingerprint of its weights, so cached data statistics never outlive
the network that made them, and a result names the network it was scored with.
"""
import hashlib
import io
import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from tf_hat_ebm import data as data_lib
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.keras_compat import keras

FEATURE_DIM = 64
EPOCHS = 20


def build_classifier(image_size, channels, num_classes, feature_dim=FEATURE_DIM):
  """conv32-conv32-pool-conv64-conv64-pool-GAP-dense(feature_dim)-dense(classes); [-1, 1] input."""
  layers = keras.layers
  inputs = keras.Input([image_size, image_size, channels])
  h = inputs
  for width in (32, 64):
    h = layers.Conv2D(width, 3, padding='same', activation='relu')(h)
    h = layers.Conv2D(width, 3, padding='same', activation='relu')(h)
    h = layers.MaxPool2D()(h)
  h = layers.GlobalAveragePooling2D()(h)
  features = layers.Dense(feature_dim, activation='relu', name='features')(h)
  logits = layers.Dense(num_classes, name='logits')(features)
  return keras.Model(inputs, logits)


def labelled_arrays(data_cfg, split):
  """(images [n, size, size, c] in [-1, 1], labels [n]) of a labelled dataset, preprocessed as
  the training data is (the same pipeline as FID's data features). Every class: one classifier
  per dataset, whatever labels a run trains on (data.classes)."""
  if data_cfg.get('classes'):
    data_cfg = data_cfg.copy_and_resolve_references()
    data_cfg.classes = ()
  if data_cfg.name == 'digits':
    _, labels = data_lib.digits_arrays(split)
  else:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    builder = tfds.builder(data_cfg.name, data_dir=data_cfg.data_dir or None)
    if 'label' not in builder.info.features:
      raise ValueError(f'{data_cfg.name} has no labels to train a feature classifier on; '
                       'use --feature_net=inception')
    ds = builder.as_dataset(split=split, shuffle_files=False)
    labels = np.array([int(ex['label']) for ex in ds.map(lambda ex: {'label': ex['label']})])
  images = np.concatenate(list(data_lib.eval_dataset(data_cfg, split, 500).as_numpy_iterator()))
  return images, labels


class ClassifierFeatures:
  """Penultimate-layer activations of the dataset's cached feature classifier."""

  def __init__(self, model, name, description, test_accuracy):
    self.model = model
    self.features = keras.Model(model.input, model.get_layer('features').output)
    self.name, self.description, self.test_accuracy = name, description, test_accuracy
    self._call = tf.function(lambda x: self.features(x, training=False))

  def __call__(self, images):
    return self._call(tf.convert_to_tensor(images, tf.float32))


def fingerprint(model):
  """The first 8 hex digits of the SHA-1 of the weights' bytes: the name of a network."""
  digest = hashlib.sha1()
  for w in model.get_weights():
    digest.update(np.ascontiguousarray(w).tobytes())
  return digest.hexdigest()[:8]


def default_cache_dir():
  """Where trained feature classifiers are kept across workdirs: $TF_HAT_EBM_CACHE, else
  ~/.cache/tf_hat_ebm."""
  return os.environ.get('TF_HAT_EBM_CACHE') or os.path.join(
      os.path.expanduser('~'), '.cache', 'tf_hat_ebm')


def cache_key(data_cfg):
  """The classifier's cache name: the data it is trained and tested on (the first classifier
  trained for that data is the one every later evaluation uses)."""
  fields = dict(name=data_cfg.name, image_size=data_cfg.image_size, channels=data_cfg.channels,
                train=data_cfg.train_split, test=data_cfg.test_split,
                data_dir=data_cfg.get('data_dir') or '')
  digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]
  return f'{data_cfg.name}_{data_cfg.image_size}px_c{data_cfg.channels}_{digest}'


def _load_cached(directory, data_cfg):
  """(model, info) of a cached classifier; a damaged cache entry is one line naming it."""
  try:
    with tf.io.gfile.GFile(os.path.join(directory, 'info.json')) as f:
      info = workdir_lib.parse_json(f.read())
    num_classes = info['num_classes']
    if not isinstance(num_classes, int) or not 1 < num_classes <= 100_000 or not isinstance(
        info['test_accuracy'], (int, float)):
      raise ValueError(f'info.json holds num_classes {num_classes!r}')
    model = build_classifier(data_cfg.image_size, data_cfg.channels, num_classes)
    model.load_weights(os.path.join(directory, 'weights')).expect_partial()
    return model, info
  except (ValueError, KeyError, TypeError, AttributeError, IndexError,
          tf.errors.OpError) as e:
    detail = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
    raise ValueError(f'the cached FID feature classifier {directory} is damaged ({detail}): '
                     'remove that directory to train it again, or pass --feature_cache_dir='
                     'ANOTHER_DIR') from None


def check_writable(directory):
  """Fails naming the cache directory when a classifier trained now could not be saved there."""
  try:
    tf.io.gfile.makedirs(directory)
    if '://' not in directory:
      fd, probe = tempfile.mkstemp(prefix='.write-test-', dir=directory)
      os.close(fd)
      os.remove(probe)
  except (OSError, tf.errors.OpError) as e:
    raise PermissionError(f'cannot write the FID feature cache {directory} '
                          f'({getattr(e, "strerror", None) or getattr(e, "message", e)}): pass '
                          '--feature_cache_dir=A_WRITABLE_DIR (or set TF_HAT_EBM_CACHE)') from None


def classifier_features(data_cfg, cache_dir=None, epochs=EPOCHS, seed=0, verbose=True,
                        retrain=False):
  """The feature classifier of data_cfg's dataset: the shipped one where one is shipped for that
  data (`shipped_classifier`), else (or with `retrain`) the one trained on this machine
  (`trained_classifier`)."""
  if not retrain and os.path.exists(shipped_paths(data_cfg)[0]):
    return shipped_classifier(data_cfg)
  return trained_classifier(data_cfg, cache_dir, epochs, seed, verbose)


def trained_classifier(data_cfg, cache_dir=None, epochs=EPOCHS, seed=0, verbose=True):
  """The classifier trained on this machine: loaded from the cache (cache_dir, default
  default_cache_dir(): one per dataset for every workdir), or trained once and saved there."""
  directory = os.path.join(cache_dir or default_cache_dir(), 'feature_classifier',
                           cache_key(data_cfg))
  info_path = os.path.join(directory, 'info.json')
  weights = os.path.join(directory, 'weights')
  if tf.io.gfile.exists(info_path):
    model, info = _load_cached(directory, data_cfg)
  else:
    check_writable(directory)  # before seconds to minutes of training, not after
    model, info = train_classifier(data_cfg, epochs, seed, verbose)
    tf.io.gfile.makedirs(directory)
    model.save_weights(weights)
    # info.json last, atomically: its presence says the weights beside it are complete.
    workdir_lib.write_atomic(info_path, json.dumps(info, indent=2))
  return _features(model, data_cfg, info, 'trained on this machine')


def train_classifier(data_cfg, epochs=EPOCHS, seed=0, verbose=True):
  """(model, info) of a classifier trained on data_cfg's train split, seeded: the same data and
  TensorFlow build give the same network."""
  x_train, y_train = labelled_arrays(data_cfg, data_cfg.train_split)
  x_test, y_test = labelled_arrays(data_cfg, data_cfg.test_split)
  num_classes = int(max(y_train.max(), y_test.max())) + 1
  keras.utils.set_random_seed(seed)
  model = build_classifier(data_cfg.image_size, data_cfg.channels, num_classes)
  model.compile(keras.optimizers.Adam(1e-3),
                keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                metrics=['accuracy'])
  if verbose:
    print(f'training the FID feature classifier on {data_cfg.name} {data_cfg.train_split} '
          f'({len(x_train)} images, {epochs} epochs)', flush=True)
  model.fit(x_train, y_train, batch_size=64, epochs=epochs, verbose=0, shuffle=True)
  _, accuracy = model.evaluate(x_test, y_test, batch_size=500, verbose=0)
  return model, dict(num_classes=num_classes, test_accuracy=float(accuracy), epochs=epochs,
                     train_images=len(x_train), feature_dim=FEATURE_DIM)


def _features(model, data_cfg, info, source):
  description = (f'{data_cfg.name} classifier penultimate layer ({FEATURE_DIM}-d, test accuracy '
                 f'{100 * info["test_accuracy"]:.1f}%, {source})')
  return ClassifierFeatures(model, f'classifier_{fingerprint(model)}', description,
                            info['test_accuracy'])


# ---- the shipped classifiers -------------------------------------------------------------------
SHIPPED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'feature_classifiers')


def shipped_paths(data_cfg, directory=SHIPPED_DIR):
  """(weights .npz, record .json) of the classifier shipped for data_cfg's data."""
  base = os.path.join(directory, cache_key(data_cfg))
  return base + '.npz', base + '.json'


def shipped_classifier(data_cfg, directory=SHIPPED_DIR):
  """The shipped classifier: its weights (an .npz of get_weights(), which every Keras 2 loads
  alike) into build_classifier, refused unless their fingerprint is the one recorded."""
  weights, record = shipped_paths(data_cfg, directory)
  try:
    with open(record) as f:
      info = workdir_lib.parse_json(f.read())
    with np.load(weights) as saved:
      values = [saved[f'w{i}'] for i in range(len(saved.files))]
    model = build_classifier(data_cfg.image_size, data_cfg.channels, info['num_classes'])
    model.set_weights(values)
    found = fingerprint(model)
    if found != info['fingerprint']:
      raise ValueError(f'weights of fingerprint {found}, recorded {info["fingerprint"]}')
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ValueError(f'the shipped FID feature classifier {weights} is damaged ({e}): reinstall '
                     'the package, or pass --feature_net=classifier_retrained') from None
  return _features(model, data_cfg, info, 'shipped')


def write_shipped(data_cfg, directory=SHIPPED_DIR, epochs=EPOCHS, seed=0):
  """Trains data_cfg's classifier (train_classifier) and writes it as a shipped one; returns its
  features. The digits' was made by write_shipped(digits_synth's config.data)."""
  model, info = train_classifier(data_cfg, epochs, seed)
  weights, record = shipped_paths(data_cfg, directory)
  os.makedirs(directory, exist_ok=True)
  buffer = io.BytesIO()
  np.savez(buffer, **{f'w{i}': w for i, w in enumerate(model.get_weights())})
  workdir_lib.write_atomic(weights, buffer.getvalue())
  info.update(fingerprint=fingerprint(model), seed=seed, tensorflow=tf.__version__,
              data=dict(name=data_cfg.name, image_size=data_cfg.image_size,
                        channels=data_cfg.channels, train=data_cfg.train_split,
                        test=data_cfg.test_split))
  workdir_lib.write_atomic(record, json.dumps(info, indent=2) + '\n')
  return shipped_classifier(data_cfg, directory)
