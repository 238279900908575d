"""Keras 2 on every supported TensorFlow: `keras` is `tf.keras` on TensorFlow 2.15 and the
`tf_keras` package (Keras 2 on its own) on TensorFlow 2.16 and newer, where `tf.keras` is Keras 3.

The project's networks, optimizers and checkpoints follow Keras 2's contracts (optimizer state,
gradient aggregation under tf.distribute, SpectralNormalization, hub.KerasLayer). Nothing global
is set (no TF_USE_LEGACY_KERAS): a user's own `tf.keras` / Keras 3 code in the same process keeps
Keras 3.
"""
import tensorflow as tf

TF_VERSION = tuple(int(part) for part in tf.__version__.split('.')[:2])

if TF_VERSION < (2, 16):
  keras = tf.keras
else:
  try:
    import tf_keras as keras  # noqa: F401  pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise ImportError(
        f'TensorFlow {tf.__version__} needs the tf-keras package for Keras 2 (its tf.keras is '
        f'Keras 3): pip install "tf-keras~={TF_VERSION[0]}.{TF_VERSION[1]}.0"') from e
