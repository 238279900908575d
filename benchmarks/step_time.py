r"""Speed harness: training-step and sampler time, FLOPs and the machine's matmul rate, one run.

Any Hat EBM config (synthesis or joint, by config.experiment through the registry):
  python benchmarks/step_time.py --config=experiments/configs/cifar10_synth.py --batch=16 \
      --langevin_steps=50 --variants=release,fast,bf16 --json=/tmp/step_time.json
  python benchmarks/step_time.py --config=experiments/configs/cifar10_refine.py \
      --config.generator.source=factory --config.generator.path=factories:cifar10_sngan_generator \
      --config.generator.latent_shape='(128,)'
  python benchmarks/step_time.py --config=experiments/configs/digits_retrofit.py \
      --untrained_generator

Variants (each a set of config.perf options, measured in the same process, same data, their
repeats interleaved so that a load from other processes hits every variant alike):
  baseline the settings before perf.jit_compile: precision 'auto', no XLA
  default  the config as it is (today's defaults: perf.jit_compile 'auto' too)
  release  G(Z) recomputed in every Langevin step (the authors' release), float32   (synthesis)
  fast     G(Z) once per chain, float32
  bf16     fast + mixed_bfloat16 (states, energies, losses, bank float32)
  xla      fast + XLA-compiled Langevin chain (perf.jit_sampler)                   (synthesis)
  xla_step fast + XLA for the whole training step (perf.jit_compile='on')
Each row's "of peak" divides by the matmul rate of the precision the variant ran in (baseline and
default: the one 'auto' chose), measured in the same run. "cpu s" is the process's CPU time per
step (all threads): on a loaded machine it moves less than the wall time.
Joint configs' generator comes from config.generator, or with --untrained_generator is the
config's generator (or decoder) with fresh weights: the same work, no trained run needed.
Input is a fixed random batch (no dataset needed), so only the model's work is timed.
"""
import copy
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_hat_ebm import flops  # noqa: E402
from tf_hat_ebm import generators  # noqa: E402
from tf_hat_ebm import langevin  # noqa: E402
from tf_hat_ebm import nets  # noqa: E402
from tf_hat_ebm import registry  # noqa: E402
from tf_hat_ebm.evaluation import compare  # noqa: E402
from tf_hat_ebm.tasks import base  # noqa: E402
from tf_hat_ebm.trainer import Trainer  # noqa: E402
import tpu_utils  # noqa: E402

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config_flags.DEFINE_config_file(
    'config', os.path.join(_ROOT, 'experiments', 'configs', 'cifar10_synth.py'),
    'Experiment config.', lock_config=True)
flags.DEFINE_integer('batch', 16, 'Global batch size.')
flags.DEFINE_integer('langevin_steps', 50, 'Langevin steps K per training step.')
flags.DEFINE_list('variants', ['baseline', 'default'],
                  "Variants to time (those of the config's kind).")
flags.DEFINE_boolean('untrained_generator', False,
                     "Joint configs: the config's generator (or decoder) with fresh weights "
                     'instead of loading config.generator.')
flags.DEFINE_integer('repeats', 3, 'Measurements per variant (after one warm-up).')
flags.DEFINE_integer('steps_per_measure', 1, 'Training steps per measurement (one host call).')
flags.DEFINE_integer('matmul_size', 2048, 'Square matmul size for the reference rate.')
flags.DEFINE_string('json', None, 'Also write the results here.')
flags.DEFINE_string('tpu', None, 'TPU name or "local".')
FLAGS = flags.FLAGS

_PLAIN = dict(recompute_generator=False, jit_sampler=False, jit_compile='off')
VARIANTS = {  # perf options; a kind's config keeps those it has
    'baseline': dict(_PLAIN, precision='auto'),
    'default': {},
    'release': dict(_PLAIN, recompute_generator=True, precision='float32'),
    'fast': dict(_PLAIN, precision='float32'),
    'bf16': dict(_PLAIN, precision='mixed_bfloat16'),
    'xla': dict(_PLAIN, precision='float32', jit_sampler=True),
    'xla_step': dict(_PLAIN, precision='float32', jit_compile='on'),
}
# The matmul rate a Keras policy's step is held against.
PEAK_DTYPE = {'float32': 'float32', 'mixed_bfloat16': 'bfloat16', 'mixed_float16': 'float16'}


def matmul_rate(dtype, n, repeats=5):
  """GFLOP/s of an n x n matmul in dtype on the default device."""
  a = tf.cast(tf.random.normal([n, n]), dtype)
  fn = tf.function(lambda a: tf.reduce_sum(tf.cast(tf.matmul(a, a), tf.float32)))
  fn(a).numpy()
  start = time.perf_counter()
  for _ in range(repeats):
    fn(a).numpy()
  return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def first_call(fn):
  """Seconds of fn's first call: tracing, compiling (XLA) and one run; then one more untimed
  call (oneDNN builds some kernels on the second)."""
  start = time.perf_counter()
  fn()
  seconds = time.perf_counter() - start
  fn()
  return seconds


