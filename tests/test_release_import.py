"""The authors' release networks load into ours and reproduce its outputs; imported workdirs load.

Reference data (made with the release's code, tests/data/release_nets/README.md): small random
networks of every class saved in its checkpoint format, with their outputs on fixed inputs.
"""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import trained_run
from tf_hat_ebm import langevin
from tf_hat_ebm import nets
from tf_hat_ebm import release_import

from conftest import REPO
from conftest import run_command
from conftest import load_config

RELEASE = os.path.join(REPO, 'tests', 'data', 'release_nets')
SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'

# name -> our network with the release's arguments of that file (its README lists them)
NETWORKS = {
    'hat32': lambda: nets.HatNetwork(32, 3, 32),
    'hat64': lambda: nets.HatNetwork(64, 3, 64),
    'hat128': lambda: nets.HatNetwork(128, 3, 64),
    'gen32': lambda: nets.Generator(32, 3, 32, 16, out_factor=2.0),
    'gen64': lambda: nets.Generator(64, 3, 64, 16, out_factor=2.0),
    'gen128': lambda: nets.Generator(128, 3, 64, 16, out_factor=2.0),
    'decoder32': lambda: nets.Decoder(32, 3, 32, out_factor=2.0),
    'encoder32': lambda: nets.Encoder(32, 3, 32),
}


def release_path(name):
  return os.path.join(RELEASE, f'{name}.ckpt')


def manifest():
  with open(os.path.join(RELEASE, 'manifest.json')) as f:
    return json.load(f)


def trainable(model):
  return sum(int(np.prod(v.shape)) for v in model.trainable_variables)


def assert_reproduces(name, fn):
  io = np.load(os.path.join(RELEASE, f'{name}_io.npz'))
  out = np.asarray(fn(tf.constant(io['input']))).reshape(io['output'].shape)
  scale = np.abs(io['output']).max()
  assert np.abs(out - io['output']).max() <= 1e-5 * scale, name


@pytest.mark.parametrize('name', sorted(NETWORKS))
def test_release_networks_load_and_reproduce_outputs(name):
  model = NETWORKS[name]().build_for_input()
  entry = manifest()[name]
  names = sorted(v[:-len(SUFFIX)] for v in entry['variables'] if v.endswith(SUFFIX))
  assert sorted(release_import.release_variables(model)) == names
  assert trainable(model) == entry['trainable_parameters']
  release_import.load_release_weights(model, release_path(name))
  call = model if name.startswith(('hat', 'encoder')) else (lambda x: model(x, training=False))
  assert_reproduces(name, call)


def test_dense_columns_are_permuted_from_nchw():
  # The release's dense output is reshaped [-1, C, 4, 4]; ours is [-1, 4, 4, C].
  kernel = np.arange(2 * 3 * 16).reshape(2, 48)
  ours = release_import.nchw_to_nhwc_columns(kernel, 3)
  np.testing.assert_array_equal(ours.reshape(2, 4, 4, 3),
                                kernel.reshape(2, 3, 4, 4).transpose(0, 2, 3, 1))
  np.testing.assert_array_equal(release_import.nchw_to_nhwc_columns(kernel[0], 3), ours[0])


def test_missing_and_mismatched_variables_are_one_line_errors(monkeypatch):
  with pytest.raises(ValueError, match=r'hat32.ckpt has no variable block3/sc/bias \(shape \[16'):
    release_import.load_release_weights(nets.HatNetwork(64, 3, 64).build_for_input(),
                                        release_path('hat32'))
  with pytest.raises(ValueError, match=r'conv_1/conv_1/kernel has shape \[3, 3, 3, 32\]; the '
                     r"config's HatNetwork expects \[3, 3, 3, 16\]"):
    release_import.load_release_weights(nets.HatNetwork(32, 3, 16).build_for_input(),
                                        release_path('hat32'))
  # A checkpoint variable with no place in the network (here: the head, hidden from the mapping).
  full = release_import.release_variables
  monkeypatch.setattr(release_import, 'release_variables',
                      lambda model: {k: v for k, v in full(model).items() if k != 'lin_5/kernel'})
  with pytest.raises(ValueError, match=r'holds variables a HatNetwork of this config does not '
                     r'have \(lin_5/kernel\)'):
    release_import.load_release_weights(nets.HatNetwork(32, 3, 32).build_for_input(),
                                        release_path('hat32'))
  with pytest.raises(ValueError, match='cannot read a checkpoint at /nonexistent'):
    release_import.load_release_weights(nets.HatNetwork(32, 3, 32).build_for_input(),
                                        '/nonexistent/hat.ckpt')


def small(name, **model):
  config = load_config(name)
  config.model.update(dict(hat_width=32, gen_width=32, **model))
  if 'perf' in config:  # synthesis: float32 whatever this CPU ('auto' may pick bf16)
    config.perf.precision = 'float32'
  return config


