r"""The paper in one command: every table and figure as resumable stages, and a report.

  python experiments/reproduce.py                        # digits, 3 seeds, on a CPU
  python experiments/reproduce.py --dry_run              # every stage's commands and configs
  python experiments/reproduce.py --scale=paper --tpu=my-tpu --data_dir=gs://bucket/tfds \
      --inception_path=/data/inception --out=/data/reproduce   # the paper configs, float32

Stages (each in <out>/<stage>/, the experiment scripts run in subprocesses from <out>, so each is
exactly what a user runs): synthesis per seed (Table 2); SN-GAN, then refinement with its SN-GAN,
DDLS and Hat EBM rows (Table 1; --release_sngan imports the published CIFAR-10 SN-GAN instead of
retraining it); autoencoder, then retrofit; OOD AUROC of the synthesis model (Table 3; at the
digits scale also a model of digits 0-4 scored on the others); the ablations (generator trained on
the current samples, cooperative learning with and without batch norm, refinement without the
residual Y); figures (Langevin paths, sample grids, the baselines beside the Hat EBM); at the
digits scale the FID's calibration at its sample size. A finished stage leaves <stage>/done.json
and is skipped on the next run; an interrupted one resumes. Independent stages run --jobs at a
time. The report: <out>/report.md, report.json, figures/ (docs/reproduce.md).
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

SCALES = ('digits', 'paper')
PARTS = ('synthesis', 'refinement', 'retrofit', 'ood', 'ablations', 'figures')
flags.DEFINE_enum('scale', 'digits', SCALES, 'digits (CPU) or paper (the paper configs).')
flags.DEFINE_list('seeds', None, 'Training seeds (default: 0,1,2; paper scale: 0).')
flags.DEFINE_string('out', None, 'Output directory (default: reproduce/<scale>).')
flags.DEFINE_list('parts', list(PARTS), 'Parts to run (with the stages they need): '
                  + ', '.join(PARTS) + '.')
flags.DEFINE_string('size', None, "Every config's size (get_config's argument), e.g. tiny: "
                    'seconds-long runs (the tests).')
flags.DEFINE_string('tpu', None, 'TPU name or "local", for the training scripts.')
flags.DEFINE_string('data_dir', None, 'tfds data_dir of the paper datasets.')
flags.DEFINE_string('inception_path', None, 'Local TF-GAN Inception for FID.')
flags.DEFINE_string('precision', None, 'perf.precision of every training (default: float32 at '
                    "the paper scale, each config's own at digits scale).")
flags.DEFINE_string('release_sngan', None, "Directory of the release's CIFAR-10 refinement "
                    '(ebm.ckpt, gen.ckpt): its published SN-GAN is the refinement baseline.')
flags.DEFINE_string('jobs', 'auto', 'Stages run at once (auto: 1 at paper scale, else up to 2).')
flags.DEFINE_bool('dry_run', False, "Print every stage's commands and resolved config; run "
                  'nothing.')
flags.DEFINE_bool('overwrite', False, 'Write into a non-empty --out that reproduce.py did not '
                  'make (only its own files; others are never replaced).')
FLAGS = flags.FLAGS


def options():
  """The flags as the library's Options (one-line errors for what the library cannot read)."""
  from tf_hat_ebm.reproduction import stages  # pylint: disable=g-import-not-at-top
  try:
    seeds = [int(s) for s in FLAGS.seeds] if FLAGS.seeds else list(
        stages.SCALES[FLAGS.scale].seeds)
  except ValueError:
    raise ValueError(f'--seeds must be comma-separated integers, not {",".join(FLAGS.seeds)}')
  out = FLAGS.out if FLAGS.out is not None else os.path.join('reproduce', FLAGS.scale)
  return stages.Options(out=out, scale=FLAGS.scale, seeds=tuple(seeds), parts=tuple(FLAGS.parts),
                        size=FLAGS.size or None, tpu=FLAGS.tpu, data_dir=FLAGS.data_dir,
                        inception_path=FLAGS.inception_path, precision=FLAGS.precision,
                        release_sngan=FLAGS.release_sngan, jobs=FLAGS.jobs,
                        dry_run=FLAGS.dry_run, overwrite=FLAGS.overwrite)


def main(argv):
  del argv
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import run_lib
  from tf_hat_ebm.reproduction import pipeline
  run_lib.main_guard(lambda: pipeline.reproduce(options()),
                     interrupted=lambda: 'interrupted: the running stages were stopped; rerun '
                     'the same command to resume')


if __name__ == '__main__':
  cli.run(main)
