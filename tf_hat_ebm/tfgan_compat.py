"""TF-GAN's FID and hinge losses where TF-GAN imports, the same formulas where it cannot.

TF-GAN 2.1.0 (its last release) imports `tf.estimator`, which TensorFlow 2.16 removed: on the
pinned stack (TensorFlow 2.15) the project calls TF-GAN itself, on newer TensorFlow the stand-in
below, written from the formulas with TF-GAN's numerics (float64 moments, square roots by SVD) so
that both give the same numbers (tests/test_tfgan_compat.py checks them against each other).
"""
import importlib.util
import sys
import types

from packaging import version
import tensorflow as tf


def import_hub():
  """tensorflow_hub, also where setuptools 81+ removed the pkg_resources its import reads (0.15
  and 0.16 call pkg_resources.parse_version once): packaging's parse stands in for that import
  only, and nothing named pkg_resources is left behind."""
  try:
    import tensorflow_hub as hub  # pylint: disable=g-import-not-at-top
    return hub
  except ModuleNotFoundError as e:
    if e.name != 'pkg_resources':
      raise
  sys.modules['pkg_resources'] = types.SimpleNamespace(parse_version=version.parse)
  try:
    import tensorflow_hub as hub  # pylint: disable=g-import-not-at-top
  finally:
    del sys.modules['pkg_resources']
  return hub


tfgan = tfgan_losses = None
if importlib.util.find_spec('tensorflow_gan') is not None:
  try:
    import_hub()  # TF-GAN imports it
    import tensorflow_gan as tfgan  # pylint: disable=g-import-not-at-top
    from tensorflow_gan.python.losses import losses_impl as tfgan_losses
  except (ImportError, AttributeError):  # AttributeError: `tf.estimator` is gone (TF >= 2.16)
    tfgan = tfgan_losses = None

# TF-GAN's Inception for FID (tfgan.eval): its TF-Hub handle, input size and pooled features.
INCEPTION_TFHUB = 'https://tfhub.dev/tensorflow/tfgan/eval/inception/1'
INCEPTION_DEFAULT_IMAGE_SIZE = 299
INCEPTION_FINAL_POOL = 'pool_3'
# Singular values below this are not rooted in the matrix square root (sqrt is unstable at 0).
_SQRT_EPS = 1e-10


def _run_classifier_fn(images, classifier_fn):
  """The classifier's output on one batch (TF-GAN's run_classifier_fn with num_batches=1)."""
  return classifier_fn(images)


def _symmetric_sqrt(matrix):
  """The square root of a symmetric positive semi-definite matrix, U diag(sqrt(s)) V^T."""
  s, u, v = tf.linalg.svd(matrix)
  root = tf.where(s < _SQRT_EPS, s, tf.sqrt(s))
  return tf.matmul(u * root[tf.newaxis, :], v, transpose_b=True)


def _mean_and_covariance(activations):
  """Mean [d] and unbiased covariance [d, d] of activations [n, d]."""
  n = tf.cast(tf.shape(activations)[0], tf.float64)
  mean = tf.reduce_mean(activations, axis=0)
  centred = activations - mean
  return mean, tf.matmul(centred, centred, transpose_a=True) / (n - 1.0)


def _frechet_distance(activations1, activations2):
  """|m1 - m2|^2 + Tr(S1 + S2 - 2 (S1 S2)^(1/2)) of the Gaussians fitted to two sets of
  activations [n, d], in float64; returned in the activations' dtype.

  S1 S2 is not symmetric; Tr (S1 S2)^(1/2) = Tr (A S2 A)^(1/2) with A = S1^(1/2) (same
  eigenvalues), and A S2 A is symmetric.
  """
  dtype = tf.convert_to_tensor(activations1).dtype
  m1, s1 = _mean_and_covariance(tf.cast(activations1, tf.float64))
  m2, s2 = _mean_and_covariance(tf.cast(activations2, tf.float64))
  root1 = _symmetric_sqrt(s1)
  trace_sqrt = tf.linalg.trace(_symmetric_sqrt(tf.matmul(root1, tf.matmul(s2, root1))))
  fid = (tf.linalg.trace(s1 + s2) - 2.0 * trace_sqrt) + tf.reduce_sum(tf.square(m1 - m2))
  return tf.cast(fid, dtype)


def _hinge_discriminator_loss(d_real, d_fake, real_weight, fake_weight):
  """sum(real_weight * relu(1 - D(real))) + sum(fake_weight * relu(1 + D(fake))), float32."""
  on_real = tf.reduce_sum(tf.nn.relu(1.0 - tf.cast(d_real, tf.float32)) * real_weight)
  on_fake = tf.reduce_sum(tf.nn.relu(1.0 + tf.cast(d_fake, tf.float32)) * fake_weight)
  return on_fake + on_real


def _hinge_generator_loss(d_fake, weight):
  """sum(weight * -D(G(z))), float32."""
  return tf.reduce_sum(-tf.cast(d_fake, tf.float32) * weight)


STAND_IN = types.SimpleNamespace(
    name='stand-in', run_classifier_fn=_run_classifier_fn, frechet_distance=_frechet_distance,
    hinge_discriminator_loss=_hinge_discriminator_loss, hinge_generator_loss=_hinge_generator_loss)

TF_GAN = None
if tfgan is not None:
  _SUM = tf.compat.v1.losses.Reduction.SUM
  TF_GAN = types.SimpleNamespace(
      name='tensorflow_gan',
      run_classifier_fn=tfgan.eval.run_classifier_fn,
      frechet_distance=tfgan.eval.frechet_classifier_distance_from_activations,
      hinge_discriminator_loss=lambda d_real, d_fake, real_weight, fake_weight: (
          tfgan_losses.wasserstein_hinge_discriminator_loss(
              d_real, d_fake, real_weights=real_weight, generated_weights=fake_weight,
              loss_collection=None, reduction=_SUM)),
      hinge_generator_loss=lambda d_fake, weight: tfgan_losses.wasserstein_hinge_generator_loss(
          d_fake, weights=weight, loss_collection=None, reduction=_SUM))

# What the project calls: TF-GAN's own functions where it imports.
BACKEND = TF_GAN or STAND_IN
run_classifier_fn = BACKEND.run_classifier_fn
frechet_distance = BACKEND.frechet_distance
hinge_discriminator_loss = BACKEND.hinge_discriminator_loss
hinge_generator_loss = BACKEND.hinge_generator_loss
