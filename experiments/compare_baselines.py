r"""The Hat EBM beside its baselines, for any run over a frozen generator (refinement, retrofit):
side-by-side samples of the generator alone, DDLS and the Hat EBM. (Samples of any run: sample.py.)

  python experiments/compare_baselines.py --workdir=workdir/digits_refine    # SN-GAN, DDLS, Hat EBM
  python experiments/compare_baselines.py --workdir=workdir/digits_retrofit  # decoder, Hat EBM

The run's config comes from its workdir (config.json), as for every evaluation script.

All three start from the same latents Z0 ~ N(0, I): G(Z0); DDLS (Langevin in z on
||z||^2/2 - D(G(z)), config.ddls); the Hat EBM's joint chain (config.sampling), X = G(Z_K) + Y_K.
Writes <workdir>/compare/{generator,ddls,hat_ebm,side_by_side}.png (the first --num samples). For
the digits it also prints and writes scores.json: per method, the small-data FID against the train
split (features of the cached digits classifier, --fid_samples samples, --fid_runs runs, mean and
std), the classifier confidence, a digit Inception-Score analogue and the nearest-train distance,
with the real test digits as the reference row.
"""
import os

from absl import flags

from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

flags.DEFINE_string('workdir', None, 'Workdir of a joint (refinement or retrofit) training run.',
                    required=True)
flags.DEFINE_string('out', None, 'Output directory (default: <workdir>/compare).')
flags.DEFINE_integer('num', 100, 'Samples per method.', lower_bound=1, upper_bound=10**5)
flags.DEFINE_integer('seed', 0, 'Seed of Z0 and of the chains.', lower_bound=0,
                     upper_bound=2**31 - 1)
flags.DEFINE_integer('fid_samples', 1000, 'Digits: samples per method and run for the small-data '
                     'FID (0: no FID).', lower_bound=0, upper_bound=10**6)
flags.DEFINE_integer('fid_runs', 2, 'Digits: independent sample sets for the FID (mean +- std).',
                     lower_bound=1, upper_bound=100)
flags.DEFINE_integer('batch_size', 250, 'Samples per chain batch.', lower_bound=1,
                     upper_bound=65_536)
flags.DEFINE_string('feature_cache_dir', None, 'Where the FID feature classifier is cached '
                    '(default: $TF_HAT_EBM_CACHE or ~/.cache/tf_hat_ebm, one per dataset).')
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

from tf_hat_ebm import figures  # noqa: E402
from tf_hat_ebm import registry  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm.evaluation import compare  # noqa: E402
from tf_hat_ebm.evaluation import features  # noqa: E402
from tf_hat_ebm.evaluation import fid  # noqa: E402


# Panel labels of the methods, left to right in side_by_side.png.
LABELS = {'generator': 'generator alone G(Z0)', 'ddls': 'DDLS (Langevin in z)',
          'hat_ebm': 'Hat EBM X = G(Z_K) + Y_K'}


def write(samples, out_dir, what):
  """One labelled grid per method and the labelled side-by-side figure; their metadata."""
  written = {}
  for name, x in samples.items():
    written[name] = figures.grid_figure([(LABELS.get(name, name), x, 'image')],
                                        f'{LABELS.get(name, name)}: {what}',
                                        os.path.join(out_dir, f'{name}.png'))
  written['side_by_side'] = figures.grid_figure(
      [(LABELS.get(name, name), x, 'image') for name, x in samples.items()],
      f'The same latents Z0 through each sampler: {what}',
      os.path.join(out_dir, 'side_by_side.png'))
  return written


def main(argv):
  del argv
  workdir = FLAGS.workdir
  out_dir = FLAGS.out or os.path.join(workdir, 'compare')

  def run():
    if FLAGS.fid_samples == 1:
      raise ValueError('--fid_samples must be 0 (no FID) or >= 2 (a covariance needs two)')
    out = run_lib.OwnedOutput(out_dir, 'compare_baselines', FLAGS.overwrite, 'out')
    out.check()  # before any work
    loaded = runs.load_run(workdir, **run_lib.load_run_flags())
    config, step = loaded.config, loaded.step
    if not registry.for_config(config).baselines:
      raise ValueError(f'--workdir={workdir} holds a {config.experiment} run, which has no '
                       'generator or DDLS baseline to compare: use sample.py')
    sampler = compare.make_sampler(loaded)
    samples = compare.sample_all(loaded.model, sampler, FLAGS.num, FLAGS.seed, FLAGS.batch_size)
    with out:
      write(samples, out.staging, f'{config.name}, step {step}, seed {FLAGS.seed}')
      if config.data.name == 'digits':
        scores(loaded, sampler, samples, out.staging)
      out.commit()
    print(f'{config.name} at step {step}: wrote {", ".join(samples)} and side_by_side.png '
          f'(left to right) to {out_dir}')

  def scores(loaded, sampler, samples, out_dir):
    """The digits table (classifier FID, ...) of every method, printed and in scores.json."""
    config = loaded.config
    net = (features.classifier_features(config.data, FLAGS.feature_cache_dir)
           if FLAGS.fid_samples > 0 else None)
    table = compare.digits_table(loaded.model, sampler, config, samples, net, workdir,
                                 FLAGS.fid_samples, FLAGS.fid_runs, FLAGS.seed, FLAGS.batch_size)
    if FLAGS.fid_samples > 0:
      print(f'FID: {FLAGS.fid_runs} x {FLAGS.fid_samples} samples per method against the '
            f'train split, {net.description}; lower is better')
    print('\n'.join(fid.score_table(
        [(name, {**({'FID': (s['fid'], s['fid_std'])} if 'fid' in s else {}),
                 **{k: v for k, v in s.items() if k not in ('fid', 'fid_std')}})
         for name, s in table.items()], first='method')))
    run_lib.write_json(os.path.join(out_dir, 'scores.json'), dict(step=loaded.step, **table))

  run_lib.main_guard(run)


if __name__ == '__main__':
  cli.run(main)
