"""One sampling chain: what evaluation and export sample is the training config's sampling chain.

For every task kind with a chain (synthesis, refinement, retrofit), a trained workdir is loaded the
way every evaluation script loads it (trained_run.load_run, the registry's inference model), and
the samples of one seed of its export module are compared with the training task's own chain on
`config.sampling` from the same seed. The module is saved and reloaded too, for every kind in a
slow twin (a save traces every signature: seconds of CPU each; the bf16 refinement's checks the
joint module's policy rebuilt on load).
"""
import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm import registry
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.tasks import joint
from tf_hat_ebm.trainer import Trainer

from conftest import functions_run, tiny, train_keeps_generator_frozen

# Graphs, as every script runs them: eagerly, stateful random ops draw another stream. The
# synthesis and retrofit runs train eagerly (the guard's and the bf16 refinement's are graphs).
pytestmark = pytest.mark.graph

SEED, NUM = 7, 5


def train(config, workdir):
  strategy = tf.distribute.get_strategy()
  task = registry.for_config(config).task_class()(config, strategy)
  Trainer(task, config, workdir, strategy, verbose=False).train(2)
  return task


def train_eagerly(config, workdir):
  """train(), its steps run eagerly: the export and the chains compared after it stay graphs."""
  with functions_run(eagerly=True):
    return train(config, workdir)


def training_chain(task, seed=SEED, num=NUM):
  """The task's own chain on its config's `sampling` settings, images clipped as exported."""
  # A seed list, as the tasks seed their generators: the same Philox key as the module's tensor.
  out = task.replica_sample(tf.random.Generator.from_seed([seed]), num, task.sampling_settings)
  return np.clip(out['x'].numpy(), -1.0, 1.0)


def assert_exported_chain_is_the_training_chain(task, workdir, tmp_path, saved=True):
  """The module's samples (and with `saved` the reloaded SavedModel's) are the training chain's."""
  run = trained_run.load_run(workdir, trust_code=True)  # a factory generator is code: ours
  assert run.model.sampling == task.sampling_settings
  module = export.build_module(run)
  assert module.precision.numpy().decode() == run.model.precision == task.precision
  expected = training_chain(task)
  samples = [module.sample(NUM, SEED)['images']]
  if saved:
    loaded = tf.saved_model.load(export.save(module, str(tmp_path / 'saved_model')))
    assert loaded.precision.numpy().decode() == task.precision
    samples.append(loaded.sample(num_samples=NUM, seed=SEED)['images'])
  for images in samples:
    if task.precision == 'float32':
      np.testing.assert_allclose(images.numpy(), expected, atol=1e-5)
    else:  # bf16 kernels round by the shapes they know (the export's batch is dynamic)
      np.testing.assert_allclose(images.numpy(), expected, atol=0.1)
      assert np.mean(np.abs(images.numpy() - expected)) < 0.01
  return run


@pytest.mark.parametrize('saved', [False, pytest.param(True, marks=pytest.mark.slow)])
def test_synthesis(tmp_path, saved):
  config = tiny('digits_synth', **{'sampling.init_scale': 0.01, 'sampling.steps': 3})
  task = train_eagerly(config, str(tmp_path / 'run'))
  assert_exported_chain_is_the_training_chain(task, str(tmp_path / 'run'), tmp_path, saved)


@pytest.mark.parametrize('saved', [False, pytest.param(True, marks=pytest.mark.slow)])
def test_refinement_in_bf16(tmp_path, saved):
  # The factory's model is built under the run's policy wherever the run is loaded.
  config = tiny('digits_refine', **{'generator.source': 'factory',
                                    'generator.path': 'test_refinement:tiny_decoder',
                                    'generator.latent_shape': (4,),
                                    'generator.output_range': (0.0, 1.0),
                                    'sampling.steps': 3, 'perf.precision': 'mixed_bfloat16'})
  task = train(config, str(tmp_path / 'run'))
  assert task.generator.compute_dtype == tf.bfloat16
  assert_exported_chain_is_the_training_chain(task, str(tmp_path / 'run'), tmp_path, saved)


@pytest.mark.parametrize('saved', [False, pytest.param(True, marks=pytest.mark.slow)])
def test_retrofit_keeps_its_latents_on_the_decoders_sphere(trained_autoencoder, tmp_path, saved):
  config = tiny('digits_retrofit', **{'generator.path': trained_autoencoder[0],
                                      'sampling.steps': 3})
  assert config.sampling.latent_sphere
  # Trained with the decoder frozen (test_autoencoder's retrofit checks what comes before).
  task = joint.JointTask(config, tf.distribute.get_strategy())
  with functions_run(eagerly=True):  # the bf16 refinement above trains the joint task as a graph
    train_keeps_generator_frozen(task, config, tmp_path / 'run')
  run = assert_exported_chain_is_the_training_chain(task, str(tmp_path / 'run'), tmp_path, saved)
  # The chain without the sphere samples other images: the comparison above can fail.
  off_sphere = dataclasses.replace(run.model, sampling=dataclasses.replace(
      run.model.sampling, latent_sphere=False))
  module = registry.get('joint').export_module(off_sphere, run.config)
  assert not np.allclose(module.sample(NUM, SEED)['images'].numpy(), training_chain(task),
                         atol=1e-3)
  latents = module.sample(NUM, SEED)['latents'].numpy().reshape(NUM, -1)
  assert not np.allclose(np.linalg.norm(latents, axis=1), 8.0, rtol=1e-3)


@pytest.mark.parametrize('experiment', ['digits_sngan', 'digits_autoencoder'])
def test_kinds_without_a_chain_are_not_loaded_for_sampling(experiment, tmp_path):
  config = tiny(experiment)
  workdir_lib.write_config(str(tmp_path), config)  # refused on its kind, before any checkpoint
  with pytest.raises(ValueError, match=f"holds a '{config.experiment}' run; loadable experiments: "
                     'joint, synthesis'):
    trained_run.load_run(str(tmp_path))
