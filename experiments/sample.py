r"""Samples of a trained Hat EBM as PNG grids and an .npz, and the Langevin-path figure.

  python experiments/sample.py --workdir=workdir/digits_synth --num_samples=100
  python experiments/sample.py --saved_model=exported/digits_synth --output=/tmp/samples

Writes labelled grids samples_grid_NNN.png (X = G(Z) + Y), generator_grid_NNN.png (G(Z)) and
residual_grid_NNN.png (Y on a symmetric scale printed on it), samples.npz (images,
generator_images, residuals in [-1, 1]) and langevin_path.png (per chain rows X and Y, G(Z) once
where Z is fixed, columns = chain steps, the mean energy along the chain below), the figure also
logged to <output>/tensorboard. The files are listed in <output>/.sample.manifest.json:
--overwrite replaces exactly those, and the output is never a workdir's own directory.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a training run (latest checkpoint, or '
                    '--checkpoint).')
flags.DEFINE_string('saved_model', None, 'Or: a SavedModel written by experiments/export.py.')
flags.DEFINE_string('output', None, 'Output directory (default: <workdir>/generated or '
                    '<saved_model>/../<name>_samples).')
flags.DEFINE_integer('num_samples', 100, 'Number of samples.', lower_bound=1,
                     upper_bound=10**8)
flags.DEFINE_integer('seed', 0, 'Seed: the same seed gives the same files; batch b draws the '
                     'stream (seed, b), so other seeds share no sample.', lower_bound=0,
                     upper_bound=2**31 - 1)
flags.DEFINE_integer('batch_size', 250, 'Samples per chain batch.', lower_bound=1,
                     upper_bound=65_536)
flags.DEFINE_integer('path_chains', 4, 'Chains in the Langevin-path figure.', lower_bound=1)
flags.DEFINE_list('path_steps', None, 'Chain steps shown in the path figure (workdir only; a '
                  'SavedModel has the steps chosen at export). Default: 5 evenly spaced in 0..K.')
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm import export  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import samples as samples_lib  # noqa: E402


def sample():
  if bool(FLAGS.workdir) == bool(FLAGS.saved_model):
    raise ValueError('give exactly one of --workdir and --saved_model')
  if FLAGS.checkpoint and not FLAGS.workdir:
    raise ValueError('--checkpoint applies to --workdir')
  output = FLAGS.output or (os.path.join(FLAGS.workdir, 'generated') if FLAGS.workdir
                            else os.path.normpath(FLAGS.saved_model) + '_samples')
  out = run_lib.OwnedOutput(output, 'sample', FLAGS.overwrite, 'output')
  out.check()  # before the model is loaded
  if FLAGS.workdir:
    steps = run_lib.int_list(FLAGS.path_steps, 'path_steps')
    run = runs.load_run(FLAGS.workdir, **run_lib.load_run_flags())
    model = export.build_module(run, path_steps=steps)
    step, source = run.step, f'step {run.step} of {FLAGS.workdir}'
  else:
    if FLAGS.path_steps:
      raise ValueError('--path_steps applies to --workdir; a SavedModel records its path steps '
                       'at export (experiments/export.py --path_steps)')
    model = export.load_saved_model(FLAGS.saved_model, 'saved_model')
    step, source = 0, FLAGS.saved_model
  with out:
    written, figure, steps = samples_lib.write_samples(
        model, out.staging, FLAGS.num_samples, FLAGS.seed, FLAGS.batch_size, FLAGS.path_chains,
        os.path.join(out.staging, 'tensorboard'), step, verbose=True, source=source)
    out.commit()
  tensorboard = os.path.join(output, 'tensorboard')
  print(f'{FLAGS.num_samples} samples of {source} (seed {FLAGS.seed}) written to {output}:')
  for path in written:
    print(f'  {os.path.basename(path)}')
  print(f'  langevin path: {FLAGS.path_chains} chains, rows {", ".join(figure["rows"][:3])} ... '
        f'at steps {steps}, {figure["size"][0]}x{figure["size"][1]} px; TensorBoard: {tensorboard}')


def main(argv):
  del argv
  run_lib.main_guard(sample)


if __name__ == '__main__':
  cli.run(main)
