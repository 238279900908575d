r"""How far the digits FID can go at a sample size N, and the class coverage of models' samples.

  python experiments/calibrate_fid.py --workdir=workdir/digits_synth --num=1000 \
      --samples=synthesis=samples/synthesis/samples.npz --output=calibration.json

For the dataset of --workdir's run (its config.json), against the train split's statistics: the
FID of --num held-out test digits (the floor; drawn with replacement when the split is smaller),
of --num training digits (a generator that copied its data) and of --num test digits without
one class (a missing mode), each over --runs draws. Per --samples file (an .npz of sample.py,
its `images`): the class histogram by the FID's own classifier, the share of its rarest class,
and the distance of each sample to its nearest training image beside the test digits' own.
Writes --output (JSON).
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a digits run (its config.json names the data).',
                    required=True)
flags.DEFINE_integer('num', 1000, 'N: images per FID, as the FID of the samples uses.',
                     lower_bound=2)
flags.DEFINE_integer('runs', 3, 'Random draws per reference FID (mean +- std).', lower_bound=1)
flags.DEFINE_list('samples', [], 'label=path of a sample.py samples.npz, per model; a missing '
                  'file is reported as such (its model drew no samples).')
flags.DEFINE_string('output', None, 'The JSON file written.', required=True)
flags.DEFINE_string('feature_cache_dir', None, 'Where the FID feature classifier is cached '
                    '(default: $TF_HAT_EBM_CACHE or ~/.cache/tf_hat_ebm, one per dataset).')
flags.DEFINE_bool('overwrite', False, 'Replace an existing --output.')
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm.evaluation import calibration  # noqa: E402
from tf_hat_ebm.evaluation import features  # noqa: E402


def sample_files(entries):
  """[(label, path)] of --samples' label=path entries."""
  out = []
  for entry in entries:
    label, eq, path = entry.partition('=')
    if not eq or not label or not path:
      raise ValueError(f'--samples entry {entry!r}: give label=path/to/samples.npz')
    out.append((label, path))
  return out


def calibrate():
  files = sample_files(FLAGS.samples)
  run_lib.check_output_file(FLAGS.output, FLAGS.overwrite)
  data_cfg = runs.load_config(FLAGS.workdir).data
  if data_cfg.name != 'digits':
    raise ValueError(f'--workdir={FLAGS.workdir} is a {data_cfg.name} run: the calibration uses '
                     'the digits classifier')
  data_cfg.classes = ()  # the whole dataset, whatever labels the run trained on
  import numpy as np  # pylint: disable=g-import-not-at-top
  cache = FLAGS.feature_cache_dir or features.default_cache_dir()
  net = features.classifier_features(data_cfg, cache)
  cal = calibration.calibrate(data_cfg, net, cache, FLAGS.num, FLAGS.runs)
  coverage, missing = {}, []
  for label, path in files:
    if not os.path.exists(path):
      missing.append(label)
      continue
    with np.load(path) as npz:
      coverage[label] = calibration.coverage(npz['images'], net, data_cfg, cal)
      coverage[label]['num'] = int(len(npz['images']))
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  run_lib.write_json(FLAGS.output, dict(calibration=cal, coverage=coverage, missing=missing))
  print(f'FID at N = {FLAGS.num}: floor {cal["floor"]["mean"]:.2f}, memorisation bound '
        f'{cal["memorisation"]["mean"]:.2f}, missing class {cal["dropped_class"]["mean"]:.2f}')
  for label, c in coverage.items():
    print(f'{label}: rarest class {c["rarest_class"]} at {100 * c["rarest_share"]:.1f}%, nearest '
          f'training image {c["nn_mean"]:.3f} (test digits {cal["test"]["nn_mean"]:.3f})')
  print(f'written to {FLAGS.output}' + (f'; no samples of {", ".join(missing)}' if missing
                                        else ''))


def main(argv):
  del argv
  run_lib.main_guard(calibrate)


if __name__ == '__main__':
  cli.run(main)
