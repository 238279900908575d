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
flags.DEFINE_integer('num', 100, 'Samples per method.', lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seed of Z0 and of the chains.', lower_bound=0)
flags.DEFINE_integer('fid_samples', 1000, 'Digits: samples per method and run for the small-data '
                     'FID (0: no FID).', lower_bound=0)
flags.DEFINE_integer('fid_runs', 2, 'Digits: independent sample sets for the FID (mean +- std).',
                     lower_bound=1)
flags.DEFINE_integer('batch_size', 250, 'Samples per chain batch.', lower_bound=1)
cli.define_checkpoint_and_overwrite_flags()
FLAGS = flags.FLAGS
cli.answer_help()

import numpy as np  # noqa: E402
from tf_hat_ebm import images as images_lib  # noqa: E402
from tf_hat_ebm import registry  # noqa: E402
from tf_hat_ebm import run_lib  # noqa: E402
from tf_hat_ebm import runs  # noqa: E402
from tf_hat_ebm.evaluation import compare  # noqa: E402
from tf_hat_ebm.evaluation import features  # noqa: E402


def write(samples, out_dir):
  grids = {name: images_lib.grid(images_lib.to_uint8(x)) for name, x in samples.items()}
  for name, image in grids.items():
    images_lib.write_png(os.path.join(out_dir, f'{name}.png'), image)
  gap = np.full([next(iter(grids.values())).shape[0], 6, grids['generator'].shape[2]], 255,
                np.uint8)
  row = [part for image in grids.values() for part in (image, gap)][:-1]
  images_lib.write_png(os.path.join(out_dir, 'side_by_side.png'), np.concatenate(row, axis=1))


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
      write(samples, out.staging)
      if config.data.name == 'digits':
        scores(loaded, sampler, samples, out.staging)
      out.commit()
    print(f'{config.name} at step {step}: wrote {", ".join(samples)} and side_by_side.png '
          f'(left to right) to {out_dir}')

  def scores(loaded, sampler, samples, out_dir):
    """The digits table (classifier FID, ...) of every method, printed and in scores.json."""
    config = loaded.config
    net = features.classifier_features(config.data, workdir) if FLAGS.fid_samples > 0 else None
    table = compare.digits_table(loaded.model, sampler, config, samples, net, workdir,
                                 FLAGS.fid_samples, FLAGS.fid_runs, FLAGS.seed, FLAGS.batch_size)
    if FLAGS.fid_samples > 0:
      print(f'FID: {FLAGS.fid_runs} x {FLAGS.fid_samples} samples per method against the '
            f'train split, digits classifier features; lower is better')
    for name, s in table.items():
      print(f'  {name:12s} ' + '  '.join(f'{k} {v:.3f}' for k, v in s.items()))
    run_lib.write_json(os.path.join(out_dir, 'scores.json'), dict(step=loaded.step, **table))

  run_lib.main_guard(run)


if __name__ == '__main__':
  cli.run(main)
