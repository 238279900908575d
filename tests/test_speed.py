"""Fast paths compute what the plain path computes; mixed precision keeps states float32;
the FLOP counter agrees with a hand count."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import flops
from tf_hat_ebm import langevin
from tf_hat_ebm import nets
from tf_hat_ebm import perf
from tf_hat_ebm.keras_compat import keras
from tf_hat_ebm.tasks.synthesis import SynthesisTask
from tf_hat_ebm.trainer import Trainer

from conftest import REPO
from conftest import copy_of, tiny


def test_flop_counter_matches_hand_count_for_one_block():
  block = nets.DiscriminatorBlock(8, downsample=True)
  x_shape = [2, 8, 8, 4]
  block.build(x_shape)
  # Conv2D: 2 * H * W * k * k * cin * cout per image (multiply-adds), plus bias adds; the hidden
  # conv has the out channels (8), as the release's block. Then the residual sum at 4x4x8.
  convs = 2 * 2 * 8 * 8 * (9 * 4 * 8 + 9 * 8 * 8 + 4 * 8)
  bias = 2 * 8 * 8 * (8 + 8 + 8)
  pools = 2 * 4 * 4 * 8 * 4 * 2  # two 2x2 average pools (4 ops per output)
  residual = 2 * 4 * 4 * 8
  relu_in = 2 * 8 * 8 * 4  # the input's ReLU, max(x, 0): one op per value (nets.py says why)
  assert convs + bias + pools + residual + relu_in == 235_264
  assert flops.forward_flops(block, x_shape) == 235_264


# Forward FLOPs per image of the tiny digits networks (widths 8, z_dim 4), as tf.profiler counts
# them in TF 2.15: a change of the networks or of the counter shows here.
HAT_16_8, GEN_16_8 = 573_968, 827_016


def test_flop_counts_of_the_tiny_networks_are_pinned():
  hat = nets.HatNetwork(16, 1, 8).build_for_input()
  gen = nets.Generator(16, 1, 8, 4, out_factor=2.0).build_for_input()
  assert flops.forward_flops(hat, [1, 16, 16, 1]) == HAT_16_8
  assert flops.forward_flops(hat, [2, 16, 16, 1]) == 2 * HAT_16_8
  assert flops.forward_flops(gen, [1, 4]) == GEN_16_8


def test_step_and_sampler_flops_are_the_hand_counts():
  # h=10, g=100, batch 2, K=3: chain 2*3*2*10 = 120, EBM update 6*2*10 = 120, generator
  # 4*2*100 = 800; recomputing G in the chain adds 3*2*100 = 600.
  assert flops.synthesis_step_flops(10, 100, batch=2, steps=3) == 1040
  assert flops.synthesis_step_flops(10, 100, 2, 3, recompute_generator=True) == 1640
  # chain 3*2*(2*10) = 120 plus one G(Z) 2*100 = 200; recomputing adds 3*2*100 = 600.
  assert flops.sampler_flops(10, 100, batch=2, steps=3) == 320
  assert flops.sampler_flops(10, 100, 2, 3, recompute_generator=True) == 920
  # the tiny networks at batch 4, K=2: 16*h + 24*h + 16*g
  assert flops.synthesis_step_flops(HAT_16_8, GEN_16_8, batch=4, steps=2) == 36_190_976


def test_joint_step_and_sampler_flops_are_the_hand_counts():
  # h=10, g=100, batch 2, K=3. Per image: G(Z0) and G(Z_K) 2*100 = 200; each iteration G 100,
  # Y step 2*10, Z step 2*10 + 100 = 240, without the residual 220. The release's order adds one
  # G forward (100); the EBM update adds 6*2*10 = 120 to a step.
  assert flops.joint_sampler_flops(10, 100, batch=2, steps=3) == 1840
  assert flops.joint_sampler_flops(10, 100, 2, 3, latent_first=True) == 2040
  assert flops.joint_sampler_flops(10, 100, 2, 3, use_residual=False) == 1720
  assert flops.joint_sampler_flops(10, 100, 2, 3, latent_first=True, use_residual=False) == 1920
  assert flops.joint_step_flops(10, 100, batch=2, steps=3) == 1960
  assert flops.joint_step_flops(10, 100, 2, 3, latent_first=True) == 2160
  assert flops.joint_step_flops(10, 100, 2, 3, use_residual=False) == 1840
  assert flops.joint_step_flops(10, 100, 2, 3, latent_first=True, use_residual=False) == 2040
  # K = 0 is G(Z0) and G(Z_K) in either order.
  assert flops.joint_sampler_flops(10, 100, 2, 0, latent_first=True) == 400
  # the tiny networks at batch 4, K=2, paper order: 4 (2g + 2 (2g + 4h)) + 6 * 4 h = 24g + 56h
  assert flops.joint_step_flops(HAT_16_8, GEN_16_8, batch=4, steps=2) == 51_990_592


class _Counted(tf.Module):
  """A linear network whose forward and backward passes add the batch size to counts[key]."""

  def __init__(self, in_shape, out_shape, counts, key, energy=False):
    super().__init__()
    size = int(np.prod(in_shape))
    self.latent_shape, self.out_shape, self.energy = tuple(in_shape), tuple(out_shape), energy
    self.w = tf.random.stateless_normal([size, 1 if energy else int(np.prod(out_shape))],
                                        [3, 4]) / size
    self.counts, self.key = counts, key

  def _forward(self, x):
    out = tf.reshape(x, [tf.shape(x)[0], -1]) @ self.w
    return out[:, 0] if self.energy else tf.reshape(out, [-1, *self.out_shape])

  def __call__(self, x, training=False):
    del training

    @tf.custom_gradient
    def counted(x):
      self.counts[self.key] += int(x.shape[0])

      def grad(dy):
        self.counts[self.key] += int(x.shape[0])
        with tf.GradientTape() as tape:
          tape.watch(x)
          out = self._forward(x)
        return tape.gradient(out, x, output_gradients=dy)

      return self._forward(x), grad

    return counted(x)


@pytest.mark.parametrize('latent_first', [False, True])
@pytest.mark.parametrize('use_residual', [True, False])
@pytest.mark.parametrize('steps', [0, 3])
def test_joint_flops_count_the_passes_the_joint_chain_makes(latent_first, use_residual, steps):
  # Run eagerly, sample_joint's loop body runs once per iteration and each H and G pass
  # (forward or backward) is counted per image: the counts are the formula at h = 1, g = 0 and
  # h = 0, g = 1.
  counts = dict(h=0, g=0)
  hat = _Counted((4, 4, 1), (), counts, 'h', energy=True)
  gen = _Counted((3,), (4, 4, 1), counts, 'g')
  settings = langevin.ChainSettings(steps=steps, step_size=1e-2, latent_step_size=1e-2,
                                    temperature=1.0, latent_first=latent_first,
                                    use_residual=use_residual)
  langevin.sample_joint(hat, gen, tf.random.Generator.from_seed(0), settings, batch_size=2)
  options = dict(latent_first=latent_first, use_residual=use_residual)
  assert counts == dict(h=flops.joint_sampler_flops(1, 0, 2, steps, **options),
                        g=flops.joint_sampler_flops(0, 1, 2, steps, **options))


def test_g_once_per_chain_equals_recomputing_it_every_step():
  hat = nets.HatNetwork(16, 1, 8).build_for_input()
  gen = nets.Generator(16, 1, 8, 4, out_factor=2.0).build_for_input()
  z = tf.random.stateless_normal([3, 4], [1, 2])
  settings = langevin.ChainSettings(steps=4, step_size=5e-3, temperature=1e-2, max_drift=0.5)
  y_fast, d_fast = langevin.sample_conditional(hat, gen(z), tf.random.Generator.from_seed(5),
                                               settings)
  y_plain, d_plain = langevin.sample_conditional(hat, gen(z), tf.random.Generator.from_seed(5),
                                                 settings, generator_fn=lambda: gen(z))
  np.testing.assert_allclose(y_fast.numpy(), y_plain.numpy(), rtol=1e-6, atol=1e-7)
  np.testing.assert_allclose(d_fast['residual_grad_norm'].numpy(),
                             d_plain['residual_grad_norm'].numpy(), rtol=1e-5)


def test_training_fast_and_plain_paths_agree(trained_workdir, tmp_path):
  strategy = tf.distribute.get_strategy()
  results = []
  # The fast path is tiny()'s default: trained_workdir is its 2 steps, restored from a copy.
  assert not tiny().perf.recompute_generator
  for recompute in (False, True):
    config = tiny(**{'perf.recompute_generator': recompute})
    task = SynthesisTask(config, strategy)
    if recompute:
      Trainer(task, config, str(tmp_path / 'plain'), strategy, verbose=False).train(2)
    else:
      trainer = Trainer(task, config, str(copy_of(trained_workdir, tmp_path)), strategy,
                        verbose=False)
      assert trainer.restore_or_initialize() and int(trainer.step.numpy()) == 2
    results.append([v.numpy() for v in task.hat.trainable_variables] + [task.bank.x.numpy()])
  for a, b in zip(*results):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_mixed_precision_keeps_states_energies_and_bank_float32():
  # Its training in mixed_bfloat16 (finite metrics, the bank float32) is the second run of
  # test_precision's test_every_run_says_and_records_its_precision_and_time: one training less.
  strategy = tf.distribute.get_strategy()
  config = tiny(**{'perf.precision': 'mixed_bfloat16'})
  task = SynthesisTask(config, strategy)
  assert keras.mixed_precision.global_policy().name == 'float32'  # not leaked
  assert task.hat.blocks[0].c1.compute_dtype == 'bfloat16'
  assert all(v.dtype == tf.float32 for v in task.hat.variables + task.generator.variables)
  z = tf.random.normal([2, config.model.z_dim])
  g_z = task.generator(z)
  assert g_z.dtype == tf.float32 and task.hat(g_z).dtype == tf.float32
  y, diag = langevin.sample_conditional(task.hat, g_z, task.rng, task.settings)
  assert y.dtype == tf.float32 and diag['residual_grad_norm'].dtype == tf.float32
  assert task.bank.z.dtype == tf.float32 and task.bank.x.dtype == tf.float32


def _step_time(tmp_path, *args):
  """benchmarks/step_time.py's JSON for a batch of 4 and K = 2, run in a subprocess."""
  out = tmp_path / 'step_time.json'
  env = dict(os.environ, PYTHONPATH=REPO)
  proc = subprocess.run(
      [sys.executable, os.path.join(REPO, 'benchmarks', 'step_time.py'), '--batch=4',
       '--langevin_steps=2', '--repeats=1', '--matmul_size=64', f'--json={out}', *args],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(out.read_text()), proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize('config, args, formula', [
    ('digits_synth', ['--variants=fast'], flops.synthesis_step_flops),
    ('digits_retrofit', ['--untrained_generator', '--variants=fast'], flops.joint_step_flops),
])
def test_step_time_times_each_kind_with_its_formula(tmp_path, config, args, formula):
  result, stdout = _step_time(
      tmp_path, f'--config={os.path.join(REPO, "experiments", "configs", config + ".py")}',
      '--config.model.hat_width=8', '--config.model.gen_width=8', *args)
  assert [r['variant'] for r in result['rows']] == ['fast']
  h, g = result['hat_forward_flops_per_image'], result['generator_forward_flops_per_image']
  assert result['rows'][0]['needed_gflop_per_step'] * 1e9 == pytest.approx(formula(h, g, 4, 2))
  assert result['rows'][0]['s_per_step'] > 0
  if formula is flops.joint_step_flops:
    assert result['experiment'] == 'joint'


@pytest.mark.slow  # XLA compiles the step for about 30 s on 2 loaded cores
def test_xla_step_computes_the_energies_the_plain_step_computes(tmp_path):
  # XLA draws other random numbers than TensorFlow's kernels (its own mapping of Philox to
  # normals), so the chains differ; without data noise the positive energies of the first step
  # are the same network on the same data, and every metric is finite.
  strategy = tf.distribute.get_strategy()
  metrics = {}
  for setting in ('off', 'on'):
    config = tiny(**{'perf.jit_compile': setting, 'training.data_eps': 0.0})
    task = SynthesisTask(config, strategy)
    trainer = Trainer(task, config, str(tmp_path / setting), strategy, verbose=False)
    assert trainer.jit_compile == (setting == 'on')
    metrics[setting] = trainer.train(1)
  assert all(np.isfinite(v) for v in metrics['on'].values())
  np.testing.assert_allclose(metrics['on']['energy_pos'], metrics['off']['energy_pos'],
                             rtol=1e-5)
  assert metrics['on']['energy_neg'] != metrics['off']['energy_neg']  # other noise


def test_jit_compile_auto_is_off_on_cpus_and_tpus_and_on_for_small_networks_on_a_gpu():
  small = dict(precision='float32', replicas=1, image_size=16, hat_width=32)
  assert perf.choose_jit_compile('auto', 'CPU', **small)[0] is False
  assert perf.choose_jit_compile('auto', 'TPU', **small)[0] is False
  assert perf.choose_jit_compile('auto', 'GPU', **small)[0] is True
  assert perf.choose_jit_compile('auto', 'GPU', **dict(small, hat_width=256))[0] is False
  assert perf.choose_jit_compile('auto', 'GPU', **dict(small, replicas=2))[0] is False
  assert perf.choose_jit_compile('on', 'CPU', **small)[0] is True
  assert perf.choose_jit_compile('off', 'GPU', **small)[0] is False
  with pytest.raises(ValueError, match='does not compile on a CPU'):
    perf.choose_jit_compile('on', 'CPU', **dict(small, precision='mixed_bfloat16'))
  with pytest.raises(ValueError, match='must be one of'):
    perf.choose_jit_compile(True, 'CPU', **small)


@pytest.mark.slow
def test_step_time_holds_each_variant_against_the_rate_of_its_own_precision(tmp_path):
  # `default` runs in whatever the config's precision resolves to: here bf16, so its row is
  # against the bf16 matmul rate, `fast`'s against float32's.
  result, _ = _step_time(
      tmp_path, f'--config={os.path.join(REPO, "experiments", "configs", "digits_synth.py")}',
      '--config.model.hat_width=8', '--config.model.gen_width=8',
      '--config.perf.precision=mixed_bfloat16', '--variants=default,fast')
  rows = {r['variant']: r for r in result['rows']}
  assert (rows['default']['peak_dtype'], rows['fast']['peak_dtype']) == ('bfloat16', 'float32')
  for row in rows.values():
    rate = result['matmul_gflops'][row['peak_dtype']]
    assert row['fraction_of_matmul_rate'] == pytest.approx(
        row['needed_gflop_per_step'] / row['s_per_step'] / rate)
