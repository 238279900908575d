"""OOD detection: AUROC on constructed energies, the offline digits sets, the whole evaluation."""
import ml_collections
import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm.evaluation import ood

from conftest import tiny


def test_auroc_known_answers():
  rng = np.random.RandomState(0)
  low, high = rng.uniform(0, 1, 100), rng.uniform(2, 3, 80)
  assert ood.auroc(low, high) == 1.0      # OOD energies all higher: perfectly separated
  assert ood.auroc(high, low) == 0.0
  same = rng.normal(size=200)
  assert ood.auroc(same, same) == pytest.approx(0.5)  # identical energies: chance
  assert ood.auroc(np.zeros(10), np.zeros(7)) == 0.5
  # 9 of the 12 (in, OOD) pairs have the OOD energy higher
  assert ood.auroc(np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.5, 2.5, 3.5])) == 9 / 12
  # a tie counts half: 1 (1 > 0) + 0.5 (1 = 1) + 2 (2 > 0, 1) of 4 pairs
  assert ood.auroc(np.array([0.0, 1.0]), np.array([1.0, 2.0])) == 3.5 / 4


@pytest.mark.parametrize('name', ood.OFFLINE_OOD_SETS)
def test_offline_sets_have_the_model_shape_and_range(name):
  images = ood.offline_set(name, tiny().data, 12)
  assert images.shape == (12, 16, 16, 1) and images.dtype == np.float32
  assert images.min() >= -1.0 and images.max() <= 1.0
  assert images.std() > 0.05  # not a blank set


def test_unknown_set_is_a_clear_error():
  with pytest.raises(ValueError, match="unknown OOD set 'mnist'; known: inverted_digits"):
    ood.offline_set('mnist', tiny().data, 2)


def fixed_energy(x):
  """Mean |x[i, j+1] - x[i, j]| (noise high, smooth photos low) + half the mean pixel (the digits'
  dark background low, the inverted digits' light one high)."""
  return (tf.reduce_mean(tf.abs(x[:, :, 1:] - x[:, :, :-1]), axis=[1, 2, 3])
          + 0.5 * tf.reduce_mean(x, axis=[1, 2, 3]))


def test_evaluate_with_a_fixed_energy_gives_the_pinned_aurocs():
  result = ood.evaluate(fixed_energy, tiny().data, list(ood.OFFLINE_OOD_SETS), num=20,
                        batch_size=8, verbose=False)
  assert result['in_distribution'] == {'name': 'digits/test', 'num': 20,
                                       'mean_energy': pytest.approx(0.049333, abs=1e-6)}
  sets = result['sets']
  assert {name: r['num'] for name, r in sets.items()} == dict.fromkeys(ood.OFFLINE_OOD_SETS, 20)
  aurocs = {name: r['auroc'] for name, r in sets.items()}
  # as fractions of the 20 x 20 (in, OOD) pairs
  assert aurocs == pytest.approx({'inverted_digits': 1.0, 'resampled_digits': 296 / 400,
                                  'uniform_noise': 1.0, 'gaussian_noise': 1.0,
                                  'natural_patches': 96 / 400}, abs=1e-12)
  means = {name: r['mean_energy'] for name, r in sets.items()}
  assert means == pytest.approx({'inverted_digits': 0.437126, 'resampled_digits': 0.090739,
                                 'uniform_noise': 0.665181, 'gaussian_noise': 0.534888,
                                 'natural_patches': -0.098443}, abs=1e-6)


def test_evaluate_a_trained_tiny_model_gives_the_pinned_aurocs(trained_workdir):
  run = trained_run.load_run(trained_workdir)
  module = export.build_module(run)
  result = ood.evaluate(lambda x: module.energy(x)['energy'], run.config.data,
                        ['inverted_digits', 'uniform_noise'], num=20, batch_size=8, verbose=False)
  assert result['in_distribution']['num'] == 20
  assert result['in_distribution']['mean_energy'] == pytest.approx(0.31564, rel=1e-3)
  assert set(result['sets']) == {'inverted_digits', 'uniform_noise'}
  # After 2 steps the hat network gives every OOD image a lower energy than every test digit.
  for r in result['sets'].values():
    assert r['auroc'] == 0.0 and r['num'] == 20
  assert result['sets']['inverted_digits']['mean_energy'] == pytest.approx(-0.08931, rel=1e-3)
  assert result['sets']['uniform_noise']['mean_energy'] == pytest.approx(0.00601, abs=1e-4)


def test_resampled_digits_use_the_other_upscaling_than_the_data():
  cfg = ml_collections.ConfigDict(dict(name='digits', image_size=16, channels=1,
                                       test_split='test', resize_method='bilinear'))
  blocky = ood.offline_set('resampled_digits', cfg, 5)
  np.testing.assert_array_equal(blocky[:, ::2, ::2], blocky[:, 1::2, 1::2])  # 2x2 blocks
  cfg.resize_method = 'nearest'
  smooth = ood.offline_set('resampled_digits', cfg, 5)
  assert not np.array_equal(smooth[:, ::2, ::2], smooth[:, 1::2, 1::2])
  assert smooth.shape == blocky.shape == (5, 16, 16, 1)


def test_a_model_of_digits_0_to_4_is_scored_on_5_to_9():
  from tf_hat_ebm import data as data_lib  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import validation  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import features, fid  # pylint: disable=g-import-not-at-top
  cfg = tiny(**{'data.classes': (0, 1, 2, 3, 4)}).data
  _, labels = data_lib.digits_arrays('test')
  low, high = int(np.sum(labels < 5)), int(np.sum(labels >= 5))
  in_distribution = np.concatenate(list(data_lib.eval_dataset(cfg, 'test', 500)))
  others = ood.offline_set('other_digits', cfg, 10_000)
  assert len(in_distribution) == low and len(others) == high and low + high == 297
  assert ood.default_sets(cfg)[-1] == 'other_digits'
  assert 'other_digits' not in ood.default_sets(tiny().data)
  with pytest.raises(ValueError, match='other_digits needs a model of some of the digits'):
    ood.offline_set('other_digits', tiny().data, 5)
  # The feature classifier still learns every class; the data statistics are the model's labels'.
  images, all_labels = features.labelled_arrays(cfg, 'test')
  assert len(images) == len(all_labels) == 297
  net = type('Net', (), {'name': 'n'})()
  assert fid.stats_path('c', cfg, 'test', net) != fid.stats_path('c', tiny().data, 'test', net)
  for data_name, classes in (('digits', (3, 12)), ('cifar10', (0,))):
    config = tiny(**{'data.classes': classes, 'data.name': data_name})
    with pytest.raises(validation.ConfigError, match='data.classes must be digit labels 0-9'):
      validation.validate(config)
