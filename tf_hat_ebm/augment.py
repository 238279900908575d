"""Differentiable augmentation of a GAN discriminator's inputs (DiffAugment: Zhao, Liu, Lin, Zhu
and Han, "Differentiable Augmentation for Data-Efficient GAN Training", NeurIPS 2020).

The same random transforms are applied to real and generated images before every call of D, in
D's steps and in G's, so D cannot memorise a small data set and G's gradient flows through the
transform. The policies as the paper's code: `translation` shifts each image by up to 1/8 of its
size (zero padding), `cutout` zeroes one square of half its size at a random place, `color`
perturbs brightness, saturation and contrast.
"""
import tensorflow as tf

from tf_hat_ebm import validation

TRANSLATION_RATIO = 1 / 8
CUTOUT_RATIO = 1 / 2


def _uniform(rng, shape, low, high):
  return rng.uniform(shape, minval=low, maxval=high, dtype=tf.float32)


def color(x, rng):
  """Brightness (+U[-0.5, 0.5]), saturation (x U[0, 2] about the channel mean) and contrast
  (x U[0.5, 1.5] about the image mean), per image, on images in [-1, 1] as the paper's code."""
  n = tf.shape(x)[0]
  x = x + (_uniform(rng, [n, 1, 1, 1], 0.0, 1.0) - 0.5)
  mean = tf.reduce_mean(x, axis=3, keepdims=True)
  x = (x - mean) * _uniform(rng, [n, 1, 1, 1], 0.0, 2.0) + mean
  mean = tf.reduce_mean(x, axis=[1, 2, 3], keepdims=True)
  return (x - mean) * (_uniform(rng, [n, 1, 1, 1], 0.0, 1.0) + 0.5) + mean


def translation(x, rng, ratio=TRANSLATION_RATIO):
  """Each image shifted by an integer offset in [-s, s] per axis, s = round(ratio * size), with
  zeros shifted in; a gather, so the gradient reaches every pixel that stays in view."""
  n, h, w = tf.shape(x)[0], x.shape[1], x.shape[2]
  sh, sw = int(h * ratio + 0.5), int(w * ratio + 0.5)
  dy = rng.uniform([n, 1], minval=-sh, maxval=sh + 1, dtype=tf.int32)
  dx = rng.uniform([n, 1], minval=-sw, maxval=sw + 1, dtype=tf.int32)
  padded = tf.pad(x, [[0, 0], [sh, sh], [sw, sw], [0, 0]])
  rows = tf.range(h)[None] + sh - dy  # output row i reads padded row i + sh - dy
  cols = tf.range(w)[None] + sw - dx
  out = tf.gather(padded, rows, axis=1, batch_dims=1)
  return tf.gather(out, cols, axis=2, batch_dims=1)


def cutout(x, rng, ratio=CUTOUT_RATIO):
  """One square of round(ratio * size) pixels per image set to 0, centred anywhere in the image
  (partly outside it at the borders)."""
  n, h, w = tf.shape(x)[0], x.shape[1], x.shape[2]
  ch, cw = int(h * ratio + 0.5), int(w * ratio + 0.5)
  cy = rng.uniform([n, 1, 1], minval=0, maxval=h + (1 - ch % 2), dtype=tf.int32)
  cx = rng.uniform([n, 1, 1], minval=0, maxval=w + (1 - cw % 2), dtype=tf.int32)
  rows = tf.range(h)[None, :, None]
  cols = tf.range(w)[None, None, :]
  inside = ((rows >= cy - ch // 2) & (rows < cy - ch // 2 + ch)
            & (cols >= cx - cw // 2) & (cols < cx - cw // 2 + cw))
  return x * tf.cast(~inside, x.dtype)[..., None]


TRANSFORMS = dict(color=color, translation=translation, cutout=cutout)


def diff_augment(x, rng, policy):
  """x transformed by each transform of `policy` ('translation,cutout') in turn, fresh randomness
  per image and per call; x itself when the policy is empty."""
  for name in validation.diffaugment_policy(policy):
    x = TRANSFORMS[name](x, rng)
  return x
