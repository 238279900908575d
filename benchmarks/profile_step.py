r"""Where a training step's time goes: tf.profiler over a few steps, op self-time by op type.

  TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 python benchmarks/profile_step.py \
      --config=experiments/configs/digits_refine.py --untrained_generator --batch=32 \
      --langevin_steps=20 --steps_per_measure=10

Takes step_time.py's flags (config, batch, langevin_steps, untrained_generator, tpu); the
config's `default` variant is built, warmed up with two calls of `--steps_per_measure` steps,
then --loops calls are traced. Prints ms per step and share of the step for each op type (all
host threads: with one thread the shares add up to the step). Results: docs/speed.md.
"""
import collections
import glob
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_time  # noqa: E402  (its flags and the variant's training loop)

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: E402

import tpu_utils  # noqa: E402

flags.DEFINE_integer('loops', 2, 'Traced calls of the training loop.')
flags.DEFINE_integer('top', 20, 'Op types to print.')
FLAGS = flags.FLAGS


def op_times(xplane_path):
  """{op type: (seconds, count)} of the TensorFlow ops on the host in one trace."""
  space = xplane_pb2.XSpace()
  with open(xplane_path, 'rb') as f:
    space.ParseFromString(f.read())
  seconds, counts = collections.Counter(), collections.Counter()
  for plane in space.planes:
    if plane.name != '/host:CPU':
      continue
    for line in plane.lines:
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if ':' not in name or name.startswith('$'):  # "scope/op:OpType" are the TF ops
          continue
        op_type = name.rsplit(':', 1)[1].strip()
        if op_type.startswith('__inference') or op_type in ('Run', 'Process'):
          continue
        seconds[op_type] += event.duration_ps * 1e-12
        counts[op_type] += 1
  return {k: (v, counts[k]) for k, v in seconds.items()}


def main(argv):
  del argv
  config = FLAGS.config
  step_time.check_config(config)
  config.unlock()
  config.training.batch_size = FLAGS.batch
  config.langevin.steps = FLAGS.langevin_steps
  strategy = tpu_utils.make_strategy(FLAGS.tpu)
  prepared = step_time.prepare_variant(config, 'default', strategy, FLAGS.steps_per_measure,
                                       count_flops=False)
  step = prepared['fns']['step']
  step()
  step()
  logdir = tempfile.mkdtemp()
  try:
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(FLAGS.loops):
      step()
    wall = time.perf_counter() - start
    tf.profiler.experimental.stop()
    times = op_times(glob.glob(os.path.join(logdir, '**', '*.xplane.pb'), recursive=True)[0])
  finally:
    shutil.rmtree(logdir, ignore_errors=True)
  n = FLAGS.loops * FLAGS.steps_per_measure
  per_step = wall / n
  print(f'{config.name}: batch {FLAGS.batch}, K {FLAGS.langevin_steps}, '
        f'{prepared["precision"]}, {per_step * 1e3:.1f} ms per step (traced, {n} steps)')
  print(f'{"op type":40s} {"ms/step":>8s} {"of step":>8s} {"ops/step":>8s}')
  for op_type, (seconds, count) in sorted(times.items(), key=lambda kv: -kv[1][0])[:FLAGS.top]:
    print(f'{op_type:40s} {seconds / n * 1e3:8.2f} {seconds / wall:8.1%} {count / n:8.0f}')


if __name__ == '__main__':
  app.run(main)
