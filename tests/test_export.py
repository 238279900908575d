"""SavedModel export: round trip in a process that imports no project code, input validation."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tf_hat_ebm
from tf_hat_ebm import export
from tf_hat_ebm import trained_run

from conftest import run_command

# Runs in a fresh interpreter, outside the repository and without PYTHONPATH: TensorFlow and
# tensorflow_hub only.
LOADER = r'''
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_hub as hub
path, images_file = sys.argv[1], sys.argv[2]
images = np.load(images_file)
out = {}
for name, model in (('tf', tf.saved_model.load(path)), ('hub', hub.load(path))):
  a = model.sample(num_samples=3, seed=7)['images'].numpy()
  b = model.sample(num_samples=3, seed=7)['images'].numpy()
  c = model.sample(num_samples=3, seed=8)['images'].numpy()
  sig = model.signatures['sample'](num_samples=tf.constant(3, tf.int64),
                                   seed=tf.constant(7, tf.int64))
  out[name] = dict(samples=a.tolist(), same_seed=bool(np.array_equal(a, b)),
                   other_seed_differs=bool(not np.array_equal(a, c)),
                   signature_same=bool(np.array_equal(a, sig['images'].numpy())),
                   energy=model.energy(tf.constant(images))['energy'].numpy().tolist(),
                   signature_energy=model.signatures['energy'](images=tf.constant(images))[
                       'energy'].numpy().tolist())
  errors = {}
  for bad_name, bad in (('rank', images[0]), ('size', images[:, :8]),
                        ('channels', np.repeat(images, 3, axis=-1)),
                        ('dtype', images.astype(np.float64))):
    try:
      model.energy(tf.constant(bad))
      errors[bad_name] = 'no error'
    except Exception as e:  # pylint: disable=broad-except
      errors[bad_name] = str(e)
  out[name]['errors'] = errors
  out[name]['default_seed_same'] = bool(np.array_equal(
      model.sample(num_samples=3)['images'].numpy(), model.sample(num_samples=3, seed=0)[
          'images'].numpy()))
  spec = model.signatures['energy'].structured_input_signature[1]['images']
  out[name]['energy_spec'] = [list(spec.shape), spec.dtype.name]
  out[name]['sample_specs'] = {k: [list(v.shape), v.dtype.name] for k, v in
                               model.signatures['sample'].structured_input_signature[1].items()}
  out[name]['meta'] = dict(step=int(model.step.numpy()), dataset=model.dataset.numpy().decode(),
                           version=model.version.numpy().decode(),
                           experiment=model.experiment.numpy().decode(),
                           card=open(model.model_card.asset_path.numpy().decode()).read(),
                           config=json.load(open(model.config_file.asset_path.numpy().decode())))
out['assets'] = sorted(__import__('os').listdir(path + '/assets'))
try:  # hub.KerasLayer is a Keras 2 layer: tf_keras from TensorFlow 2.16 on
  import tf_keras as keras
except ImportError:  # TensorFlow 2.15, whose own Keras is Keras 2
  keras = tf.keras
layer = hub.KerasLayer(path, signature='energy', output_key='energy')
inputs = keras.Input([16, 16, 1])
out['keras_energy'] = keras.Model(inputs, layer(inputs))(images).numpy().tolist()
# The reusable SavedModel API: no signature named, the parameters counted.
default = hub.KerasLayer(path)
keras_model = keras.Model(inputs, default(inputs))
out['keras_default'] = keras_model(images).numpy().tolist()
out['keras_params'] = int(keras_model.count_params())
loaded = tf.saved_model.load(path)
out['call'] = loaded(tf.constant(images)).numpy().tolist()
out['serving_default'] = loaded.signatures['serving_default'](images=tf.constant(images))[
    'energy'].numpy().tolist()
out['variables'] = [len(loaded.variables), len(loaded.trainable_variables),
                    len(loaded.regularization_losses)]
out['project_imported'] = any(m.startswith('tf_hat_ebm') for m in sys.modules)
print(json.dumps(out))
'''


@pytest.fixture(scope='module')
def module_of_run(trained_workdir):
  """(run, export module) of trained_workdir, not saved: a save traces every signature."""
  run = trained_run.load_run(trained_workdir)
  return run, export.build_module(run)


@pytest.fixture(scope='module')
def exported(module_of_run, tmp_path_factory):
  run, module = module_of_run
  path = str(tmp_path_factory.mktemp('export') / 'saved_model')
  export.save(module, path)
  return run, module, path


@pytest.mark.slow
def test_round_trip_in_a_process_without_project_code(exported, tmp_path):
  run, module, path = exported
  images = np.random.RandomState(0).uniform(-1, 1, [5, 16, 16, 1]).astype(np.float32)
  np.save(tmp_path / 'images.npy', images)
  env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
  env['TF_CPP_MIN_LOG_LEVEL'] = '2'  # errors only
  result = subprocess.run([sys.executable, '-c', LOADER, path, str(tmp_path / 'images.npy')],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  # No graph optimizer error on the first calls (the oneDNN remapper once failed on H's blocks).
  assert 'grappler' not in result.stderr and 'remapper' not in result.stderr, result.stderr
  out = json.loads(result.stdout.strip().splitlines()[-1])
  assert not out['project_imported']
  expected_energy = run.model.hat(images).numpy()
  expected_samples = module.sample(3, 7)['images'].numpy()
  for name in ('tf', 'hub'):
    got = out[name]
    np.testing.assert_allclose(got['energy'], expected_energy, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got['signature_energy'], expected_energy, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(got['samples'], expected_samples, atol=1e-5)
    assert got['same_seed'] and got['other_seed_differs'] and got['signature_same']
    for kind, message in got['errors'].items():  # the concrete signature names shape and dtype
      assert 'shape=(None, 16, 16, 1), dtype=tf.float32' in message, (kind, message)
    assert got['default_seed_same']
    assert got['energy_spec'] == [[None, 16, 16, 1], 'float32']
    assert got['sample_specs'] == {'num_samples': [[], 'int64'], 'seed': [[], 'int64']}
    meta = got['meta']
    assert meta['step'] == run.step and meta['dataset'] == 'digits'
    assert meta['version'] == tf_hat_ebm.__version__ and meta['experiment'] == 'synthesis'
    assert meta['config'] == json.loads(run.config.to_json_best_effort())
    card = meta['card']
    assert f'| training step | {run.step} |' in card and 'NeurIPS 2022' in card
    assert '## License\n\nApache-2.0' in card and export.BIBTEX in card
    assert '## Limitations' in card and 'tensorflow_hub.KerasLayer(PATH)' in card
    assert all(f'`{fn}(' in card for fn in ('sample', 'sample_path', 'energy'))
  assert out['assets'] == ['README.md', 'config.json']
  np.testing.assert_allclose(out['keras_energy'], expected_energy, atol=1e-5, rtol=1e-5)
  for key in ('keras_default', 'call', 'serving_default'):
    np.testing.assert_allclose(out[key], expected_energy, atol=1e-5, rtol=1e-5)
  hat_params = sum(int(np.prod(v.shape)) for v in run.model.hat.variables)
  assert out['keras_params'] == hat_params > 0
  assert out['variables'] == [len(run.model.hat.variables),
                              len(run.model.hat.trainable_variables), 0]


def test_samples_and_path_agree_in_process(module_of_run):
  _, module = module_of_run
  x = module.sample(4, 3)
  assert x['images'].shape == (4, 16, 16, 1)
  np.testing.assert_allclose(x['images'], np.clip(x['generator_images'] + x['residuals'], -1, 1),
                             atol=1e-6)
  path = module.sample_path(4, 3)
  assert list(path['steps'].numpy()) == [0, 1, 2]  # 5 even points of K=2, deduplicated
  assert path['images'].shape == (3, 4, 16, 16, 1)
  np.testing.assert_allclose(path['images'][-1], x['images'], atol=1e-5)  # segments = one chain
  np.testing.assert_array_equal(path['residuals'][0], np.zeros([4, 16, 16, 1]))  # Y0 = 0


def test_export_script_rejects_missing_checkpoint(tmp_path):
  result = run_command('export.py', f'--workdir={tmp_path}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1].startswith('error: no config.json in workdir')


def test_the_model_card_says_which_fid_it_measured():
  assert 'NOT Inception FID' in export.fid_features_note('classifier_0123abcd')
  assert 'Inception pool3' in export.fid_features_note('inception_v1')
  assert '2210.16486' in export.BIBTEX and export.RELEASE_URL.endswith('point0bar1/hat-ebm')


def test_export_prints_the_path_steps_as_plain_numbers(exported_workdir):
  # numpy 2 shows an array's items as np.int32(0) in a list of them
  assert '  sample_path steps: [0, 1, 2]\n' in exported_workdir[1]
