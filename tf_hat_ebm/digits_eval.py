"""Cheap sample-quality numbers for the embedded digits (no Inception network offline).

Samples (16x16 in [-1, 1], digits upscaled 2x) are pooled back to the 8x8 of scikit-learn's digits
and scored by a logistic-regression classifier trained on the train split:
  confidence  mean max class probability (digit-like images are classified confidently)
  digit_is    exp(E KL(p(y|x) || p(y))): an Inception-Score analogue, at most 10
  nn_dist     mean L2 distance (8x8, [-1, 1]) to the nearest training digit
"""
import numpy as np

from tf_hat_ebm import data as data_lib

_CLASSIFIER = None


def _to_8x8(images):
  x = np.asarray(images, np.float32)[..., 0]
  n, h, w = x.shape
  f = h // 8
  return x.reshape(n, 8, f, 8, f).mean(axis=(2, 4)).reshape(n, 64)


def _classifier():
  global _CLASSIFIER
  if _CLASSIFIER is None:
    from sklearn.linear_model import LogisticRegression  # pylint: disable=g-import-not-at-top
    images, labels = data_lib.digits_arrays('train')
    train = images.reshape(len(images), 64)
    _CLASSIFIER = (LogisticRegression(max_iter=3000).fit(train, labels), train)
  return _CLASSIFIER


def scores(images):
  clf, train = _classifier()
  x = np.clip(_to_8x8(images), -1.0, 1.0)
  p = clf.predict_proba(x)
  marginal = p.mean(axis=0, keepdims=True)
  kl = np.sum(p * (np.log(p + 1e-12) - np.log(marginal + 1e-12)), axis=1)
  d2 = (x**2).sum(1)[:, None] - 2 * x @ train.T + (train**2).sum(1)[None]
  return {'confidence': float(p.max(axis=1).mean()), 'digit_is': float(np.exp(kl.mean())),
          'nn_dist': float(np.sqrt(np.maximum(d2.min(axis=1), 0)).mean())}


def test_digits(data_cfg):
  """The test split as the model sees it (data_cfg's size and upscaling): the reference scores."""
  ds = data_lib.eval_dataset(data_cfg, data_cfg.test_split, batch_size=10_000)
  return np.concatenate([x.numpy() for x in ds])
