"""Joint Hat EBM over a frozen generator the project did not define (SavedModel, factory)."""
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import generators
from tf_hat_ebm import langevin
from tf_hat_ebm import nets
from tf_hat_ebm import results
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm.keras_compat import keras
from tf_hat_ebm.tasks import joint
from tf_hat_ebm.trainer import Trainer

from conftest import copy_of, tiny
from conftest import train_keeps_generator_frozen


def tiny_decoder():
  """A user's generator: latents [4] -> sigmoid images [16, 16, 1] in (0, 1)."""
  keras.utils.set_random_seed(0)
  return keras.Sequential([
      keras.layers.Input([4]),
      keras.layers.Dense(4 * 4 * 4, activation='relu'),
      keras.layers.Reshape([4, 4, 4]),
      keras.layers.Conv2DTranspose(1, 4, strides=4, activation='sigmoid'),
  ])


@pytest.fixture(scope='module')
def saved_decoder(tmp_path_factory):
  path = str(tmp_path_factory.mktemp('user_generator') / 'decoder')
  tiny_decoder().save(path)
  return path


def savedmodel_config(path, **overrides):
  return tiny('digits_refine', **{'generator.source': 'savedmodel', 'generator.path': path,
                                  'training.figures': True,
                                  'generator.latent_shape': (4,),
                                  'generator.output_range': (0.0, 1.0), **overrides})


@pytest.fixture(scope='module')
def savedmodel_run(saved_decoder, tmp_path_factory):
  """(workdir, task, generator and hat weights before, metrics) of a refinement over
  saved_decoder trained 2 steps: one training for the tests below (read-only: copy_of it)."""
  config = savedmodel_config(saved_decoder)
  task = joint.JointTask(config, tf.distribute.get_strategy())
  g_before = [v.numpy().copy() for v in task.generator.model.variables]
  hat_before = [v.numpy().copy() for v in task.hat.trainable_variables]
  workdir = tmp_path_factory.mktemp('savedmodel_run')
  metrics = Trainer(task, config, str(workdir), tf.distribute.get_strategy(),
                    verbose=False).train(2)
  return workdir, task, g_before, hat_before, metrics


def test_refinement_over_a_savedmodel_keeps_the_generator_frozen(savedmodel_run):
  workdir, task, g_before, hat_before, metrics = savedmodel_run
  assert set(metrics) == set(joint.JointTask.metric_names)
  assert all(np.isfinite(v) for v in metrics.values())
  assert metrics['latent_grad_norm'] > 0 and metrics['residual_grad_norm'] > 0
  for a, b in zip(g_before, task.generator.model.variables):
    np.testing.assert_array_equal(a, b.numpy())
  assert any(not np.array_equal(a, b.numpy())
             for a, b in zip(hat_before, task.hat.trainable_variables))
  assert sorted(os.listdir(workdir / 'samples')) == [
      'data.png', 'generator_0000002.png', 'residual_0000002.png', 'samples_0000002.png']
  # outputs mapped from the declared (0, 1) to the data's [-1, 1]
  z = tf.random.normal([3, 4])
  np.testing.assert_allclose(task.generator(z).numpy(),
                             2.0 * task.generator.model(z).numpy() - 1.0, rtol=1e-5, atol=1e-6)


def test_generator_that_does_not_match_the_config_fails_naming_both_shapes(saved_decoder):
  strategy = tf.distribute.get_strategy()
  with pytest.raises(ValueError, match=r'maps latents \[4\] to images \[16, 16, 1\]; the config '
                     r'expects images \[32, 32, 3\]'):
    joint.JointTask(savedmodel_config(saved_decoder, **{'data.image_size': 32,
                                                        'data.channels': 3}), strategy)
  with pytest.raises(ValueError, match=r'does not accept latents of shape \[5\]'):
    joint.JointTask(savedmodel_config(saved_decoder, **{'generator.latent_shape': (5,)}),
                    strategy)


def test_factory_source_and_config_errors():
  config = tiny('digits_refine', **{'generator.source': 'factory',
                                    'generator.path': 'test_refinement:tiny_decoder',
                                    'generator.latent_shape': (4,),
                                    'generator.output_range': (0.0, 1.0)})
  generator, discriminator = generators.load(config)
  assert generator.latent_shape == (4,) and discriminator is None
  assert not generator.model.trainable
  config.generator.path = 'no_such_module:fn'
  with pytest.raises(ValueError, match="cannot import generator factory 'no_such_module:fn'"):
    generators.load(config)
  config.generator.update(latent_shape=(), path='test_refinement:unshaped_decoder')
  with pytest.raises(ValueError, match=r'needs generator.latent_shape \(its signature does not'):
    generators.load(config)
  config.generator.path = 'test_refinement:tiny_decoder'  # a Keras model's input states it
  assert generators.load(config)[0].latent_shape == (4,)


