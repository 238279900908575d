"""Input pipelines: embedded digits and tfds (mocked), ranges, shapes, splits, errors."""
import socket
import time

import numpy as np
import pytest
import requests
import tensorflow as tf
import tensorflow_datasets as tfds

from tf_hat_ebm import data
from tf_hat_ebm import errors

from conftest import tiny


def test_digits_split_sizes_and_range():
  train, train_labels = data.digits_arrays('train')
  test, _ = data.digits_arrays('test')
  assert train.shape == (1500, 8, 8, 1) and test.shape == (297, 8, 8, 1)
  assert train.min() == -1.0 and train.max() == 1.0
  assert len(set(train_labels.tolist())) == 10
  # fixed split: the same images every time, disjoint
  again, _ = data.digits_arrays('train')
  np.testing.assert_array_equal(train, again)
  flat_train = {a.tobytes() for a in train}
  assert sum(a.tobytes() in flat_train for a in test) < 10  # a few digits are pixel-identical


def test_digits_train_dataset_is_batched_and_resized():
  cfg = tiny().data
  ds = data.train_dataset(cfg, 32)
  batch = next(iter(ds))
  assert batch.shape == (32, 16, 16, 1) and batch.dtype == tf.float32
  assert float(tf.reduce_min(batch)) >= -1.0 and float(tf.reduce_max(batch)) <= 1.0
  b = batch.numpy()
  assert not np.array_equal(b[:, ::2, ::2], b[:, 1::2, 1::2])  # bilinear (the default): smooth
  cfg.resize_method = 'nearest'  # nearest-neighbour upscaling: every 2x2 block is constant
  b = next(iter(data.train_dataset(cfg, 32))).numpy()
  np.testing.assert_array_equal(b[:, ::2, ::2], b[:, 1::2, 1::2])


def test_train_dataset_shards_by_input_context():
  cfg = tiny().data
  ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1,
                                   num_replicas_in_sync=2)
  batch = next(iter(data.train_dataset(cfg, 16, ctx)))
  assert batch.shape == (8, 16, 16, 1)  # per-replica batch


@pytest.mark.parametrize('name,size,channels', [('cifar10', 32, 3), ('celeb_a', 64, 3),
                                                ('svhn_cropped', 32, 3)])
def test_tfds_datasets_with_mock_data(name, size, channels):
  cfg = tiny().data
  cfg.name, cfg.image_size, cfg.channels = name, size, channels
  with tfds.testing.mock_data(num_examples=12):
    batch = next(iter(data.train_dataset(cfg, 4)))
    evals = [b.shape[0] for b in data.eval_dataset(cfg, 'test', 5)]
  assert batch.shape == (4, size, size, channels)
  assert float(tf.reduce_min(batch)) >= -1.0 and float(tf.reduce_max(batch)) <= 1.0
  assert sum(evals) == 12
  with tfds.testing.mock_data(num_examples=12):  # tfds sources keep tf.data's autotuning
    assert data.train_dataset(cfg, 4).options().autotune.enabled is not False


def test_digits_datasets_do_not_autotune():
  # tf.data's autotuning thread sleeps up to a minute and a destroyed iterator waits for it: a
  # digits run took up to 54 s to exit after its last line. The embedded digits need no tuning.
  cfg = tiny().data
  for ds in (data.train_dataset(cfg, 8), data.eval_dataset(cfg, 'test', 8)):
    assert ds.options().autotune.enabled is False


def test_imagenet_random_resized_crop_shape():
  image = tf.cast(tf.random.uniform([200, 300, 3], 0, 255, tf.int32), tf.uint8)
  out = data.random_resized_crop(tf.cast(image, tf.float32), 128, (0.5, 1.0))
  assert out.shape == (128, 128, 3)


def imagenet_cfg(crop):
  cfg = tiny().data
  cfg.name, cfg.image_size, cfg.channels, cfg.crop = 'imagenet2012', 128, 3, crop
  return cfg


def find_crop(crop, image):
  """(top, left) offsets at which `crop` appears in `image` exactly (to float32 rounding)."""
  h, w = crop.shape[:2]
  return [(i, j) for i in range(image.shape[0] - h + 1) for j in range(image.shape[1] - w + 1)
          if np.allclose(image[i:i + h, j:j + w], crop, atol=1e-6)]


@pytest.mark.parametrize('shape,resized', [((200, 300, 3), (128, 192)),
                                           ((300, 200, 3), (192, 128))])
