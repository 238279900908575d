"""tf-hat-ebm-evaluate-fid: every metric (results.METRICS) of each method a run's kind samples
(its `samplers` hook, samplers.py) beside the test split's, as one EvalResult (results.py).

Feature networks, data activations and their caches are fid.py's.
"""
import os
from typing import Optional

from tf_hat_ebm import outputs
from tf_hat_ebm import registry
from tf_hat_ebm import result_files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm import summaries
from tf_hat_ebm import trained_run
from tf_hat_ebm.evaluation import fid
from tf_hat_ebm.evaluation import metrics as metrics_lib
from tf_hat_ebm.evaluation import samplers as samplers_lib


def load_for_eval(workdir, checkpoint=None, **load):
  """A run as its kind's samplers read it, and those samplers' function."""
  kind = registry.for_config(trained_run.load_config(workdir, load.get('trust_code', False)))
  samplers: Optional[samplers_lib.Samplers] = kind.load_hook('samplers')
  if samplers is None:
    raise ValueError(f'--workdir={workdir}: {kind.name} runs offer no samples to score')
  load_run: Optional[samplers_lib.LoadRun] = kind.load_hook('sampler_run')
  run = (load_run(workdir, checkpoint) if load_run else
         trained_run.load_run(workdir, checkpoint=checkpoint, **load))
  return run, samplers


def score_methods(methods, feature_net, reference, test, num, runs, seed=0, batch_size=250,
                  verbose=True):
  """The EvalResult of `methods` (samplers.Methods): every metric of `runs` sample sets of `num`
  images of each method, and of the `test` activations, against the `reference` activations."""
  values = metrics_lib.score_sets(lambda r: methods.sets(num, seed, batch_size, r), feature_net,
                                  reference, runs, verbose, f'{num} samples per method', num)
  return result_lib.EvalResult(
      methods=dict(methods.labels), metrics=metrics_lib.described(),
      values={m: {k: v[k] for k in methods.labels if k in v} for m, v in values.items()},
      data=metrics_lib.score(reference, test) if test is not None else {},
      data_size=None if test is None else len(test), seed=seed, num_samples=num, runs=runs,
      feature_net=feature_net.name, feature_description=feature_net.description,
      chain=methods.chain)


def table(result, first='samples'):
  """The markdown lines of a result: a row per method (mean ± sample std over its sets), one
  column per metric, and the test split's row."""
  columns = {m.label: m.digits for m in result.metrics.values()}
  size = f' ({result.num_samples})' if result.num_samples else ''
  rows = [(f'{label}{size}',
           {m.label: (result.mean(k, method), result.std(k, method))
            for k, m in result.metrics.items() if result.sets(k, method)})
          for method, label in result.methods.items()]
  if result.data:
    rows.append((f'data: {result.data_split.split("/")[-1]} split ({result.data_size})',
                 {result.metrics[k].label: (v, None) for k, v in result.data.items()}))
  return fid.score_table(rows, first, columns)


def evaluate_run(workdir, num_samples=None, runs=3, batch_size=250,
                 feature_net=None, inception_path=None, feature_cache_dir=None, seed=0,
                 overwrite=False, baselines=True, output=None, features=None,
                 features_range=None, **load):
  """tf-hat-ebm-evaluate-fid: every metric of each method the run's kind samples beside the test
  split's, mean +- std over `runs` sample sets of `num_samples` (default 50,000 with Inception as
  in the paper, 5,000 with the classifier); the Hat EBM's row alone without `baselines`. Printed,
  written to `output` (default <workdir>/fid.json; an existing one only with `overwrite`, never a
  non-finite result) and logged to the workdir's TensorBoard (eval/<metric>_<method>) at the
  checkpoint's step. `features`: a user's feature network (named_features.py; default
  data.features), its input range `features_range` (low, high). Returns the EvalResult."""
  path = output or os.path.join(workdir, 'fid.json')
  named = dict(features_path=features, features_range=features_range)
  # One writer of the output: a second evaluation at once (another --seed) is refused.
  with outputs.ResultWriter([path], overwrite, 'evaluate_fid.py', output and 'output'):
    return _evaluate(path, workdir, num_samples, runs, batch_size, feature_net, inception_path,
                     feature_cache_dir, seed, baselines, load, named)


def check_same_features(path, net):
  """Refuses to replace scores on other features (a run's scores stay comparable)."""
  if not os.path.exists(path):
    return
  try:
    earlier = result_lib.read(path).feature_net
  except (OSError, ValueError):
    return  # unreadable: replaced, as any result file
  if earlier and earlier != net.name:
    raise ValueError(f'{path} holds scores on features {earlier}; these would be on {net.name}: '
                     'scores on different features are never mixed; write them to another '
                     '--output or remove it')


def _evaluate(path, workdir, num_samples, runs, batch_size, feature_net, inception_path,
              feature_cache_dir, seed, baselines, load, named):
  run, samplers_of = load_for_eval(workdir, **load)
  data_cfg = run.config.data
  inception = fid.feature_net_name(data_cfg, feature_net, named['features_path']) == 'inception'
  num_samples = num_samples or (50_000 if inception else 5_000)
  fid.check_memory(num_samples)  # before any network is loaded or trained
  net = fid.feature_network(data_cfg, feature_net, inception_path, feature_cache_dir, **named)
  check_same_features(path, net)
  train, test = (fid.data_activations(data_cfg, split, net, workdir, batch_size)
                 for split in (data_cfg.train_split, data_cfg.test_split))
  methods = samplers_of(run, baselines=baselines)
  result = score_methods(methods, net, train, test, num_samples, runs, seed, batch_size)
  checkpoint = getattr(run, 'checkpoint', None)
  result.step, result.checkpoint = run.step, checkpoint and os.path.basename(checkpoint)
  result.reference = f'{data_cfg.name}/{data_cfg.train_split}'
  result.data_split = f'{data_cfg.name}/{data_cfg.test_split}'
  print(f'\nScores vs {data_cfg.name} {data_cfg.train_split} split ({len(train)} images), '
        f'step {run.step} of {workdir}')
  print(f'features: {net.description}; {runs} sample set(s) (mean ± sample std over sets); '
        f'sampling chain {methods.chain}')
  print('\n'.join(table(result)))
  result_files.write_json(path, result.to_json())
  summaries.log_evaluation(workdir, run.step, summaries.eval_scalars(result),
                           summaries.eval_descriptions(result))
  print(f'written to {path}; TensorBoard: {workdir}/tensorboard (eval/)')
  return result