def unshaped_decoder():
  """A generator whose signature states no latent shape (a plain function)."""
  return lambda z: tf.zeros([tf.shape(z)[0], 16, 16, 1])


def test_divergence_rollback_serves_the_joint_task_too(saved_decoder, savedmodel_run, tmp_path):
  strategy = tf.distribute.get_strategy()
  workdir = copy_of(savedmodel_run[0], tmp_path)  # at step 2
  absurd = savedmodel_config(saved_decoder, **{
      'optim.hat_lr': 1e30, 'training.rollback_on_divergence': True,
      'training.rollback_lr_factor': 1e-34, 'training.max_rollbacks': 1,
      'training.num_steps': 4})
  task = joint.JointTask(absurd, strategy)
  trainer = Trainer(task, absurd, str(workdir), strategy, verbose=False)
  metrics = trainer.train()
  assert trainer.guard.rollbacks == 1
  assert int(trainer.step.numpy()) == 4 and all(np.isfinite(v) for v in metrics.values())
  np.testing.assert_allclose(float(task.lr_scale.numpy()), 1e-34, rtol=1e-4)


def test_side_by_side_comparison_scores_every_method_from_the_same_latents(saved_decoder,
                                                                           savedmodel_run,
                                                                           tmp_path):
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import digits_eval  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import compare  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import features  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import samplers  # pylint: disable=g-import-not-at-top
  config = savedmodel_config(saved_decoder)
  run = trained_run.load_run(str(savedmodel_run[0]), trust_code=True)  # its SavedModel: ours
  assert run.step == 2
  task = run.model
  methods = samplers.joint(run)
  assert list(methods.labels) == ['generator', 'hat_ebm']  # no discriminator: no DDLS
  first = samplers.sample_all(task, methods.sampler, 6, seed=3, batch_size=4)  # batches of 4, 2
  assert set(first) == {'generator', 'hat_ebm'}
  assert all(x.shape == (6, 16, 16, 1) and np.abs(x).max() <= 1.0 for x in first.values())
  again = samplers.sample_all(task, methods.sampler, 6, seed=3, batch_size=4)
  np.testing.assert_array_equal(first['hat_ebm'], again['hat_ebm'])  # seeded: reproducible
  # Z0 of the first batch: the stream (seed 3, batch 0)
  z0 = tf.random.Generator.from_seed(samples_lib.stream_seed(3, 0)).normal([4, 4])
  np.testing.assert_allclose(first['generator'][:4], task.generator(z0).numpy(), atol=1e-6)
  assert not np.allclose(first['hat_ebm'], first['generator'])  # the chain moved
  net = features.classifier_features(config.data, str(tmp_path), epochs=1, verbose=False)
  result = compare.digits_scores(methods, config, first, net, str(tmp_path), fid_samples=40,
                                 fid_runs=2, batch_size=20)
  assert list(result.methods) == ['generator', 'hat_ebm']
  assert list(result.metrics)[-3:] == ['confidence', 'digit_is', 'nn_dist']
  for method in result.methods:
    for metric in result.metrics:
      values = result.sets(metric, method)
      assert len(values) == (1 if metric in results.metrics_where('grid') else 2)
      assert all(np.isfinite(values))
    assert result.std('fid', method) > 0.0
  # real digits are far closer to the train split than the user's untrained decoder
  assert result.data['fid'] < result.mean('fid', 'generator') / 5
  assert abs(result.data['kid']) < result.mean('kid', 'generator') / 5
  real = digits_eval.scores(digits_eval.test_digits(config.data))
  assert {k: result.data[k] for k in results.metrics_where('grid')} == real
  assert result.sets('confidence', 'hat_ebm') == [digits_eval.scores(first['hat_ebm'])[
      'confidence']]


