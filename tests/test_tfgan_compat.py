"""The TF-GAN stand-in: the same FID, hinge losses and classifier calls as TF-GAN (compared on the
pinned stack, where TF-GAN imports), and against SciPy and closed forms on any stack."""
import importlib.util
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import tfgan_compat
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import fid

from conftest import tiny
from test_fid import scipy_fid

STAND_IN, TF_GAN = tfgan_compat.STAND_IN, tfgan_compat.TF_GAN
needs_tfgan = pytest.mark.skipif(TF_GAN is None, reason='tensorflow_gan does not import here')


def random_activation_pairs():
  rng = np.random.RandomState(3)
  yield rng.normal(size=[400, 32]) @ rng.normal(size=[32, 32]), rng.gamma(2.0, size=[350, 32])
  # Fewer samples than dimensions: singular covariances, whose tiny singular values stay unrooted.
  yield rng.normal(size=[40, 64]), rng.normal(size=[50, 64]) * 1.5 + 0.2
  yield (rng.normal(size=[1000, 8]).astype(np.float32),
         (rng.normal(size=[900, 8]) + 0.01).astype(np.float32))


def test_tf_gan_is_used_where_it_imports():
  # Installed beside the tf.estimator it imports (the pinned stack): it imports, and is used.
  if importlib.util.find_spec('tensorflow_gan') and hasattr(tf, 'estimator'):
    assert TF_GAN is not None and 'tensorflow_gan' in sys.modules
  # What the FID calls: TF-GAN's own function wherever it imported, else the stand-in.
  imported = sys.modules.get('tensorflow_gan')
  assert tfgan_compat.frechet_distance is (
      imported.eval.frechet_classifier_distance_from_activations if imported
      else STAND_IN.frechet_distance)


def test_stand_in_fid_matches_scipy():
  for a, b in random_activation_pairs():
    if len(a) > a.shape[1]:  # scipy's sqrtm of a singular product is not accurate to 1e-6
      got = float(STAND_IN.frechet_distance(tf.constant(a, tf.float64), tf.constant(b, tf.float64)))
      assert got == pytest.approx(scipy_fid(a.astype(np.float64), b.astype(np.float64)), rel=1e-6)


def test_stand_in_hinge_losses_on_known_logits():
  real, fake = tf.constant([2.0, 0.5, -1.0, 0.0]), tf.constant([-2.0, 0.5, 1.0, -0.5])
  # real: relu(1 - D) = 0, .5, 2, 1; fake: relu(1 + D) = 0, 1.5, 2, .5; weight 1/4 each.
  assert float(STAND_IN.hinge_discriminator_loss(real, fake, 0.25, 0.25)) == 1.875
  assert float(STAND_IN.hinge_generator_loss(fake, 0.25)) == 0.25


@needs_tfgan
def test_stand_in_fid_equals_tf_gan_on_random_activations():
  for a, b in random_activation_pairs():
    for dtype in (tf.float64, tf.float32):
      x, y = tf.constant(a, dtype), tf.constant(b, dtype)
      ours, theirs = STAND_IN.frechet_distance(x, y), TF_GAN.frechet_distance(x, y)
      assert ours.dtype == theirs.dtype == dtype
      assert float(ours) == pytest.approx(float(theirs), rel=1e-6)


@needs_tfgan
def test_stand_in_equals_tf_gan_on_the_digits_features(tmp_path):
  data_cfg = tiny().data
  net = features.classifier_features(data_cfg, str(tmp_path), epochs=1, verbose=False)
  images = np.concatenate(list(fid.data_lib.eval_dataset(data_cfg, 'train', 500)))
  for batch in (images[:250], images[250:300]):
    np.testing.assert_array_equal(STAND_IN.run_classifier_fn(batch, net),
                                  TF_GAN.run_classifier_fn(batch, net))
  train, test = (fid.data_activations(data_cfg, split, net, str(tmp_path), verbose=False)
                 for split in ('train', 'test'))
  for a, b in ((train, test), (train[:600], train[600:]), (test, test + 0.05)):
    x, y = tf.constant(a, tf.float64), tf.constant(b, tf.float64)
    ours, theirs = float(STAND_IN.frechet_distance(x, y)), float(TF_GAN.frechet_distance(x, y))
    assert ours == pytest.approx(theirs, rel=1e-6) and theirs > 0


@needs_tfgan
def test_stand_in_hinge_losses_equal_tf_gan_exactly():
  rng = np.random.RandomState(4)
  for dtype, n in ((tf.float32, 64), (tf.bfloat16, 8), (tf.float32, 7)):
    real = tf.constant(rng.normal(size=[n]) * 2, dtype)
    fake = tf.constant(rng.normal(size=[n]) * 2 - 0.5, dtype)
    for weight in (1.0 / n, 1.0 / (4 * n), 0.3):
      np.testing.assert_array_equal(STAND_IN.hinge_discriminator_loss(real, fake, weight, weight),
                                    TF_GAN.hinge_discriminator_loss(real, fake, weight, weight))
      np.testing.assert_array_equal(STAND_IN.hinge_generator_loss(fake, weight),
                                    TF_GAN.hinge_generator_loss(fake, weight))


@needs_tfgan
def test_inception_constants_are_tf_gan_s():
  import tensorflow_gan as tfgan  # pylint: disable=g-import-not-at-top
  assert (tfgan_compat.INCEPTION_TFHUB, tfgan_compat.INCEPTION_DEFAULT_IMAGE_SIZE,
          tfgan_compat.INCEPTION_FINAL_POOL) == (
              tfgan.eval.INCEPTION_TFHUB, tfgan.eval.INCEPTION_DEFAULT_IMAGE_SIZE,
              tfgan.eval.INCEPTION_FINAL_POOL)