def test_imagenet_release_crop_is_a_crop_of_the_shorter_side_resize(shape, resized):
  image = tf.cast(tf.random.stateless_uniform(shape, [1, 2], 0, 255, tf.int32), tf.uint8)
  full = data.to_unit_range(data.resize_shorter_side(tf.cast(image, tf.float32), 128)).numpy()
  assert full.shape[:2] == resized
  fn = data.preprocess_fn(imagenet_cfg('release'), training=True)
  offsets = set()
  for _ in range(6):
    out = fn(image).numpy()
    assert out.shape == (128, 128, 3)
    found = find_crop(out, full)
    assert len(found) == 1, found
    offsets.add(found[0])
  assert len(offsets) > 1  # a random crop, not a fixed one
  out = data.preprocess_fn(imagenet_cfg('random_resized'), training=True)(image).numpy()
  assert out.shape == (128, 128, 3)  # the random resized crop stays available


def test_unknown_crop_names_the_field():
  with pytest.raises(ValueError, match=r"data.crop must be one of \('release', 'random_resized'\)"):
    data.preprocess_fn(imagenet_cfg('center'), training=True)


def test_unknown_dataset_and_split_errors():
  cfg = tiny().data
  cfg.name = 'mnist_typo'
  with pytest.raises(ValueError, match="unknown dataset 'mnist_typo'"):
    data.train_dataset(cfg, 4)
  with pytest.raises(ValueError, match="unknown split 'validation'"):
    data.digits_arrays('validation')


def test_missing_tfds_data_without_download_is_clear(tmp_path):
  cfg = tiny().data
  cfg.name, cfg.image_size, cfg.channels = 'cifar10', 32, 3
  cfg.data_dir = str(tmp_path)
  with pytest.raises(ValueError, match="tfds dataset 'cifar10'.*download is off"):
    data.train_dataset(cfg, 4)


def offline_cifar10(tmp_path):
  cfg = tiny().data
  cfg.name, cfg.image_size, cfg.channels = 'cifar10', 32, 3
  cfg.data_dir, cfg.download = str(tmp_path / 'tfds'), True
  return cfg


def assert_fast_one_line_download_error(cfg, capsys, reason):
  start = time.monotonic()
  with pytest.raises(SystemExit) as exit_info:
    errors.main_guard(lambda: data.train_dataset(cfg, 4))
  elapsed = time.monotonic() - start
  err = capsys.readouterr().err
  # A download that started shows tfds's progress bars first; the error is the last line.
  lines = [line for line in err.strip().splitlines() if line.startswith('error: ')]
  assert exit_info.value.code == 1 and len(lines) == 1, err[-2000:]
  assert err.strip().endswith(lines[0]) and 'Traceback' not in err, err[-2000:]
  for text in ("'cifar10' could not be downloaded", 'data.download=True', reason,
               '--config.data.data_dir', 'tfds build cifar10'):
    assert text in lines[0], (text, lines[0])
  assert elapsed < 15, elapsed  # tfds's own retries take minutes
  return elapsed, err


def test_download_without_network_fails_at_once_in_one_line(tmp_path, capsys, monkeypatch):
  def no_network(*args, **kwargs):
    raise socket.gaierror(-2, 'Name or service not known')

  monkeypatch.setattr(socket, 'create_connection', no_network)
  _, err = assert_fast_one_line_download_error(offline_cifar10(tmp_path), capsys, 'no network?')
  assert len(err.strip().splitlines()) == 1, err  # refused before tfds printed anything
  assert not (tmp_path / 'tfds' / 'downloads').exists()  # tfds never started


def test_download_probe_that_hangs_gives_up_after_its_timeout(tmp_path, capsys, monkeypatch):
  # Sleeps past the test, then hands back a socket the probe thread can close quietly.
  monkeypatch.setattr(socket, 'create_connection',
                      lambda *a, **k: time.sleep(60) or socket.socket())
  monkeypatch.setattr(data, 'PROBE_TIMEOUT', 1.0)
  elapsed, err = assert_fast_one_line_download_error(offline_cifar10(tmp_path), capsys,
                                                     'no network?')
  assert elapsed >= 1.0 and len(err.strip().splitlines()) == 1, (elapsed, err)


def test_failed_download_after_the_probe_is_one_line(tmp_path, capsys, monkeypatch):
  # The probe host answers but the dataset's own host does not: tfds's error, on one line.
  def unreachable(*args, **kwargs):
    raise requests.exceptions.ConnectionError('Failed to resolve www.cs.toronto.edu')

  monkeypatch.setattr(data, '_can_connect', lambda address: True)
  monkeypatch.setattr(requests.Session, 'get', unreachable)
  assert_fast_one_line_download_error(offline_cifar10(tmp_path), capsys,
                                      'Failed to resolve www.cs.toronto.edu')
