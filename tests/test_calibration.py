"""The digits FID's calibration: floor, memorisation bound, missing class, coverage of samples."""
import numpy as np
import pytest

from tf_hat_ebm.evaluation import calibration
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.reproduction import tables

from conftest import tiny


@pytest.fixture(scope='module', name='setup')
def setup_fixture(tmp_path_factory):
  cache = str(tmp_path_factory.mktemp('calibration'))
  data_cfg = tiny().data
  net = features.classifier_features(data_cfg, cache, epochs=1, verbose=False)
  return data_cfg, net, cache


def test_nearest_distances_and_histograms_are_exact():
  train = np.zeros([3, 2, 2, 1], np.float32)
  train[1] += 1.0
  images = np.stack([train[1] + 1.0, train[0]])
  np.testing.assert_allclose(calibration.nearest_distances(images, train), [2.0, 0.0])
  h = calibration.class_histogram([0, 0, 1, 2, 2, 2], 4)
  assert h == dict(counts=[2, 1, 3, 0], rarest_class=3, rarest_share=0.0)


def test_memorised_digits_score_below_the_held_out_floor(setup):
  data_cfg, net, cache = setup
  cal = calibration.calibrate(data_cfg, net, cache, num=400, runs=2)
  # 400 > the 297 test digits: drawn with replacement; the training digits are not.
  assert cal['replacement'] and cal['test_size'] == 297
  assert cal['memorisation']['mean'] < cal['floor']['mean']
  assert cal['floor']['std'] is not None and cal['floor']['runs'] == 2
  assert sum(cal['test']['counts']) == 297 and cal['test']['rarest_share'] < 0.1
  assert cal['test']['nn_p5'] < cal['test']['nn_mean']
  whole = calibration.calibrate(data_cfg, net, cache, num=297, runs=3)  # the whole test split
  assert whole['floor']['runs'] == 1 and whole['floor']['std'] is None
  assert not whole['replacement'] and whole['memorisation']['runs'] == 3

  train = calibration.split_images(data_cfg, 'train')
  copies = calibration.coverage(train[:200], net, data_cfg, cal)
  noise = calibration.coverage(np.random.RandomState(0).uniform(-1, 1, [200, 16, 16, 1]), net,
                               data_cfg, cal)
  assert copies['share_closer_than_test_p5'] == 1.0 and copies['nn_mean'] == 0.0
  assert noise['share_closer_than_test_p5'] == 0.0 and noise['nn_mean'] > cal['test']['nn_mean']

  lines = tables.calibration_section(cal, {'copies of training digits': copies})
  text = '\n'.join(lines)
  assert f'{cal["floor"]["mean"]:.2f}' in text and 'gap below ~2' in text
  assert '| copies of training digits |' in text and '100.0% |' in text
