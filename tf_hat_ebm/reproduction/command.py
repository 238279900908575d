"""The flags of tf-hat-ebm-reproduce (experiments/reproduce.py), TensorFlow-free as every command's
--help is; cli.COMMANDS names them by 'module:function', so the command line imports nothing of
the reproduction, which runs the command line's scripts (runner.py)."""
from absl import flags

from tf_hat_ebm.reproduction.stages import PARTS, SCALES


def define_flags(fv):
  """tf-hat-ebm-reproduce's flags on `fv`: the stage table's scales and parts are their choices."""
  flags.DEFINE_enum('scale', 'digits', list(SCALES), 'digits (CPU) or paper (the paper '
                    'configs).', flag_values=fv)
  flags.DEFINE_list('seeds', None, 'Training seeds (default: 0,1,2; paper scale: 0).',
                    flag_values=fv)
  flags.DEFINE_string('out', None, 'Output directory (default: reproduce/<scale>).',
                      flag_values=fv)
  flags.DEFINE_list('parts', list(PARTS), 'Parts to run (with the stages they need): '
                    + ', '.join(PARTS) + '.', flag_values=fv)
  flags.DEFINE_string('size', None, "Every config's size (get_config's argument), e.g. tiny: "
                      'seconds-long runs (the tests).', flag_values=fv)
  flags.DEFINE_string('tpu', None, 'TPU name or "local", for the training scripts.',
                      flag_values=fv)
  flags.DEFINE_string('data_dir', None, 'tfds data_dir of the paper datasets.', flag_values=fv)
  flags.DEFINE_string('inception_path', None, 'Local TF-GAN Inception for FID.', flag_values=fv)
  flags.DEFINE_string('precision', None, 'perf.precision of every training (default: float32 '
                      "at the paper scale, each config's own at digits scale).", flag_values=fv)
  flags.DEFINE_string('release_sngan', None, "Directory of the release's CIFAR-10 refinement "
                      '(ebm.ckpt, gen.ckpt): its published SN-GAN is the refinement baseline.',
                      flag_values=fv)
  flags.DEFINE_string('jobs', 'auto', 'Stages run at once (auto: 1 at paper scale, else up to '
                      '2).', flag_values=fv)
  flags.DEFINE_bool('dry_run', False, "Print every stage's commands and resolved config; run "
                    'nothing.', flag_values=fv)
  flags.DEFINE_bool('overwrite', False, 'Write into a non-empty --out that reproduce.py did not '
                    'make (only its own files; others are never replaced).', flag_values=fv)
  flags.DEFINE_list('previous_reports', [], 'report.json files of earlier runs of the same '
                    'pipeline: a check whose verdict differs between them and this run is '
                    'reported borderline.', flag_values=fv)
