"""perf.precision='auto' follows the hardware (facts injected); runs say and record what they use
and how their wall time splits into training steps and the rest."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import generators
from tf_hat_ebm import nets
from tf_hat_ebm import run_record
from tf_hat_ebm.tasks.joint import JointTask
from tf_hat_ebm.tasks.synthesis import SynthesisTask
from tf_hat_ebm.trainer import Trainer
from tpu_utils import hardware

from conftest import REPO, tiny

# Trimmed /proc/cpuinfo texts of real machines.
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8
"""
ZEN4 = """processor\t: 0
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx avx2 avx512f avx512bw avx512_bf16 avx512_vnni
"""
ZEN3 = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma bmi2 vaes
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd sve bf16 i8mm
"""


@pytest.mark.parametrize('text, expected, reason', [
    (SAPPHIRE_RAPIDS, 'mixed_bfloat16', 'CPU with native bf16 (amx_bf16, avx512_bf16)'),
    (ZEN4, 'mixed_bfloat16', 'CPU with native bf16 (avx512_bf16)'),
    (ZEN3, 'float32', 'CPU without native bf16 (neither amx_bf16 nor avx512_bf16)'),
    (GRAVITON3, 'float32', 'CPU without native bf16 (neither amx_bf16 nor avx512_bf16)'),
    ('', 'float32', 'CPU without native bf16 (neither amx_bf16 nor avx512_bf16)'),
], ids=['sapphire_rapids', 'zen4', 'zen3', 'graviton3', 'no_cpuinfo'])
def test_cpu_rule_reads_the_bf16_flags(text, expected, reason):
  facts = dict(platform='CPU', cpu_flags=hardware.cpu_flags(text), gpu_capabilities=())
  assert hardware.choose_precision(**facts) == (expected, reason)
  assert nets.resolve_precision('auto', facts=facts) == (expected, f'auto: {reason}')


@pytest.mark.parametrize('caps, expected', [
    (((8, 0),), 'mixed_bfloat16'), (((9, 0), (8, 6)), 'mixed_bfloat16'),
    (((7, 5),), 'float32'), (((8, 6), (7, 0)), 'float32'), ((), 'float32')])
def test_gpu_rule_needs_compute_capability_8_on_every_gpu(caps, expected):
  # The CPU flags do not matter once the replicas run on GPUs.
  precision, reason = hardware.choose_precision('GPU', hardware.cpu_flags(SAPPHIRE_RAPIDS), caps)
  assert precision == expected
  assert reason.startswith('GPU with native bf16' if expected != 'float32' else
                           'GPU without native bf16')
  assert (', '.join(f'{a}.{b}' for a, b in caps) or 'unknown') in reason


def test_tpu_is_bf16_whatever_the_host_cpu():
  assert hardware.choose_precision('TPU', hardware.cpu_flags(ZEN3)) == (
      'mixed_bfloat16', 'TPU (native bf16)')


def test_explicit_precision_is_kept():
  for precision in nets.PRECISIONS:
    assert nets.resolve_precision(precision) == (precision, 'set by perf.precision')


def test_detect_on_this_machine(two_replicas):
  assert hardware.compute_platform(tf.distribute.get_strategy()) == 'CPU'  # no GPU here
  assert hardware.compute_platform(two_replicas) == 'CPU'
  facts = hardware.detect(two_replicas, cpuinfo_text=ZEN4)
  assert facts == dict(platform='CPU', cpu_flags=hardware.cpu_flags(ZEN4), gpu_capabilities=())
  native = bool({'amx_bf16', 'avx512_bf16'} & hardware.cpu_flags(hardware.read_cpuinfo()))
  assert nets.resolve_precision('auto')[0] == ('mixed_bfloat16' if native else 'float32')


def test_every_run_says_and_records_its_precision_and_time(tmp_path, capsys, monkeypatch):
  """Two runs of one workdir: 'auto' on a CPU without bf16 (float32), then an explicit
  mixed_bfloat16 that wins over the hardware; each prints and records its own entry."""
  monkeypatch.setattr(hardware, 'read_cpuinfo', lambda: ZEN3)
  strategy = tf.distribute.get_strategy()
  reason = 'auto: ' + hardware.choose_precision('CPU', hardware.cpu_flags(ZEN3))[1]
  for steps, precision, expected, why in ((2, 'auto', 'float32', reason),
                                          (4, 'mixed_bfloat16', 'mixed_bfloat16',
                                           'set by perf.precision')):
    config = tiny(**{'perf.precision': precision})
    task = SynthesisTask(config, strategy)
    assert task.hat.blocks[0].c1.compute_dtype == expected.replace('mixed_', '')
    metrics = Trainer(task, config, str(tmp_path), strategy).train(steps)
    # The states, energies and bank stay float32 in a mixed_bfloat16 run (test_speed's dtypes).
    assert metrics and all(np.isfinite(v) for v in metrics.values())
    assert task.bank.z.dtype == tf.float32 and task.bank.x.dtype == tf.float32
    out = capsys.readouterr().out
    assert f'precision: {expected} ({why})' in out
    assert 'wall time ' in out and 'training steps ' in out
  runs = json.loads((tmp_path / 'run_info.json').read_text())['runs']
  assert [(r['platform'], r['start_step'], r['end_step'], r['steps'], r['precision'],
           r['precision_reason']) for r in runs] == [
      ('CPU', 0, 2, 2, 'float32', reason), ('CPU', 2, 4, 2, 'mixed_bfloat16',
                                            'set by perf.precision')]
  for run in runs:
    assert 0 < run['step_s'] <= run['wall_s'] and run['step_fraction'] == pytest.approx(
        run['step_s'] / run['wall_s'], abs=1e-3)


def test_joint_chains_follow_the_same_rule_and_record_it(tmp_path, capsys, monkeypatch):
  # Refinement and retrofit: H, the frozen G (and DDLS's D) all compute in the chosen precision.
  strategy = tf.distribute.get_strategy()
  monkeypatch.setattr(hardware, 'read_cpuinfo', lambda: ZEN3)
  for experiment in ('digits_refine', 'digits_retrofit'):
    config = tiny(experiment, **{'perf.precision': 'auto'})
    task = JointTask(config, strategy, generator=generators.untrained(config))
    assert (task.precision, task.hat.compute_dtype) == ('float32', 'float32')
  monkeypatch.setattr(hardware, 'read_cpuinfo', lambda: SAPPHIRE_RAPIDS)
  config = tiny('digits_retrofit', **{'perf.precision': 'auto'})
  precision, reason = nets.resolve_precision('auto')
  generator = generators.untrained(config, precision)
  task = JointTask(config, strategy, generator=generator)
  assert (precision, task.precision, task.precision_reason) == (
      'mixed_bfloat16', precision, reason)
  assert task.hat.compute_dtype == generator.model.compute_dtype == 'bfloat16'
  assert generator(tf.zeros([2, *generator.latent_shape])).dtype == tf.float32
  Trainer(task, config, str(tmp_path), strategy).train(2)
  assert f'precision: mixed_bfloat16 ({reason})' in capsys.readouterr().out
  run = json.loads((tmp_path / 'run_info.json').read_text())['runs'][0]
  assert (run['precision'], run['precision_reason']) == ('mixed_bfloat16', reason)
  # An explicit float32 wins over the hardware.
  config = tiny('digits_refine', **{'perf.precision': 'float32'})
  assert JointTask(config, strategy, generator=generators.untrained(config)).precision == 'float32'


def test_a_generator_in_its_own_precision_is_named(monkeypatch):
  # A SavedModel keeps the dtype it was saved in: the reason says so when it differs.
  config = tiny('digits_refine', **{'perf.precision': 'mixed_bfloat16'})
  task = JointTask(config, tf.distribute.get_strategy(), generator=generators.untrained(config))
  assert task.hat.compute_dtype == 'bfloat16'
  assert task.precision_reason == ('set by perf.precision; the frozen generator computes in '
                                   'float32 (its own precision)')


def test_unreadable_run_record_is_a_clear_error_and_kept(tmp_path):
  (tmp_path / 'run_info.json').write_text('{not json')
  strategy = tf.distribute.get_strategy()
  config = tiny()
  with pytest.raises(ValueError, match='run_info.json is not a run record'):
    Trainer(SynthesisTask(config, strategy), config, str(tmp_path), strategy,
            verbose=False).train(2)
  assert (tmp_path / 'run_info.json').read_text() == '{not json'


def test_step_split_counts_the_first_calls_extra_time_outside():
  # First call: 10 steps + 3 s of tracing; then 0.1 s per step.
  assert run_record.step_split([(4.0, 10), (1.0, 10), (2.0, 20)]) == pytest.approx((4.0, 3.0))
  assert run_record.step_split([(4.0, 10)]) == (4.0, 0.0)
  assert run_record.step_split([]) == (0.0, 0.0)
  run = run_record.RunRecord('/nonexistent', write=False, log=lambda _: None)
  run.process_start, run.train_start = 100.0, 105.0
  run.chunks = [(4.0, 10), (1.0, 10), (2.0, 20)]
  s = run.summary(now=110.0)
  assert (s['wall_s'], s['wall_from'], s['train_wall_s'], s['steps']) == (10.0, 'process', 5.0, 40)
  assert s['step_fraction'] == pytest.approx(0.4) and s['ms_per_step'] == pytest.approx(100.0)
  line = run_record.summary_line(s)
  assert line.startswith('wall time 10.0 s (since the process started); training steps 4.0 s = '
                         '40.0% (40 steps, 100.0 ms each)')


@pytest.mark.slow
def test_script_runs_in_the_precision_of_this_cpu_and_says_so(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  result = subprocess.run(
      [sys.executable, os.path.join(REPO, 'experiments', 'train_synthesis.py'),
       f'--workdir={tmp_path}', '--config.training.num_steps=2', '--config.model.hat_width=8',
       '--config.model.gen_width=8', '--config.training.bank_size=64',
       '--config.training.num_grid_samples=4'],
      capture_output=True, text=True, env=env, timeout=300)
  assert result.returncode == 0, result.stderr
  expected = hardware.resolve_precision('auto', tf.distribute.get_strategy())
  assert f'precision: {expected[0]} ({expected[1]})' in result.stdout
  assert 'wall time ' in result.stdout and '(2 steps, ' in result.stdout
  run = json.loads((tmp_path / 'run_info.json').read_text())['runs'][0]
  assert run['precision'] == expected[0] and run['end_step'] == 2


@pytest.mark.slow
def test_a_synthesis_run_imports_no_other_experiments_libraries():
  # TF-GAN and TF Probability (SN-GAN's) cost seconds of start-up a synthesis run does not need.
  code = ('import sys; from tf_hat_ebm import trainer, registry; '
          'cls = registry.get("synthesis").task_class(); '
          'print(cls.__name__, sorted(m for m in ("tensorflow_gan", "tensorflow_probability") '
          'if m in sys.modules))')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'), cwd=REPO, timeout=300)
  assert result.stdout.split() == ['SynthesisTask', '[]'], result.stderr
