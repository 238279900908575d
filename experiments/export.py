r"""Exports a trained Hat EBM as a SavedModel (tf.saved_model.load / tensorflow_hub.load).

  python experiments/export.py --workdir=workdir/digits_synth --output=exported/digits_synth

Signatures: sample(num_samples, seed) -> images in [-1, 1] (the config's sampling chain, same
K / eps / T, deterministic for a seed), sample_path(num_samples, seed) -> the same chains at
--path_steps, energy(images) -> per-image energies H(x).
"""
import os
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from absl import app
from absl import flags
from absl import logging

from tf_hat_ebm import checkpoints
from tf_hat_ebm import export
from tf_hat_ebm import run_lib

flags.DEFINE_string('workdir', None, 'Workdir of a training run.', required=True)
flags.DEFINE_string('output', None, 'SavedModel directory to write (default: '
                    '<workdir>/saved_model).')
flags.DEFINE_list('path_steps', None, 'Chain steps returned by sample_path (default: 5 evenly '
                  'spaced steps from 0 to K).')
FLAGS = flags.FLAGS


def main(argv):
  del argv

  logging.set_verbosity(logging.WARNING)  # SavedModel writing logs renamed inputs at INFO

  def run():
    loaded = checkpoints.load_run(FLAGS.workdir)
    steps = [int(s) for s in FLAGS.path_steps] if FLAGS.path_steps else None
    module = export.build_module(loaded, path_steps=steps)
    output = FLAGS.output or os.path.join(FLAGS.workdir, 'saved_model')
    export.save(module, output)
    s = loaded.task.sampling_settings
    print(f'Exported step {loaded.step} of {FLAGS.workdir} to {output}\n'
          f'  sample(num_samples, seed): K={s.steps}, eps={s.step_size:g}, T={s.temperature:g}, '
          f'Y0 scale={s.init_scale:g}; images {module.expected_shape} in [-1, 1]\n'
          f'  sample_path steps: {list(module.path_steps.numpy())}\n'
          f'  energy(images): float32 {module.expected_shape} -> [N]')

  run_lib.main_guard(run)


if __name__ == '__main__':
  app.run(main)