@pytest.mark.slow
def test_evaluate_fid_on_a_refinement_run_scores_sngan_ddls_and_hat_ebm(tmp_path):
  """Table 2 in one command: G(Z0), DDLS and the Hat EBM with the same feature network."""
  from conftest import run_command, train_tiny_refinement  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import results as result_lib  # pylint: disable=g-import-not-at-top
  gan_dir, run_dir, cache = (str(tmp_path / d) for d in ('sngan', 'refine', 'cache'))
  config = train_tiny_refinement(gan_dir, run_dir)

  def evaluate_fid(workdir, *more):
    """(stdout, table rows) of evaluate_fid.py on `workdir`; it must exit 0."""
    out = run_command('evaluate_fid.py', f'--workdir={workdir}', '--num_samples=20', '--runs=2',
                      '--batch_size=10', f'--feature_cache_dir={cache}', *more)
    assert out.returncode == 0, out.stderr[-2000:]
    return out, [line for line in out.stdout.splitlines() if line.startswith('| ')]

  result, rows = evaluate_fid(run_dir)
  labels = [row.split('|')[1].strip() for row in rows[1:]]
  assert labels == ['SN-GAN G(Z0) (20)', 'DDLS (Langevin in z, SN-GAN D) (20)',
                    'Hat EBM X = G(Z_K) + Y_K (20)', 'data: test split (297)']
  assert 'features: digits classifier penultimate layer' in result.stdout
  assert 'shipped)' in result.stdout and not os.path.exists(cache)  # nothing trained here
  chain = langevin.ChainSettings.from_config(config.sampling).describe()
  assert f'sampling chain {chain}; DDLS K=2' in result.stdout and 'eps_z=' in chain
  saved = result_lib.read(os.path.join(run_dir, 'fid.json')).values['fid']
  for method in ('generator', 'ddls', 'hat_ebm'):
    assert len(saved[method]) == 2 and all(np.isfinite(v) and v > 0 for v in saved[method])
  assert saved['generator'] != saved['hat_ebm'] != saved['ddls']
  from tf_hat_ebm import summaries  # pylint: disable=g-import-not-at-top
  logged = summaries.read_scalars(os.path.join(run_dir, 'tensorboard'))
  assert logged['eval/fid_hat_ebm'] == [(2, pytest.approx(np.mean(saved['hat_ebm'])))]
  # The SN-GAN on its own: the same latents, so the same FID as the refinement's G(Z0) row.
  result, rows = evaluate_fid(gan_dir)
  assert [row.split('|')[1].strip() for row in rows[1:]] == ['SN-GAN G(Z0) (20)',
                                                             'data: test split (297)']
  alone = result_lib.read(os.path.join(gan_dir, 'fid.json'))
  assert alone.step == 2
  np.testing.assert_allclose(alone.values['fid']['generator'], saved['generator'], rtol=1e-5)
  # An ablation arm scored alone: the Hat EBM's row only (no DDLS chain).
  result, rows = evaluate_fid(run_dir, '--nobaselines', '--overwrite')
  assert [row.split('|')[1].strip() for row in rows[1:]] == ['Hat EBM X = G(Z_K) + Y_K (20)',
                                                             'data: test split (297)']
  assert list(result_lib.read(os.path.join(run_dir, 'fid.json')).methods) == ['hat_ebm']


def test_refinement_of_a_synthesis_runs_own_generator(trained_workdir, tmp_path):
  """generator.source 'synthesis': the G a synthesis run trained in tandem with its hat, frozen
  under a new hat, at the run's own width, latent and output scale (not the config's)."""
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  config = tiny('digits_refine', **{'generator.source': 'synthesis',
                                    'generator.path': trained_workdir})
  assert config.model.out_factor != tiny().model.out_factor  # the run's must be taken
  synthesis = trained_run.load_run(trained_workdir)
  # built under the policy the run restores with (bf16 where native, float32 elsewhere), so the
  # two compute alike on every CPU kind; the config's out_factor would halve every pixel
  policy, _ = nets.resolve_precision(synthesis.config.perf.precision)
  generator, discriminator = generators.load(config, precision=policy)
  assert discriminator is None  # no D: the evaluation scores G(Z0) and the Hat EBM, no DDLS
  z = tf.random.stateless_normal([3, *generator.latent_shape], [1, 2])
  np.testing.assert_allclose(generator(z).numpy(), synthesis.model.generator(z).numpy(),
                             rtol=1e-6, atol=1e-6)
  assert config.generator.checkpoint == 2  # pinned to the run's checkpoint
  train_keeps_generator_frozen(joint.JointTask(config, tf.distribute.get_strategy()), config,
                               tmp_path)


def test_a_synthesis_run_of_other_images_is_refused_naming_both(trained_workdir):
  config = tiny('digits_refine', **{'generator.source': 'synthesis',
                                    'generator.path': trained_workdir})
  with config.unlocked():
    config.data.image_size = 32
  with pytest.raises(ValueError, match=r'makes 16x16x1 images; the config expects 32x32x1'):
    generators.load(config)