@pytest.mark.parametrize('name,generator,model', [
    ('cifar10_synth', 'gen32', dict(z_dim=16)),
    ('cifar10_refine', 'gen32', dict(z_dim=16, out_factor=2.0)),
    ('cifar10_retrofit', 'decoder32', {}),
])
def test_imported_workdir_restores_the_release_networks(tmp_path, name, generator, model):
  config = small(name, **model)
  kind = 'decoder' if generator.startswith('decoder') else 'generator'
  workdir = str(tmp_path / 'run')
  release_import.import_release(config, workdir, release_path('hat32'),
                                **{kind: release_path(generator)})
  run = trained_run.load_run(workdir)
  assert run.step == config.training.num_steps
  assert run.config.experiment == config.experiment
  assert_reproduces('hat32', run.model.hat)
  assert_reproduces(generator, lambda x: run.model.generator(x, training=False))
  if config.experiment == 'joint':
    assert run.config.generator.path == os.path.abspath(os.path.join(workdir, 'generator'))
  # The same import again finds it done; another import into it is refused.
  before = sorted(os.listdir(workdir))
  release_import.import_release(config, workdir, release_path('hat32'),
                                **{kind: release_path(generator)})
  assert sorted(os.listdir(workdir)) == before
  with pytest.raises(ValueError, match='already holds a checkpoint'):
    release_import.import_release(config, workdir, release_path('hat32'),
                                  **{kind: release_path(generator)}, step=7)


def test_a_failed_joint_import_writes_nothing(tmp_path):
  config = small('cifar10_retrofit')
  with pytest.raises(ValueError, match='hat64.ckpt'):
    release_import.import_release(config, str(tmp_path / 'run'), release_path('hat64'),
                                  decoder=release_path('decoder32'))
  assert not os.path.exists(tmp_path / 'run')


class Killed(BaseException):
  """A kill at that moment (nothing after it runs)."""


@pytest.mark.parametrize('moment', ['writing the generator', 'between the two renames'])
def test_interrupted_import_leaves_no_partial_workdir_and_the_same_command_finishes(
    tmp_path, monkeypatch, moment):
  """The reproduction's import: the hat in one workdir, the SN-GAN in a sibling one."""
  config = small('cifar10_refine', z_dim=16, out_factor=2.0)
  workdir, gan = str(tmp_path / 'release_refinement'), str(tmp_path / 'sngan_release')
  args = (config, workdir, release_path('hat32'))
  kwargs = dict(generator=release_path('gen32'), generator_workdir=gan)
  write, move = release_import._write_workdir, release_import._move_in

  def killed_write(path, *a):
    write(path, *a)
    raise Killed()

  def killed_second_move(staging, target):
    if os.path.exists(workdir):
      raise Killed()
    move(staging, target)

  if moment == 'writing the generator':
    monkeypatch.setattr(release_import, '_write_workdir', killed_write)
  else:
    monkeypatch.setattr(release_import, '_move_in', killed_second_move)
  with pytest.raises(Killed):
    release_import.import_release(*args, **kwargs)
  # No partial workdir: each is absent or complete (a checkpoint), never half-written.
  assert not os.path.exists(gan)
  assert os.path.exists(workdir) == (moment == 'between the two renames')
  monkeypatch.undo()
  release_import.import_release(*args, **kwargs)
  assert sorted(os.listdir(tmp_path)) == ['release_refinement', 'sngan_release']  # no staging
  run = trained_run.load_run(workdir)
  assert run.config.generator.path == gan
  assert_reproduces('hat32', run.model.hat)
  assert_reproduces('gen32', lambda x: run.model.generator(x, training=False))


def test_command_line_error_is_one_line(tmp_path):
  result = run_command(
      'import_release.py', '--config=cifar10_synth', '--config.model.hat_width=16',
      '--config.model.gen_width=16', f'--hat={release_path("hat32")}',
      f'--generator={release_path("gen32")}', f'--workdir={tmp_path / "run"}')
  assert result.returncode == 1
  assert result.stderr.strip().splitlines()[-1] == (
      f'error: {release_path("hat32")}: conv_1/conv_1/kernel has shape [3, 3, 3, 32]; '
      "the config's HatNetwork expects [3, 3, 3, 16]")
  assert not os.path.exists(tmp_path / 'run' / 'checkpoints')


# ---- the release's Langevin chains (noise off) over the imported hat32 + gen32 ------------------
CHAINS = ('conditional_T1e-8_clip', 'conditional_T1e-6_prior_noclip', 'joint_T1e-5_prior_clip',
          'joint_T1e-8_clip', 'conditional_T1e-8_clipbinds', 'joint_T1e-8_clipbinds')


