r"""The README's gallery figure from a trained run: X = G(Z) + Y, G(Z), Y and a Langevin path.

  python experiments/gallery.py --workdir=workdir/digits_synth --out=docs/gallery.png

Draws --num samples of the run's sampling chain (seed --seed) as three labelled panels, and below
them the Langevin path of --path_chains chains, in one PNG.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a trained synthesis run.', required=True)
flags.DEFINE_string('out', 'docs/gallery.png', 'Output PNG.')
flags.DEFINE_integer('num', 36, 'Samples per panel.', lower_bound=1, upper_bound=10_000)
flags.DEFINE_integer('path_chains', 3, 'Chains in the Langevin path.', lower_bound=1,
                     upper_bound=100)
flags.DEFINE_integer('seed', 0, 'Seed of the samples and chains.', lower_bound=0,
                     upper_bound=2**31 - 1)
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_hat_ebm import export  # noqa: E402
from tf_hat_ebm import figures  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm import samples as samples_lib  # noqa: E402
from tf_hat_ebm import workdir as workdir_lib  # noqa: E402


def stack(parts):
  """RGBA images one above the other, centred on white."""
  width = max(p.shape[1] for p in parts)
  rows = []
  for p in parts:
    left = (width - p.shape[1]) // 2
    row = np.full([p.shape[0], width, 4], 255, np.uint8)
    row[:, left:left + p.shape[1]] = p
    rows.append(row)
  return np.concatenate(rows)


def gallery():
  run_lib.check_output_file(FLAGS.out, FLAGS.overwrite)
  run = runs.load_run(FLAGS.workdir, **run_lib.load_run_flags())
  module = export.build_module(run)
  out = module.sample(num_samples=FLAGS.num, seed=FLAGS.seed)
  what = f'{run.config.name}, step {run.step}'
  grids = figures.grid_figure(
      [('X = G(Z) + Y', out['images'].numpy(), 'image'),
       ('G(Z)', out['generator_images'].numpy(), 'image'),
       ('Y', out['residuals'].numpy(), 'residual')],
      f'Hat EBM samples: {what}', None, columns=int(np.ceil(np.sqrt(FLAGS.num))))
  path = module.sample_path(num_samples=FLAGS.path_chains, seed=FLAGS.seed)
  chain = samples_lib.path_figure(module, path, f'Langevin chains: {what}', None,
                                  FLAGS.path_chains)
  image = stack([figures.decode(grids), figures.decode(chain)])
  directory = os.path.dirname(FLAGS.out)
  if directory:
    tf.io.gfile.makedirs(directory)
  # Through a temporary file and a rename: a link at --out is replaced, never written through.
  workdir_lib.write_atomic(FLAGS.out, tf.io.encode_png(image).numpy())
  print(f'wrote {FLAGS.out} ({image.shape[1]}x{image.shape[0]} px) from {what}')


def main(argv):
  del argv
  run_lib.main_guard(gallery)


if __name__ == '__main__':
  cli.run(main)
