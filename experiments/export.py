r"""Exports a trained Hat EBM as a SavedModel (tf.saved_model.load / tensorflow_hub.load).

  python experiments/export.py --workdir=workdir/digits_synth --output=exported/digits_synth

Signatures: sample(num_samples, seed) -> images in [-1, 1] (the config's sampling chain, same
K / eps / T, deterministic for a seed), sample_path(num_samples, seed) -> the same chains at
--path_steps, energy(images) -> per-image energies H(x). An existing SavedModel at --output is
only replaced with --overwrite, and only once the new one is written completely.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a training run.', required=True)
flags.DEFINE_string('output', None, 'SavedModel directory to write (default: '
                    '<workdir>/saved_model).')
flags.DEFINE_list('path_steps', None, 'Chain steps returned by sample_path (default: 5 evenly '
                  'spaced steps from 0 to K).')
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm import export  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402


def main(argv):
  del argv

  def run():
    steps = run_lib.int_list(FLAGS.path_steps, 'path_steps')
    output = FLAGS.output or os.path.join(FLAGS.workdir, 'saved_model')
    out = run_lib.OwnedOutput(output, 'export', FLAGS.overwrite, 'output')
    out.check()  # before any work
    loaded = runs.load_run(FLAGS.workdir, **run_lib.load_run_flags())
    module = export.build_module(loaded, path_steps=steps)
    # Staged first: a failed export (disk full, Ctrl-C, ...) leaves the old one intact.
    with out:
      export.save(module, out.staging)
      out.commit()
    s = loaded.model.sampling
    print(f'Exported step {loaded.step} of {FLAGS.workdir} to {output}\n'
          f'  sample(num_samples, seed): K={s.steps}, eps={s.step_size:g}, T={s.temperature:g}, '
          f'Y0 scale={s.init_scale:g}; images {module.expected_shape} in [-1, 1]\n'
          f'  sample_path steps: {list(module.path_steps.numpy())}\n'
          f'  energy(images): float32 {module.expected_shape} -> [N]')

  run_lib.main_guard(run)


if __name__ == '__main__':
  cli.run(main)
