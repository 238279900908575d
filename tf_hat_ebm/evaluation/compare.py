"""Side-by-side comparison of a joint Hat EBM's samples with its generator's and DDLS's.

Every method starts from the same latents Z0 ~ N(0, I): the generator alone G(Z0); DDLS (Langevin
in z on ||z||^2/2 - D(G(z)), when the generator comes with a discriminator); the Hat EBM's joint
chain, X = G(Z_K) + Y_K. On the digits, `digits_table` scores each method (small-data FID with the
digits classifier's features, and digits_eval's scores) with the real test digits as reference.
"""
import os

import numpy as np
import tensorflow as tf

from tf_hat_ebm import digits_eval
from tf_hat_ebm import export
from tf_hat_ebm import figures
from tf_hat_ebm import langevin
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import trained_run
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import fid

# A kind's `baselines` hook (registry.Kind.hooks): its chain starts from a frozen generator's
# latents, so the generator alone (and DDLS) stand beside the Hat EBM.
Baselines = bool

# Panel labels of the methods, left to right in side_by_side.png.
LABELS = {'generator': 'generator alone G(Z0)', 'ddls': 'DDLS (Langevin in z)',
          'hat_ebm': 'Hat EBM X = G(Z_K) + Y_K'}


def make_sampler(run, baselines=True):
  """f(z0, seed) -> {'generator', 'ddls' (when G comes with a discriminator), 'hat_ebm'} tensors
  of a restored joint run (trained_run.load_run); only {'hat_ebm'} without `baselines`.

  Every method starts from the same Z0; the chains' noise comes from a generator seeded `seed`.
  The Hat EBM samples through the exported module's chain: what export.py saves is what is scored.
  """
  model = run.model
  module = export.build_module(run)
  ddls = langevin.ChainSettings.from_config(run.config.ddls)
  rng = tf.random.Generator.from_seed(0)

  @tf.function
  def sample(z0, seed):
    rng.reset_from_seed(seed)
    # G alone sees the chain's Z0 (on the decoder's sphere when the chain keeps Z there).
    out = {}
    if baselines:
      z_start = langevin.initial_latent(model.generator, rng, model.sampling, z0=z0)
      out['generator'] = langevin.generate(model.generator, z_start)
    if baselines and model.discriminator is not None:
      out['ddls'] = langevin.sample_ddls(model.discriminator, model.generator, rng, ddls,
                                         z0=z0)[1]
    out['hat_ebm'] = module.chain(rng, latents=z0)['images']
    # every method is scored as an image in the data range, as the Hat EBM's samples are
    return {k: tf.clip_by_value(v, -1.0, 1.0) for k, v in out.items()}

  return sample


def latent_batches(model, num, seed, batch_size=250, run=0):
  """(Z0, seed) of each batch of `num` latents; batch b draws the stream (seed, b, run)."""
  for b, start in enumerate(range(0, num, batch_size)):
    n = min(batch_size, num - start)
    s = samples_lib.stream_seed(seed, b, run)
    z0 = tf.random.Generator.from_seed(s).normal([n, *model.generator.latent_shape])
    yield z0, tf.constant(s, tf.int64)


def sample_all(model, sampler, num, seed, batch_size=250):
  """`num` samples of every method, in batches; batch b draws the stream (seed, b)."""
  parts = [{k: v.numpy() for k, v in sampler(z0, s).items()}
           for z0, s in latent_batches(model, num, seed, batch_size)]
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def method_fids(model, sampler, feature_net, reference, num, runs, seed=0, batch_size=250,
                verbose=False):
  """{method: [FID per run]}: every method's samples from the same Z0, scored against `reference`
  activations with one feature network (fid.fids_over_runs). Run r draws the streams
  (seed, batch, r + 1): run 0 of the grids (sample_all) is never scored."""
  def batches(r):
    for z0, s in latent_batches(model, num, seed, batch_size, r + 1):
      yield sampler(z0, s)
  return fid.fids_over_runs(batches, feature_net, reference, runs, verbose,
                            f'{num} samples per method', total=num)


def digits_table(model, sampler, config, first, feature_net, cache_dir, fid_samples=1000,
                 fid_runs=2, seed=0, batch_size=250):
  """Scores of every method and of the real test digits.

  `first` are the grid samples ({method: images}); the FID of each method is the mean and std over
  `fid_runs` fresh sets of `fid_samples` (none when 0), against the train split's features.
  """
  table = {name: digits_eval.scores(x) for name, x in first.items()}
  table['test digits'] = digits_eval.scores(digits_eval.test_digits(config.data))
  if fid_samples > 0:
    data = config.data
    train = fid.data_activations(data, data.train_split, feature_net, cache_dir, verbose=False)
    test = fid.data_activations(data, data.test_split, feature_net, cache_dir, verbose=False)
    runs = method_fids(model, sampler, feature_net, train, fid_samples, fid_runs, seed, batch_size)
    for name, values in runs.items():
      table[name]['fid'], table[name]['fid_std'] = fid.mean_std(values)
    table['test digits'].update(fid=fid.frechet_distance(train, test), fid_std=None)
  return table


def compare_run(workdir, out=None, num=100, seed=0, fid_samples=1000, fid_runs=2, batch_size=250,
                feature_cache_dir=None, overwrite=False, **load):
  """tf-hat-ebm-compare: `num` samples of every method from the same latents Z0, as one grid
  each and side by side, into `out` (default <workdir>/compare); on the digits also the scores
  (`digits_table`, FID over `fid_runs` sets of `fid_samples`; 0: none) in scores.json."""
  if fid_samples == 1:
    raise ValueError('--fid_samples must be 0 (no FID) or >= 2 (a covariance needs two)')
  out_dir = out or os.path.join(workdir, 'compare')
  output = outputs.OwnedOutput(out_dir, 'compare_baselines', overwrite, 'out')
  output.check()  # before any work
  run = trained_run.load_run(workdir, **load)
  if not has_baselines(run.kind):
    raise ValueError(f'--workdir={workdir} holds a {run.config.experiment} run, which has no '
                     'generator or DDLS baseline to compare: use sample.py (tf-hat-ebm-sample)')
  sampler = make_sampler(run)
  samples = sample_all(run.model, sampler, num, seed, batch_size)
  table = None
  with output:
    write_grids(samples, output.staging, f'{run.config.name}, step {run.step}, seed {seed}')
    if run.config.data.name == 'digits':
      net = (features.classifier_features(run.config.data, feature_cache_dir)
             if fid_samples > 0 else None)
      table = digits_table(run.model, sampler, run.config, samples, net, workdir, fid_samples,
                           fid_runs, seed, batch_size)
      print_scores(table, net, fid_samples, fid_runs)
      result_files.write_json(os.path.join(output.staging, 'scores.json'),
                              dict(step=run.step, **table))
    output.commit()
  print(f'{run.config.name} at step {run.step}: wrote {", ".join(samples)} and side_by_side.png '
        f'(left to right) to {out_dir}')
  return table


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


def print_scores(table, net, fid_samples, fid_runs):
  if fid_samples > 0:
    print(f'FID: {fid_runs} x {fid_samples} samples per method (mean ± sample std over the '
          f'runs) against the train split, {net.description}; lower is better')
  print('\n'.join(fid.score_table(
      [(name, {**({'FID': (s['fid'], s['fid_std'])} if 'fid' in s else {}),
               **{k: v for k, v in s.items() if k not in ('fid', 'fid_std')}})
       for name, s in table.items()], first='method')))


def has_baselines(kind) -> Baselines:
  return bool(kind.hook('baselines', False))
