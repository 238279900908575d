"""Image grids for PNG files and TensorBoard."""
import math
import os

import numpy as np
import tensorflow as tf


def to_uint8(images, magnify=1.0):
  """[-1, 1] floats (magnified about 0 first) -> uint8 [0, 255], clipped."""
  x = np.asarray(images, np.float32) * magnify
  return np.clip(np.round((x + 1.0) * 127.5), 0, 255).astype(np.uint8)


def grid(images, columns=None, pad=1):
  """[n, h, w, c] uint8 -> one [H, W, c] uint8 image, row-major, `pad` pixels of black between."""
  images = np.asarray(images)
  n, h, w, c = images.shape
  columns = columns or int(math.ceil(math.sqrt(n)))
  rows = int(math.ceil(n / columns))
  out = np.zeros([rows * (h + pad) + pad, columns * (w + pad) + pad, c], images.dtype)
  for i, image in enumerate(images):
    r, col = divmod(i, columns)
    out[pad + r * (h + pad):pad + r * (h + pad) + h,
        pad + col * (w + pad):pad + col * (w + pad) + w] = image
  return out


def write_png(path, image):
  """Writes an [H, W, c] uint8 image; the directory is created if needed."""
  directory = os.path.dirname(path)
  if directory:
    tf.io.gfile.makedirs(directory)
  with tf.io.gfile.GFile(path, 'wb') as f:
    f.write(tf.io.encode_png(image).numpy())
