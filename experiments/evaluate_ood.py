r"""Out-of-distribution detection by the energy H(x) (the paper's Table 3): AUROC per OOD set.

  python experiments/evaluate_ood.py --workdir=workdir/digits_synth
  python experiments/evaluate_ood.py --workdir=/data/runs/cifar10 --data_dir=/data/tfds

In-distribution: the test split of the run's dataset. OOD sets: tfds svhn_cropped, cifar100,
celeb_a (resized to the model's resolution), or for digits the offline sets of
tf_hat_ebm/evaluation/ood.py. Higher energy = OOD. Also written to <workdir>/ood.json and, as
histograms of H(x) per set, <workdir>/ood_energies.png (existing ones only with --overwrite), and
into the workdir's TensorBoard (eval/ood_auroc_<set>, histograms) at the checkpoint's step.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a training run.', required=True)
flags.DEFINE_list('sets', None, 'OOD sets (default: svhn_cropped, cifar100, celeb_a; for digits '
                  'the offline sets of tf_hat_ebm/evaluation/ood.py).')
flags.DEFINE_integer('num', 10_000, 'Images per set at most.', lower_bound=1, upper_bound=10**7)
flags.DEFINE_integer('batch_size', 250, 'Batch size.', lower_bound=1, upper_bound=65_536)
flags.DEFINE_string('data_dir', None, 'tfds data_dir of the OOD sets (default: the config\'s).')
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm import summaries  # noqa: E402
from tf_hat_ebm import export  # noqa: E402
from tf_hat_ebm import figures  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm.evaluation import ood  # noqa: E402


def evaluate():
  path = os.path.join(FLAGS.workdir, 'ood.json')
  png = os.path.join(FLAGS.workdir, 'ood_energies.png')
  for output in (path, png):
    run_lib.check_output_file(output, FLAGS.overwrite)
  run = runs.load_run(FLAGS.workdir, **run_lib.load_run_flags())
  data_cfg = run.config.data
  if FLAGS.data_dir:
    data_cfg.data_dir = FLAGS.data_dir
  module = export.build_module(run)
  names = FLAGS.sets or ood.default_sets(data_cfg)
  energies = {}
  result = ood.evaluate(lambda x: module.energy(x)['energy'], data_cfg, names, FLAGS.num,
                        FLAGS.batch_size, energies_out=energies)
  result['step'] = run.step
  ind = result['in_distribution']
  print(f'\nOOD detection by energy H(x), higher = OOD; step {run.step} of {FLAGS.workdir}')
  print(f'in-distribution: {ind["name"]} ({ind["num"]} images, mean H {ind["mean_energy"]:.4g})')
  width = max(len(n) for n in names + ['OOD set'])
  print(f'| {"OOD set".ljust(width)} | AUROC | images | mean H     |')
  print(f'|{"-" * (width + 2)}|-------|--------|------------|')
  for name, r in result['sets'].items():
    print(f'| {name.ljust(width)} | {r["auroc"]:.3f} | {r["num"]:6d} | {r["mean_energy"]:<10.4g} |')
  run_lib.write_json(path, result)
  figure = figures.energy_histograms(
      energies, f'H(x) of {ind["name"]} vs OOD sets: {run.config.name}, step {run.step}', png,
      reference=ind['name'],
      notes={n: f'AUROC {r["auroc"]:.3f}' for n, r in result['sets'].items()})
  summaries.log_evaluation(
      FLAGS.workdir, run.step, {f'ood_auroc_{n}': r['auroc'] for n, r in result['sets'].items()},
      {f'ood_auroc_{n}': f'AUROC of telling {n} from {ind["name"]} by H(x): 0.5 is chance, 1 '
       'perfect' for n in result['sets']}, figure, energies)
  print(f'written to {path} and {png}; TensorBoard: {FLAGS.workdir}/tensorboard (eval/)')


def main(argv):
  del argv
  run_lib.main_guard(evaluate)


if __name__ == '__main__':
  cli.run(main)
