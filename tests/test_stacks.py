"""The two stacks (docs/install.md): requirements files and pyproject.toml agree, Keras 2 without
touching a user's Keras 3, tensorflow_hub without pkg_resources."""
import inspect
from importlib import metadata
import os
import re
import subprocess
import sys

import pytest

from packaging import requirements
from packaging import utils

from tf_hat_ebm import keras_compat

from conftest import REPO

PINNED_PYTHON, LATEST_PYTHON = '3.11', '3.12'


def requirement_lines(name, python_version):
  """{package: specifiers} of a requirements file's lines whose markers hold on python_version."""
  out = {}
  with open(os.path.join(REPO, name)) as f:
    for line in f:
      line = line.split('#')[0].strip()
      if not line or line.startswith('-'):
        continue
      req = requirements.Requirement(line)
      if req.marker is None or req.marker.evaluate({'python_version': python_version}):
        key = utils.canonicalize_name(req.name)
        assert key not in out, f'{name}: {req.name} twice for Python {python_version}'
        out[key] = req.specifier
  return out


def test_requirements_pick_the_stack_by_python_version():
  pinned = requirement_lines('requirements.txt', PINNED_PYTHON)
  latest = requirement_lines('requirements.txt', LATEST_PYTHON)
  # The pinned stack is TensorFlow before 2.16 (Keras 2 inside it: keras_compat's first branch)
  # on numpy 1, with TF-GAN; the current one 2.20+ with its own tf-keras, on numpy 2.
  for stack, keras_2_inside in ((pinned, True), (latest, False)):
    tf_version = tuple(map(int, re.match(r'==(\d+)\.(\d+)', str(stack['tensorflow'])).groups()))
    assert (tf_version < (2, 16)) == keras_2_inside and ('tf-keras' in stack) != keras_2_inside
    assert ('tensorflow-gan' in stack) == keras_2_inside
    assert not stack['numpy'].contains('2.0.0') == keras_2_inside
  assert str(latest['tf-keras']).startswith('=={}.{}.'.format(*re.match(
      r'==(\d+)\.(\d+)', str(latest['tensorflow'])).groups()))  # tf-keras follows TensorFlow
  # The requirements of the running Python name the stack these tests run on.
  running = requirement_lines('requirements.txt', '{}.{}'.format(*sys.version_info[:2]))
  for name in ('tensorflow', 'numpy', 'tf-keras', 'tensorflow-gan'):
    if name in running:
      assert running[name].contains(metadata.version(name), prereleases=True), name
  assert 'tensorflow-probability' not in latest
  for stack in (pinned, latest):  # undeclared by TensorFlow 2.16+ or tensorflow-hub
    assert {'tensorboard', 'setuptools', 'packaging'} <= set(stack)
  assert 'importlib-resources' in latest  # tfds 4.9.10 imports it for any download
  # requirements-latest.txt (any Python from 3.10) is requirements.txt's current stack.
  assert requirement_lines('requirements-latest.txt', '3.10') == latest


def test_the_package_gets_keras_2_on_every_stack():
  # Keras 2 whatever tf.keras is (Keras 3 from TensorFlow 2.16 on): beside a user's Keras 3, a
  # layer of the package's is none of its layers.
  import keras as user_keras  # pylint: disable=g-import-not-at-top
  if user_keras.__version__.startswith('3.'):
    assert not isinstance(keras_compat.keras.layers.Dense(1), user_keras.layers.Layer)
  # Keras 2's optimizer contract, which learning.py's aggregation under tf.distribute relies on.
  parameters = inspect.signature(keras_compat.keras.optimizers.Adam.apply_gradients).parameters
  assert 'skip_gradients_aggregation' in parameters


@pytest.fixture(scope='module')
def fresh_import():
  """The lines printed by a fresh interpreter (one TensorFlow import for both tests below):
  with pkg_resources blocked (as after `pip install -U setuptools`, 81+ has none), the training
  code is imported and a network built, then tensorflow_hub imported the package's way."""
  code = ('import os, sys; sys.modules["pkg_resources"] = None\n'
          'import tensorflow as tf; before = type(tf.keras.layers.Dense(1)).__module__\n'
          'from tf_hat_ebm import nets, trainer\n'
          'from tf_hat_ebm.evaluation import fid\n'
          'from conftest import tiny\n'
          'nets.make_hat(tiny().model, 16, 1)\n'
          'after = type(tf.keras.layers.Dense(1)).__module__\n'
          'print(before == after, "TF_USE_LEGACY_KERAS" in os.environ)\n'
          'from tf_hat_ebm import tfgan_compat\n'
          'hub = tfgan_compat.import_hub()\n'
          'print(hub.__name__, sys.modules.get("pkg_resources", "gone"),\n'
          '      tfgan_compat.BACKEND.name)')
  env = {k: v for k, v in os.environ.items() if k != 'TF_USE_LEGACY_KERAS'}
  env['PYTHONPATH'] = os.pathsep.join([REPO, os.path.join(REPO, 'tests')])
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
  lines = result.stdout.splitlines()
  return (lines + ['', ''])[:2], result.stderr


def test_importing_the_package_leaves_a_user_s_keras_alone(fresh_import):
  # The training code is imported and a network built; tf.keras stays what TensorFlow made it.
  (keras_line, _), stderr = fresh_import
  assert keras_line.split() == ['True', 'False'], stderr


def test_tensorflow_hub_imports_without_pkg_resources(fresh_import):
  (_, hub_line), stderr = fresh_import
  # the same backend as with pkg_resources there (this process's)
  from tf_hat_ebm import tfgan_compat  # pylint: disable=g-import-not-at-top
  assert hub_line.split() == ['tensorflow_hub', 'gone', tfgan_compat.BACKEND.name], stderr


def test_stack_compare_pairs_the_sweeps_means_by_seed(tmp_path):
  sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
  try:
    import stack_compare  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.pop(0)
  a = {0: dict(fid_hat_ebm=[2.50, 0.03], fid_data=2.96), 1: dict(fid_hat_ebm=[2.11, 0.27]),
       2: dict(fid_hat_ebm=[2.17, 0.36])}
  b = {0: dict(fid_hat_ebm=[2.51, 0.10], fid_data=2.96), 1: dict(fid_hat_ebm=[2.40, 0.55]),
       3: dict(fid_hat_ebm=[9.0, 0.1])}
  result = stack_compare.compare(a, b)
  hat = result['fid_hat_ebm']
  assert hat['seeds'] == [0, 1] and hat['a'] == [2.50, 2.11] and hat['b'] == [2.51, 2.40]
  assert hat['differences'] == pytest.approx([0.01, 0.29])
  assert hat['mean'] == pytest.approx(0.15) and hat['low'] < 0 < hat['high']
  assert result['fid_data']['differences'] == [0.0]
  assert '| X = G(Z) + Y | 0, 1 | 2.500 / 2.110 | 2.510 / 2.400 |' in stack_compare.table(result)
