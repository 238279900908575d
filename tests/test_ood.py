"""OOD detection: AUROC on constructed energies, the offline digits sets, the whole evaluation."""
import ml_collections
import numpy as np
import pytest

from tf_hat_ebm import checkpoints
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


@pytest.mark.parametrize('name', ood.OFFLINE_OOD_SETS)
def test_offline_sets_have_the_model_shape_and_range(name):
  images = ood.offline_set(name, tiny().data, 12)
  assert images.shape == (12, 16, 16, 1) and images.dtype == np.float32
  assert images.min() >= -1.0 and images.max() <= 1.0
  assert images.std() > 0.05  # not a blank set


def test_unknown_set_is_a_clear_error():
  with pytest.raises(ValueError, match="unknown OOD set 'mnist'; known: inverted_digits"):
    ood.offline_set('mnist', tiny().data, 2)


def test_evaluate_reports_every_set(trained_workdir):
  run = checkpoints.load_run(trained_workdir)
  module = export.build_module(run)
  result = ood.evaluate(lambda x: module.energy(x)['energy'], run.config.data,
                        ['inverted_digits', 'uniform_noise'], num=20, batch_size=8, verbose=False)
  assert result['in_distribution']['num'] == 20
  assert set(result['sets']) == {'inverted_digits', 'uniform_noise'}
  for r in result['sets'].values():
    assert 0.0 <= r['auroc'] <= 1.0 and r['num'] == 20


def test_resampled_digits_use_the_other_upscaling_than_the_data():
  cfg = ml_collections.ConfigDict(dict(name='digits', image_size=16, channels=1,
                                       test_split='test', resize_method='bilinear'))
  blocky = ood.offline_set('resampled_digits', cfg, 5)
  np.testing.assert_array_equal(blocky[:, ::2, ::2], blocky[:, 1::2, 1::2])  # 2x2 blocks
  cfg.resize_method = 'nearest'
  smooth = ood.offline_set('resampled_digits', cfg, 5)
  assert not np.array_equal(smooth[:, ::2, ::2], smooth[:, 1::2, 1::2])
  assert smooth.shape == blocky.shape == (5, 16, 16, 1)
