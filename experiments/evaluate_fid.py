r"""FID of a trained Hat EBM beside its baselines, all with one feature network.

  python experiments/evaluate_fid.py --workdir=workdir/digits_synth    # small-data FID (classifier)
  python experiments/evaluate_fid.py --workdir=/data/runs/cifar10 --inception_path=/data/inception
  python experiments/evaluate_fid.py --workdir=workdir/digits_refine  # SN-GAN, DDLS and Hat EBM
  python experiments/evaluate_fid.py --workdir=workdir/digits_sngan   # the SN-GAN on its own

Synthesis runs: the Hat EBM's samples X = G(Z) + Y and its generator alone G(Z). Joint runs
(refinement, retrofit): from the same latents Z0, the generator alone G(Z0) (the SN-GAN of a
refinement), DDLS (when the generator comes with a discriminator; config.ddls) and the Hat EBM's
joint chain X = G(Z_K) + Y_K. SN-GAN runs: G(Z0) from the latents a refinement over it would
draw (the same seeds give the same number as its G(Z0) row). Samples come from the config's
`sampling` chain and are scored against the train split; --runs independent sample sets give
mean +- std. Features: Inception for CIFAR-10 / CelebA / ImageNet, the digits classifier for the
digits.
The table is also written to <workdir>/fid.json (an existing one only with --overwrite, never with a
non-finite result) and into the workdir's TensorBoard (eval/fid_<method>) at the checkpoint's step.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a training run.', required=True)
flags.DEFINE_integer('num_samples', None, 'Samples per run (default: 50,000 with Inception as in '
                     'the paper, 5,000 with the classifier features).', lower_bound=2,
                     upper_bound=10**6)
flags.DEFINE_integer('runs', 3, 'Independent sample sets; FID is reported as mean +- std.',
                     lower_bound=1, upper_bound=100)
flags.DEFINE_integer('batch_size', 250, 'Sampling and feature batch size.', lower_bound=1,
                     upper_bound=65_536)
flags.DEFINE_enum('feature_net', None, ['inception', 'classifier'],
                  'Feature network (default: classifier for digits, inception otherwise).')
flags.DEFINE_string('inception_path', None, 'Local copy of the TF-GAN Inception (TF-Hub module '
                    'directory); default: TF-Hub, honouring TFHUB_CACHE_DIR.')
flags.DEFINE_string('feature_cache_dir', None, 'Where the FID feature classifier is cached '
                    '(default: $TF_HAT_EBM_CACHE or ~/.cache/tf_hat_ebm, one per dataset).')
flags.DEFINE_integer('seed', 0, 'Seed of the first sample batch.', lower_bound=0,
                     upper_bound=2**31 - 1)
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import registry  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm import summaries  # noqa: E402
from tf_hat_ebm.evaluation import features  # noqa: E402
from tf_hat_ebm.evaluation import fid  # noqa: E402


def evaluate():
  path = os.path.join(FLAGS.workdir, 'fid.json')
  run_lib.check_output_file(path, FLAGS.overwrite)
  kind = registry.for_config(runs.load_config(FLAGS.workdir, FLAGS.trust_workdir_code))
  if kind.fid_rows is None:
    raise ValueError(f'--workdir={FLAGS.workdir}: {kind.name} runs offer no FID rows')
  # A kind without a Hat EBM to load (an SN-GAN) says how its run is read for its FID rows.
  run = (registry.load(kind.fid_run)(FLAGS.workdir, FLAGS.checkpoint) if kind.fid_run else
         runs.load_run(FLAGS.workdir, **run_lib.load_run_flags()))
  data_cfg = run.config.data
  net_kind = FLAGS.feature_net or ('classifier' if data_cfg.name == 'digits' else 'inception')
  num_samples = FLAGS.num_samples or (50_000 if net_kind == 'inception' else 5_000)
  fid.check_memory(num_samples)  # before any network is loaded or trained
  if net_kind == 'inception':
    net = fid.InceptionFeatures(FLAGS.inception_path)  # loaded once, used for every set
  else:
    net = features.classifier_features(data_cfg, FLAGS.feature_cache_dir)
  train = fid.data_activations(data_cfg, data_cfg.train_split, net, FLAGS.workdir,
                               FLAGS.batch_size)
  test = fid.data_activations(data_cfg, data_cfg.test_split, net, FLAGS.workdir,
                              FLAGS.batch_size)
  methods, fids, chain = registry.load(kind.fid_rows)(run, net, train, num_samples, FLAGS.runs,
                                                      FLAGS.seed, FLAGS.batch_size)
  data_fid = fid.frechet_distance(train, test)

  rows = [(f'{label} ({num_samples})', *fid.mean_std(fids[key])) for key, label in methods]
  rows.append((f'data: {data_cfg.test_split} split ({len(test)})', data_fid, None))
  print(f'\nFID vs {data_cfg.name} {data_cfg.train_split} split ({len(train)} images), '
        f'step {run.step} of {FLAGS.workdir}')
  print(f'features: {net.description}; {FLAGS.runs} run(s); sampling chain {chain}')
  print('\n'.join(fid.score_table([(name, {'FID': (mean, std)}) for name, mean, std in rows])))
  result = dict(step=run.step, feature_net=net.name, feature_description=net.description,
                num_samples=num_samples, runs=FLAGS.runs, data_test_vs_train=data_fid,
                reference=f'{data_cfg.name}/{data_cfg.train_split}',
                **{key: fids[key] for key, _ in methods})
  run_lib.write_json(path, result)
  summaries.log_evaluation(
      FLAGS.workdir, run.step, {**{f'fid_{key}': fid.mean_std(fids[key])[0] for key, _ in methods},
                                'fid_data_test_vs_train': data_fid}, summaries.EVAL)
  print(f'written to {path}; TensorBoard: {FLAGS.workdir}/tensorboard (eval/)')


def main(argv):
  del argv
  run_lib.main_guard(evaluate)


if __name__ == '__main__':
  cli.run(main)
