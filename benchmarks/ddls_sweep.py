r"""DDLS's step size and steps by a small sweep on the digits, scored as compare_baselines scores.

  python benchmarks/ddls_sweep.py --workdir=workdir/digits_refine --seed=7

The default grid (eps 0.1-0.5, 150-1,200 steps) brackets the digits config's 0.3 x 300 steps on
every side; the config's setting is the best mean of the bracket measured around it (the commands
and table: docs/experiments.md). Give --step_sizes and --steps to run a part of the grid.

DDLS (Che et al. 2020) samples Langevin in z on ||z||^2/2 - D(G(z)) with the refinement run's
SN-GAN generator and discriminator (the hat is not used). Each setting draws --fid_runs sets of
--fid_samples from the latent streams of --seed (give a seed the reported tables do not use) and
gets every metric of evaluation/metrics.py (FID, KID, ...) against the train split with the digits
classifier's features, as compare_baselines.py. Prints one row per setting and writes them to
--out (JSON); the best setting is the one of lowest FID.
"""
import argparse
import dataclasses
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--workdir', required=True, help='a refinement run (its SN-GAN G and D)')
  parser.add_argument('--step_sizes', default='0.1,0.2,0.3,0.5')
  parser.add_argument('--steps', default='150,300,600,1200')
  parser.add_argument('--seed', type=int, default=7)
  parser.add_argument('--fid_samples', type=int, default=2000)
  parser.add_argument('--fid_runs', type=int, default=2)
  parser.add_argument('--out', default=None, help='default: <workdir>/ddls_sweep.json')
  parser.add_argument('--cache_dir', default=None,
                      help="the train split's features (default: the --out directory)")
  args = parser.parse_args()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import langevin  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import features  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import fid  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import metrics  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import samplers  # pylint: disable=g-import-not-at-top

  run = trained_run.load_run(args.workdir)
  model, data = run.model, run.config.data
  if model.discriminator is None:
    sys.exit(f'--workdir={args.workdir} has no discriminator: DDLS needs a refinement run')
  net = features.classifier_features(data, None)
  out = args.out or os.path.join(args.workdir, 'ddls_sweep.json')
  cache = args.cache_dir or os.path.dirname(os.path.abspath(out))
  train = fid.data_activations(data, data.train_split, net, cache, verbose=False)
  base = langevin.ChainSettings.from_config(run.config.ddls)
  rng = tf.random.Generator.from_seed(0)
  rows = []
  settings = [(float(e), int(k)) for e in args.step_sizes.split(',')
              for k in args.steps.split(',')]
  for step_size, steps in [(0.0, 0)] + settings:  # (0, 0): G(Z0) alone, the reference row
    chain = dataclasses.replace(base, step_size=step_size, steps=steps)

    @tf.function
    def sample(z0, seed, chain=chain):
      rng.reset_from_seed(seed)
      x = langevin.sample_ddls(model.discriminator, model.generator, rng, chain, z0=z0)[1]
      return {'ddls': tf.clip_by_value(x, -1.0, 1.0)}

    sets = samplers.latent_sets(model, sample)
    scores = metrics.score_sets(lambda r, sets=sets: sets(args.fid_samples, args.seed, 250, r),
                                net, train, args.fid_runs, verbose=False)
    row = dict(step_size=step_size, steps=steps)
    for name, values in scores.items():
      row[name], row[f'{name}_std'] = fid.mean_std(values['ddls'])
    rows.append(row)
    print(f'step_size {step_size:g} steps {steps}: ' + ', '.join(
        f'{shown.label} {row[name]:.{shown.digits}f} ± {row[name + "_std"] or 0:.{shown.digits}f}'
        for name, shown in metrics.described().items()), flush=True)
  with open(out, 'w') as f:
    json.dump(dict(workdir=args.workdir, seed=args.seed, fid_samples=args.fid_samples,
                   fid_runs=args.fid_runs, rows=rows), f, indent=2)
  best = min(rows[1:], key=lambda r: r['fid'])
  print(f'best: step_size {best["step_size"]:g}, steps {best["steps"]} (FID {best["fid"]:.2f}); '
        f'written to {out}')


if __name__ == '__main__':
  main()
