"""Side-by-side comparison of a joint Hat EBM's samples with its generator's and DDLS's.

Every method starts from the same latents Z0 ~ N(0, I): the generator alone G(Z0); DDLS (Langevin
in z on ||z||^2/2 - D(G(z)), when the generator comes with a discriminator); the Hat EBM's joint
chain, X = G(Z_K) + Y_K (samplers.joint). On the digits, `digits_scores` scores each method (every
metric with the digits classifier's features, and digits_eval's scores) beside the real test
digits.
"""
import os

from tf_hat_ebm import digits_eval
from tf_hat_ebm import figures
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm import trained_run
from tf_hat_ebm.evaluation import evaluate
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import fid
from tf_hat_ebm.evaluation import samplers

# A kind's `baselines` hook (registry.Kind.hooks): its chain starts from a frozen generator's
# latents, so the generator alone (and DDLS) stand beside the Hat EBM.
Baselines = bool

# Panel labels of the methods, left to right in side_by_side.png.
LABELS = {'generator': 'generator alone G(Z0)', 'ddls': 'DDLS (Langevin in z)',
          'hat_ebm': 'Hat EBM X = G(Z_K) + Y_K'}


def digits_scores(methods, config, first, feature_net, cache_dir, fid_samples=1000, fid_runs=2,
                  seed=0, batch_size=250):
  """The EvalResult of every method and of the real test digits.

  Every metric over `fid_runs` fresh sets of `fid_samples` (none when 0) against the train
  split's features (evaluate.score_methods); digits_eval's scores of the grid samples `first`
  ({method: images})."""
  data = config.data
  if fid_samples > 0:
    train, test = (fid.data_activations(data, split, feature_net, cache_dir, verbose=False)
                   for split in (data.train_split, data.test_split))
    result = evaluate.score_methods(methods, feature_net, train, test, fid_samples, fid_runs,
                                    seed, batch_size, verbose=False)
  else:
    result = result_lib.EvalResult(dict(methods.labels), {}, {}, seed=seed)
  result.reference = f'{data.name}/{data.train_split}'
  result.data_split = f'{data.name}/{data.test_split}'
  grid = {name: digits_eval.scores(x) for name, x in first.items()}
  test = digits_eval.test_digits(data)
  real = digits_eval.scores(test)
  for key, shown in result_lib.metrics_where('grid').items():  # of the grids: one set each
    result.metrics[key] = shown
    result.values[key] = {name: [scores[key]] for name, scores in grid.items()}
    result.data[key] = real[key]
  result.data_size = len(test)
  return result


def compare_run(workdir, out=None, num=100, seed=0, fid_samples=1000, fid_runs=2, batch_size=250,
                feature_cache_dir=None, overwrite=False, **load):
  """tf-hat-ebm-compare: `num` samples of every method from the same latents Z0, as one grid
  each and side by side, into `out` (default <workdir>/compare); on the digits also the scores
  (`digits_scores`: the metrics over `fid_runs` sets of `fid_samples`; 0: none) in scores.json,
  an evaluation result (results.EvalResult)."""
  if fid_samples == 1:
    raise ValueError('--fid_samples must be 0 (no FID) or >= 2 (a covariance needs two)')
  out_dir = out or os.path.join(workdir, 'compare')
  output = outputs.OwnedOutput(out_dir, 'compare_baselines', overwrite, 'out')
  output.check()  # before any work
  run = trained_run.load_run(workdir, **load)
  if not has_baselines(run.kind):
    raise ValueError(f'--workdir={workdir} holds a {run.config.experiment} run, which has no '
                     'generator or DDLS baseline to compare: use sample.py (tf-hat-ebm-sample)')
  methods = samplers.joint(run)
  samples = samplers.sample_all(run.model, methods.sampler, num, seed, batch_size)
  result = None
  with output:
    write_grids(samples, output.staging, f'{run.config.name}, step {run.step}, seed {seed}')
    if run.config.data.name == 'digits':
      net = (features.classifier_features(run.config.data, feature_cache_dir)
             if fid_samples > 0 else None)
      result = digits_scores(methods, run.config, samples, net, workdir, fid_samples, fid_runs,
                             seed, batch_size)
      result.step, result.checkpoint = run.step, os.path.basename(run.checkpoint)
      print_scores(result, net, fid_samples, fid_runs)
      result_files.write_json(os.path.join(output.staging, 'scores.json'), result.to_json())
    output.commit()
  print(f'{run.config.name} at step {run.step}: wrote {", ".join(samples)} and side_by_side.png '
        f'(left to right) to {out_dir}')
  return result


def write_grids(samples, out_dir, what):
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


def print_scores(result, net, fid_samples, fid_runs):
  if fid_samples > 0:
    print(f'{fid_runs} x {fid_samples} samples per method (mean ± sample std over the sets) '
          f'against the train split, {net.description}; '
          f'{", ".join(result_lib.metrics_where("grid"))}: of the grids')
  print('\n'.join(evaluate.table(result, first='method')))


def has_baselines(kind) -> Baselines:
  return bool(kind.hook('baselines', False))