def release_settings(settings):
  """Our chain settings from the release's: tau_res = 1 / (2 sigma^2), clip = max drift."""
  common = dict(steps=settings['mcmc_steps'], step_size=settings['epsilon'],
                temperature=settings['mcmc_temp'], noise=settings['use_noise'],
                max_drift=(settings['max_langevin_norm_res']
                           if settings['clip_langevin_grad_res'] else None),
                prior_sigma=(np.sqrt(1.0 / (2.0 * settings['tau_res']))
                             if 'tau_res' in settings else None))
  if settings['update_latents']:
    return langevin.ChainSettings(latent_step_size=settings['epsilon_latent'], latent_first=True,
                                  **common)
  return langevin.ChainSettings(**common)


def run_release_chain(hat, gen, chain, change=None):
  """{state: (our final state, start, the release's)} of the release's chain `chain`, noise off;
  `change` edits our settings (benchmarks/release_chain_rounding.py's deliberate mistakes)."""
  settings = release_settings(manifest()[f'chain_{chain}']['settings'])
  settings = change(settings) if change else settings
  ref = np.load(os.path.join(RELEASE, f'chain_{chain}.npz'))
  rng = tf.random.Generator.from_seed(0)  # unused: noise is off
  if settings.joint:
    z, y, _, _ = langevin.sample_joint(hat, gen, rng, settings, z0=ref['z0'], y0=ref['y0'])
    return dict(z=(z.numpy(), ref['z0'], ref['z']), y=(y.numpy(), ref['y0'], ref['y']))
  y, _ = langevin.sample_conditional(hat, langevin.generate(gen, ref['z0']), rng, settings,
                                     y0=ref['y0'])
  return dict(y=(y.numpy(), ref['y0'], ref['y']))


def sample_errors(ours, start, theirs):
  """Per sample: max |change - release's change| in ulps of the state, and relative to
  max |release's change|."""
  axes = tuple(range(1, ours.ndim))
  expected = theirs - start
  error = np.abs(ours - start - expected).max(axis=axes)
  ulp = np.spacing(np.abs(theirs).max(axis=axes).astype(np.float32))
  scale = np.abs(expected).max(axis=axes)
  assert np.all(scale > 0)
  return error / ulp, error / scale


# The bounds are measured, not this CPU's luck. Both codes compute in float32 and round the state
# at every step, so two correct chains end a few ulps of the state apart. At T = 1e-8 (1e-6) the
# energy's gradient is scaled by 1/T, and a rounding difference can flip a ReLU of H for one
# sample, which then ends up thousands of ulps away (up to 2.3e-2 of its change) while the others
# still agree. benchmarks/release_chain_rounding.py ran every chain with equally valid float32
# evaluations (oneDNN at AVX512_CORE_BF16 / AVX512_CORE / AVX2 / SSE4.1, Eigen, and 12 roundings
# of the weights by up to 1 ulp): half the samples stayed within 6.5 ulps, every sample within
# 2.3e-2 of its change. The bounds are 4x those. They still fail each of: Y step before Z step,
# prior left out (95 ulps), T 1% off, one step short (the benchmark checks it).
HALF_WITHIN_ULPS = 26  # half the samples (the other half may have flipped a ReLU)
EVERY_WITHIN = 0.1  # of the sample's change


def outside_bounds(ulps, relative):
  """Whether the per-sample errors of a chain's state break the bounds."""
  return (np.sort(ulps)[(len(ulps) - 1) // 2] > HALF_WITHIN_ULPS
          or np.max(relative) > EVERY_WITHIN)


@pytest.mark.parametrize('chain', CHAINS)
def test_release_chains_are_reproduced(chain):
  hat = release_import.load_release_weights(NETWORKS['hat32']().build_for_input(),
                                            release_path('hat32'))
  gen = release_import.load_release_weights(NETWORKS['gen32']().build_for_input(),
                                            release_path('gen32'))
  settings = release_settings(manifest()[f'chain_{chain}']['settings'])
  ref = np.load(os.path.join(RELEASE, f'chain_{chain}.npz'))
  for state, (ours, start, theirs) in run_release_chain(hat, gen, chain).items():
    ulps, relative = sample_errors(ours, start, theirs)
    assert not outside_bounds(ulps, relative), (state, ulps, relative)
  if chain.endswith('clipbinds'):
    # The clip acts at every step of every sample: each residual moves by under K x max_drift.
    moved = np.sqrt(np.sum(np.square(ref['y'] - ref['y0']), axis=(1, 2, 3)))
    assert np.all(moved <= settings.steps * settings.max_drift + 1e-4), moved
    assert np.all(moved > 0.9 * settings.steps * settings.max_drift), moved
