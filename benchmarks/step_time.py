r"""Speed harness: training-step and sampler time, FLOPs and the machine's matmul rate, one run.

Any Hat EBM config (synthesis or joint, by config.experiment through the registry):
  python benchmarks/step_time.py --config=experiments/configs/cifar10_synth.py --batch=16 \
      --langevin_steps=50 --variants=release,fast,bf16 --json=/tmp/step_time.json
  python benchmarks/step_time.py --config=experiments/configs/cifar10_refine.py \
      --config.generator.source=factory --config.generator.path=factories:cifar10_sngan_generator \
      --config.generator.latent_shape='(128,)'
  python benchmarks/step_time.py --config=experiments/configs/digits_retrofit.py \
      --untrained_generator

Variants (each a set of config.perf options, measured in the same process, same data):
  release  G(Z) recomputed in every Langevin step (the authors' release), float32   (synthesis)
  fast     G(Z) once per chain (the default), float32
  bf16     fast + mixed_bfloat16 (states, energies, losses, bank float32)
  xla      fast + XLA-compiled Langevin chain                                      (synthesis)
Joint configs (refinement, retrofit) have the variants fast and bf16 (the default): H and the frozen
G compute in the variant's precision. Their generator comes from config.generator, or with
--untrained_generator is the config's generator (or decoder) with fresh weights: the same work,
no trained run needed.
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
from typing import Tuple

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
flags.DEFINE_list('variants', ['release', 'fast', 'bf16'],
                  'Variants to time (joint configs: fast and bf16 only, both by default).')
flags.DEFINE_boolean('untrained_generator', False,
                     "Joint configs: the config's generator (or decoder) with fresh weights "
                     'instead of loading config.generator.')
flags.DEFINE_integer('repeats', 3, 'Measurements per variant (after one warm-up).')
flags.DEFINE_integer('steps_per_measure', 1, 'Training steps per measurement (one host call).')
flags.DEFINE_integer('matmul_size', 2048, 'Square matmul size for the reference rate.')
flags.DEFINE_string('json', None, 'Also write the results here.')
flags.DEFINE_string('tpu', None, 'TPU name or "local".')
FLAGS = flags.FLAGS

VARIANTS = {
    'release': dict(recompute_generator=True, precision='float32', jit_sampler=False),
    'fast': dict(recompute_generator=False, precision='float32', jit_sampler=False),
    'bf16': dict(recompute_generator=False, precision='mixed_bfloat16', jit_sampler=False),
    'xla': dict(recompute_generator=False, precision='float32', jit_sampler=True),
}


def matmul_rate(dtype, n, repeats=5):
  """GFLOP/s of an n x n matmul in dtype on the default device."""
  a = tf.cast(tf.random.normal([n, n]), dtype)
  fn = tf.function(lambda a: tf.reduce_sum(tf.cast(tf.matmul(a, a), tf.float32)))
  fn(a).numpy()
  start = time.perf_counter()
  for _ in range(repeats):
    fn(a).numpy()
  return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def timed(fn, repeats):
  fn()  # warm-up: tracing and first run
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return times


# A kind's `speed_variants` hook (registry.Kind.hooks): the variants of its `perf` options this
# harness times (VARIANTS' names).
SpeedVariants = Tuple[str, ...]


def variants_to_time(config):
  """The variant names to time: --variants, of those the config's kind has."""
  known: SpeedVariants = registry.for_config(config).hook('speed_variants', ())
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


