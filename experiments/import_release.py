r"""Turns the authors' published models (Keras save_weights checkpoints) into a tf_hat_ebm workdir.

  python experiments/import_release.py --config=experiments/configs/cifar10_synth.py \
      --hat=release/cifar10/ebm.ckpt --generator=release/cifar10/gen.ckpt \
      --workdir=workdir/release_c10
  python experiments/import_release.py --config=experiments/configs/cifar10_retrofit.py \
      --hat=release/retrofit/ebm.ckpt --decoder=release/retrofit/dec.ckpt \
      --workdir=workdir/release_rf

--hat/--generator/--decoder take a checkpoint prefix (the path given to save_weights, without
.index). The config must describe the published networks (resolution, widths, latent size):
every variable is checked by name and shape. Joint configs get the generator (refinement) or
decoder (retrofit) in --generator_workdir (default <workdir>/generator). The workdir then works
with sample.py, evaluate_fid.py, evaluate_ood.py and export.py.
"""
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

config_flags.DEFINE_config_file('config', None, 'Paper config the published models were trained '
                                'with (experiments/configs/*.py).', lock_config=True)
flags.DEFINE_string('workdir', None, 'New workdir to write.')
flags.DEFINE_string('hat', None, 'Checkpoint prefix of the release hat network (EBM).')
flags.DEFINE_string('generator', None, 'Checkpoint prefix of the release generator.')
flags.DEFINE_string('decoder', None, 'Checkpoint prefix of the release decoder (retrofit).')
flags.DEFINE_string('encoder', None, 'Optional: the release encoder (retrofit), kept beside the '
                    'decoder.')
flags.DEFINE_string('generator_workdir', None, 'Joint configs: where the generator or decoder is '
                    'written (default <workdir>/generator).')
flags.DEFINE_integer('step', None, 'Training step recorded in the checkpoint (default: the '
                     "config's training.num_steps).")
flags.mark_flags_as_required(['config', 'workdir'])
FLAGS = flags.FLAGS


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import release_import
  from tf_hat_ebm import run_lib
  workdir = run_lib.main_guard(lambda: release_import.import_release(
      FLAGS.config, FLAGS.workdir, FLAGS.hat, generator=FLAGS.generator, decoder=FLAGS.decoder,
      encoder=FLAGS.encoder, generator_workdir=FLAGS.generator_workdir, step=FLAGS.step))
  print(f'wrote {workdir}')


if __name__ == '__main__':
  from tf_hat_ebm import run_lib  # pylint: disable=g-import-not-at-top
  run_lib.run(main)