def interleaved(fns, repeats):
  """{name: [(wall s, CPU s)] * repeats}: each repeat times every fn once, in turn."""
  times = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      wall, cpu = time.perf_counter(), time.process_time()
      fn()
      times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
  return times


def variants_of(config):
  """The variants that apply to the config: those whose every option turned on (release's
  recompute_generator, xla's jit_sampler) is a field of its config.perf; a joint run has neither."""
  return tuple(name for name, options in VARIANTS.items()
               if all(k in config.perf for k, v in options.items() if v is True))


def variants_to_time(config):
  """The variant names to time: --variants, of those that apply to the config."""
  known = variants_of(config)
  if not FLAGS['variants'].present:
    return [v for v in FLAGS.variants if v in known] or list(known)
  unknown = set(FLAGS.variants) - set(known)
  if unknown:
    raise app.UsageError(f'{config.name}: unknown variants {sorted(unknown)}; known for its kind: '
                         f'{", ".join(known)}')
  return list(FLAGS.variants)


def check_config(config):
  """Fails before any measurement unless the config is a Hat EBM's and the flags fit its kind."""
  if not issubclass(registry.for_config(config).task_class(), base.HatTask):
    raise app.UsageError(f'{config.experiment} is not a Hat EBM task: step_time.py times the '
                         'Langevin chain of synthesis and joint configs')
  if FLAGS.untrained_generator and not compare.has_baselines(registry.for_config(config)):
    raise app.UsageError('--untrained_generator is for joint configs (a synthesis generator '
                         'always starts untrained)')


def make_task(config, strategy):
  """The config's task through the registry; a joint one over a fresh generator, built in the
  config's precision, if asked."""
  kind = registry.for_config(config)
  if not FLAGS.untrained_generator:
    try:
      return kind.make_task(config, strategy)
    except FileNotFoundError as e:  # a joint config's generator run that is not here
      raise app.UsageError(f'{e}; or time the task over a fresh generator with '
                           '--untrained_generator') from e
  with strategy.scope():
    generator = generators.untrained(config, nets.resolve_precision(config.perf.precision)[0])
  return kind.make_task(config, strategy, generator=generator)


def prepare_variant(base_config, name, strategy, steps_per_measure, count_flops):
  """The variant's task, its training loop and chain as warmed-up callables, and its FLOPs."""
  config = copy.deepcopy(base_config)
  config.unlock()
  config.perf.update({k: v for k, v in VARIANTS[name].items() if k in config.perf})
  if 'bank_size' in config.training:
    config.training.bank_size = max(config.training.batch_size * 2, 256)
  task = make_task(config, strategy)
  workdir = tempfile.mkdtemp()
  trainer = Trainer(task, config, workdir, strategy, verbose=False)
  shutil.rmtree(workdir, ignore_errors=True)
  task.initialize()
  shape = (config.data.image_size, config.data.image_size, config.data.channels)
  batch = tf.random.uniform([config.training.batch_size, *shape], -1, 1, seed=0)
  dataset = strategy.distribute_datasets_from_function(
      lambda ctx: tf.data.Dataset.from_tensors(
          batch[:ctx.get_per_replica_batch_size(config.training.batch_size)]).repeat())
  iterator = iter(dataset)
  loop = trainer.make_train_loop()
  n = tf.constant(steps_per_measure)
  per_replica = config.training.batch_size // strategy.num_replicas_in_sync

  @tf.function
  def sample():  # the training chain from fresh latents, G(Z0) included
    def replica():
      _, y, g_z, _ = task.chain(task.rng, per_replica, task.settings)
      return g_z + y
    return strategy.run(replica)

  fns = dict(step=lambda: {k: v.numpy() for k, v in loop(iterator, n).items()},
             sampler=lambda: strategy.experimental_local_results(sample())[0].numpy())
  first = {k: first_call(fn) for k, fn in fns.items()}
  h = flops.forward_flops(task.hat, [1, *shape]) if count_flops else None
  g = flops.forward_flops(task.generator, [1, *task.generator.latent_shape]) if h else None
  return dict(variant=name, fns=fns, first_call_s=first['step'], precision=task.precision,
              jit_compile=trainer.jit_compile, hat_flops=h, gen_flops=g)


def measure_variants(prepared, repeats, steps_per_measure):
  """Times every variant's step and chain, `repeats` rounds of all of them in turn."""
  fns = {(r['variant'], k): fn for r in prepared for k, fn in r['fns'].items()}
  times = interleaved(fns, repeats)
  results = []
  for r in prepared:
    step, sampler = times[(r['variant'], 'step')], times[(r['variant'], 'sampler')]
    results.append(dict(
        {k: v for k, v in r.items() if k != 'fns'},
        step_times=[wall / steps_per_measure for wall, _ in step],
        step_cpu_times=[cpu / steps_per_measure for _, cpu in step],
        sampler_times=[wall for wall, _ in sampler]))
  return results