def measure_variant(base_config, name, strategy, repeats, steps_per_measure, count_flops):
  config = copy.deepcopy(base_config)
  config.unlock()
  config.perf.update({k: v for k, v in VARIANTS[name].items() if k in config.perf})
  if 'bank_size' in config.training:
    config.training.bank_size = max(config.training.batch_size * 2, 256)
  task = make_task(config, strategy)
  workdir = tempfile.mkdtemp()
  trainer = Trainer(task, config, workdir, strategy, verbose=False)
  task.initialize()
  shape = (config.data.image_size, config.data.image_size, config.data.channels)
  batch = tf.random.uniform([config.training.batch_size, *shape], -1, 1, seed=0)
  dataset = strategy.distribute_datasets_from_function(
      lambda ctx: tf.data.Dataset.from_tensors(
          batch[:ctx.get_per_replica_batch_size(config.training.batch_size)]).repeat())
  iterator = iter(dataset)
  loop = trainer.make_train_loop()
  n = tf.constant(steps_per_measure)
  step_times = [t / steps_per_measure
                for t in timed(lambda: {k: v.numpy() for k, v in loop(iterator, n).items()},
                               repeats)]

  per_replica = config.training.batch_size // strategy.num_replicas_in_sync

  @tf.function
  def sample():  # the training chain from fresh latents, G(Z0) included
    def replica():
      _, y, g_z, _ = task.chain(task.rng, per_replica, task.settings)
      return g_z + y
    return strategy.run(replica)

  sampler_times = timed(lambda: strategy.experimental_local_results(sample())[0].numpy(), repeats)
  h = flops.forward_flops(task.hat, [1, *shape]) if count_flops else None
  g = flops.forward_flops(task.generator, [1, *task.generator.latent_shape]) if h else None
  shutil.rmtree(workdir, ignore_errors=True)
  return dict(variant=name, step_times=step_times, sampler_times=sampler_times,
              hat_flops=h, gen_flops=g, K=config.langevin.steps,
              batch=config.training.batch_size)


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
  rates = {'float32': matmul_rate(tf.float32, FLAGS.matmul_size)}
  if 'bf16' in variants:  # emulated bfloat16 is slow: measured only when a variant uses it
    rates['bfloat16'] = matmul_rate(tf.bfloat16, FLAGS.matmul_size)
  # FLOPs are counted on float32 networks when a variant has them.
  counted = next((v for v in variants if v != 'bf16'), variants[0])
  results = [measure_variant(base_config, v, strategy, FLAGS.repeats, FLAGS.steps_per_measure,
                             count_flops=(v == counted))
             for v in variants]
  h = next(r['hat_flops'] for r in results if r['hat_flops'])
  g = next(r['gen_flops'] for r in results if r['gen_flops'])
  formula = flops.step_flops(registry.for_config(base_config), base_config, h, g, FLAGS.batch,
                             FLAGS.langevin_steps)
  if formula is None:
    print(f'{kind}: no FLOP formula for this kind; GFLOP/s are not reported')
  needed, needed_sampler = formula or (None, None)
  baseline = next((statistics.median(r['step_times']) for r in results
                   if r['variant'] == 'release'), None)
  rows = []
  for r in results:
    step = statistics.median(r['step_times'])
    sampler = statistics.median(r['sampler_times'])
    peak = rates['bfloat16' if r['variant'] == 'bf16' else 'float32']
    rows.append(dict(
        variant=r['variant'], s_per_step=step, step_min=min(r['step_times']),
        step_max=max(r['step_times']), sampler_s=sampler,
        image_langevin_steps_per_s=FLAGS.batch * FLAGS.langevin_steps / step,
        needed_gflop_per_step=_ratio(needed, 1e9),
        achieved_gflops=_ratio(needed, step * 1e9),
        sampler_gflops=_ratio(needed_sampler, sampler * 1e9),
        fraction_of_matmul_rate=_ratio(needed, step * 1e9 * peak),
        speedup_vs_release=(baseline / step) if baseline else None))
  chain = langevin_description(base_config)
  out = dict(config=base_config.name, experiment=kind, chain=chain,
             batch=FLAGS.batch, langevin_steps=FLAGS.langevin_steps,
             device=(tf.config.list_logical_devices()[-1].device_type), matmul_gflops=rates,
             hat_forward_flops_per_image=h, generator_forward_flops_per_image=g, rows=rows)
  header = (f'{"variant":8} {"s/step":>8} {"range":>15} {"sampler s":>9} {"img*K/s":>8} '
            f'{"GFLOP/s":>8} {"of peak":>7} {"speedup":>7}')
  bf16_rate = f', bf16 {rates["bfloat16"]:.0f} GFLOP/s' if 'bfloat16' in rates else ''
  print(f'\n{base_config.name} ({kind}, {chain}): batch {FLAGS.batch}, K {FLAGS.langevin_steps}, '
        f'needed {_ratio(needed, 1e9) or 0:.1f} GFLOP/step; '
        f'matmul f32 {rates["float32"]:.0f} GFLOP/s{bf16_rate}')
  print(header)
  for r in rows:
    speed = f'{r["speedup_vs_release"]:.2f}x' if r['speedup_vs_release'] else '-'
    print(f'{r["variant"]:8} {r["s_per_step"]:8.3f} {r["step_min"]:7.3f}-{r["step_max"]:<7.3f} '
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
