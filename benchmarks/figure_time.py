r"""Time of what a run writes for people, against the run's training time.

  python benchmarks/figure_time.py                       # the digits default
  python benchmarks/figure_time.py --workdir=workdir/digits_synth   # and its run_info.json

Builds the config's task (untrained networks: the figures cost the same), then times the writing at
each of the run's grid steps (three labelled grid figures, their TensorBoard images, the energy
histograms of data and samples) and the training-curves PNG at the end, with the scalars of every
log step in place. The sampling of the grids is not counted: it is the same chain as before the
figures. With --workdir, the wall time of that run (run_info.json) gives the share.
"""
import json
import os
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
config_flags.DEFINE_config_file('config', os.path.join(ROOT, 'experiments', 'configs',
                                                       'digits_synth.py'), 'Config.')
flags.DEFINE_string('workdir', None, 'A finished run of the config: its wall time gives the share.')
FLAGS = flags.FLAGS


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tf_hat_ebm import registry
  from tf_hat_ebm import summaries
  config = FLAGS.config
  t = config.training
  task = registry.for_config(config).make_task(config, tf.distribute.get_strategy())
  grids = task.grid_samples(t.num_grid_samples)
  workdir = tempfile.mkdtemp()
  writer = tf.summary.create_file_writer(os.path.join(workdir, 'tensorboard'))
  report = summaries.RunReport(task, config, workdir, writer)
  start = time.time()
  report.start(0)
  metrics = {k: 0.1 for k in task.metric_names}
  for step in range(t.log_every, t.num_steps + 1, t.log_every):
    report.scalars(step, metrics, {**task.learning_rates(), 'steps_per_sec': 10.0,
                                   'guard_count': 0, 'rollbacks': 0})
  logging = time.time() - start
  grid_steps = list(range(t.sample_every, t.num_steps + 1, t.sample_every))
  times = []
  for step in grid_steps:
    start = time.time()
    report.grids(step, grids)
    times.append(time.time() - start)
  start = time.time()
  report.finish(t.num_steps)
  curves = time.time() - start
  total = sum(times) + curves
  result = dict(config=config.name, grid_steps=grid_steps,
                grid_seconds=[round(x, 3) for x in times],
                curves_seconds=round(curves, 3), scalars_seconds=round(logging, 3),
                figures_seconds=round(total, 3), load=os.getloadavg()[0])
  if FLAGS.workdir:
    with open(os.path.join(FLAGS.workdir, 'run_info.json')) as f:
      runs = json.load(f)
    wall = float(np.sum([r.get('wall_s', 0.0) for r in runs['runs']]))
    result.update(run_wall_seconds=round(wall, 1), figures_share=round(total / wall, 4))
  print(json.dumps(result, indent=2))


if __name__ == '__main__':
  app.run(main)