def main(argv):
  del argv
  base_config = FLAGS.config
  check_config(base_config)
  base_config.unlock()
  base_config.training.batch_size = FLAGS.batch
  base_config.langevin.steps = FLAGS.langevin_steps
  kind = registry.for_config(base_config).name
  variants = variants_to_time(base_config)
  strategy = tpu_utils.make_strategy(FLAGS.tpu)
  # FLOPs are counted on float32 networks when a variant has them.
  counted = next((v for v in variants if VARIANTS[v].get('precision') == 'float32'), variants[0])
  prepared = [prepare_variant(base_config, v, strategy, FLAGS.steps_per_measure,
                              count_flops=(v == counted))
              for v in variants]
  results = measure_variants(prepared, FLAGS.repeats, FLAGS.steps_per_measure)
  # The matmul rate of each precision a variant ran in (emulated bf16 is slow: only if used).
  rates = {d: matmul_rate(getattr(tf, d), FLAGS.matmul_size)
           for d in sorted({PEAK_DTYPE[r['precision']] for r in results} | {'float32'})}
  h = next(r['hat_flops'] for r in results if r['hat_flops'])
  g = next(r['gen_flops'] for r in results if r['gen_flops'])
  formula = flops.step_flops(registry.for_config(base_config), base_config, h, g, FLAGS.batch,
                             FLAGS.langevin_steps)
  if formula is None:
    print(f'{kind}: no FLOP formula for this kind; GFLOP/s are not reported')
  needed, needed_sampler = formula or (None, None)
  reference = next((v for v in ('baseline', 'release') if v in variants), None)
  baseline = next((statistics.median(r['step_times']) for r in results
                   if r['variant'] == reference), None)
  rows = []
  for r in results:
    step = statistics.median(r['step_times'])
    sampler = statistics.median(r['sampler_times'])
    peak_dtype = PEAK_DTYPE[r['precision']]
    peak = rates[peak_dtype]
    rows.append(dict(
        variant=r['variant'], precision=r['precision'], peak_dtype=peak_dtype,
        jit_compile=r['jit_compile'], first_call_s=r['first_call_s'],
        s_per_step=step, step_min=min(r['step_times']),
        cpu_s_per_step=statistics.median(r['step_cpu_times']),
        step_max=max(r['step_times']), sampler_s=sampler,
        image_langevin_steps_per_s=FLAGS.batch * FLAGS.langevin_steps / step,
        needed_gflop_per_step=_ratio(needed, 1e9),
        achieved_gflops=_ratio(needed, step * 1e9),
        sampler_gflops=_ratio(needed_sampler, sampler * 1e9),
        fraction_of_matmul_rate=_ratio(needed, step * 1e9 * peak),
        speedup=(baseline / step) if baseline else None))
  chain = langevin_description(base_config)
  out = dict(config=base_config.name, experiment=kind, chain=chain,
             batch=FLAGS.batch, langevin_steps=FLAGS.langevin_steps,
             device=(tf.config.list_logical_devices()[-1].device_type), matmul_gflops=rates,
             hat_forward_flops_per_image=h, generator_forward_flops_per_image=g, rows=rows)
  header = (f'{"variant":8} {"dtype":>8} {"xla":>3} {"1st s":>6} {"s/step":>8} {"range":>15} '
            f'{"cpu s":>6} {"sampler s":>9} {"img*K/s":>8} {"GFLOP/s":>8} {"of peak":>7} '
            f'{"speedup":>7}')
  matmul = ', '.join(f'{d} {r:.0f}' for d, r in rates.items())
  print(f'\n{base_config.name} ({kind}, {chain}): batch {FLAGS.batch}, K {FLAGS.langevin_steps}, '
        f'needed {_ratio(needed, 1e9) or 0:.1f} GFLOP/step; matmul GFLOP/s: {matmul}; '
        f'speedup against {reference or "-"}')
  print(header)
  for r in rows:
    speed = f'{r["speedup"]:.2f}x' if r['speedup'] else '-'
    print(f'{r["variant"]:8} {r["peak_dtype"]:>8} {"on" if r["jit_compile"] else "off":>3} '
          f'{r["first_call_s"]:6.1f} {r["s_per_step"]:8.3f} '
          f'{r["step_min"]:7.3f}-{r["step_max"]:<7.3f} {r["cpu_s_per_step"]:6.3f} '
          f'{r["sampler_s"]:9.3f} {r["image_langevin_steps_per_s"]:8.1f} '
          f'{r["achieved_gflops"] or 0:8.1f} {r["fraction_of_matmul_rate"] or 0:7.2f} {speed:>7}')
  print(json.dumps(out))
  if FLAGS.json:
    with open(FLAGS.json, 'w') as f:
      json.dump(out, f, indent=2)


def _ratio(flop_count, divisor):
  return None if flop_count is None else flop_count / divisor


def langevin_description(config):
  """The training chain as the FLOP formula sees it."""
  settings = langevin.ChainSettings.from_config(config.langevin)
  if not settings.joint:
    return 'conditional chain'
  order = 'Z, Y' if settings.latent_first else 'Y, Z'
  return f'joint chain ({order}{"" if settings.use_residual else ", no residual"})'


if __name__ == '__main__':
  sys.exit(app.run(main))
