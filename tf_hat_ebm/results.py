"""The result of an evaluation: per metric, per method, the value of each sample set.

`EvalResult` is what tf-hat-ebm-evaluate-fid writes as <workdir>/fid.json and tf-hat-ebm-compare
as scores.json, and what the model card, TensorBoard and the reproduction read; the schema is in
docs/usage.md. Each metric names its label and decimals in the file, so a reader shows a value
by its metric, never by its shape. A file of before the schema (one list of FIDs per method) is
refused in one line: evaluate_fid.py writes it anew. Pure Python.
"""
import dataclasses
import json
import math
from typing import Dict, List, Optional

SCHEMA = 2


def sample_std(values):
  """The sample std (ddof 1) of the finite values; None below two: the one std of the package's
  results (each metric's spread over sample sets, the reproduction's over seeds)."""
  values = [float(v) for v in values if v is not None and math.isfinite(v)]
  if len(values) < 2:
    return None
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


@dataclasses.dataclass(frozen=True)
class Metric:
  """How a metric is named and shown (its values are in EvalResult.values)."""
  label: str
  digits: int = 2  # decimals shown
  better: str = 'lower'  # 'lower', 'higher' or 'neither'
  description: str = ''


FID = Metric('FID', 2, 'lower', 'Frechet distance between Gaussians fitted to the features of '
             'the samples and of the reference (Heusel et al. 2017)')
# KID as this version scores it; results made before recorded a KID of label 'KID' on raw
# features (MMD^2 itself, 4 decimals), which no reader compares with this one (check_comparable).
KID = Metric('KID ×10³', 2, 'lower', '10^3 x the unbiased MMD^2 with a cubic polynomial kernel '
             '(Binkowski et al. 2018) of the features standardized by the reference\'s '
             'per-dimension mean and sd: ~0 for samples of the data distribution at any N')


@dataclasses.dataclass(frozen=True)
class Scored:
  """A row of METRICS: how results show the metric, what scores it, and who shows it."""
  metric: Metric
  # 'module:function' of (reference features [n, d], sample features [m, d]) -> float, scored on
  # every sample set (metrics.score_sets); '' for a score of the grids alone
  function: str = ''
  grid: bool = False  # tf-hat-ebm-compare scores each method's grid samples (digits_eval.scores)
  report: bool = False  # a column of the reproduction report's tables (a few: they stay readable)


# The one table of the metrics: a result's columns come in this order.
METRICS = {
    'fid': Scored(FID, 'tf_hat_ebm.evaluation.fid:frechet_distance', report=True),
    'kid': Scored(KID, 'tf_hat_ebm.evaluation.metrics:kid', report=True),
    'precision': Scored(Metric(
        'precision', 3, 'higher', 'share of samples inside the k-NN manifold (k = 3) of the '
        'reference features (Kynkaanniemi et al. 2019): low is samples unlike any data'),
        'tf_hat_ebm.evaluation.metrics:precision'),
    'recall': Scored(Metric(
        'recall', 3, 'higher', "share of the reference inside the samples' k-NN manifold "
        '(k = 3): low is missing modes'), 'tf_hat_ebm.evaluation.metrics:recall'),
    'confidence': Scored(Metric(
        'confidence', 3, 'higher', "mean max class probability of digits_eval's classifier"),
        grid=True),
    'digit_is': Scored(Metric(
        'digit_is', 3, 'higher', 'exp(E KL(p(y|x) || p(y))), an Inception-Score analogue, at '
        'most 10'), grid=True),
    'nn_dist': Scored(Metric(
        'nn_dist', 3, 'neither', 'mean L2 distance (8x8) to the nearest training digit: far '
        'is no digit, near 0 is a copy'), grid=True),
}


def metrics_where(flag):
  """{metric: Metric} of the METRICS rows whose `flag` ('function', 'grid', 'report') is set."""
  return {name: row.metric for name, row in METRICS.items() if getattr(row, flag)}


@dataclasses.dataclass
class EvalResult:
  """Scores of every method of a run (and of the test split) against one reference."""
  methods: Dict[str, str]  # method -> its row label, in table order
  metrics: Dict[str, Metric]  # metric -> how it is shown, in column order
  values: Dict[str, Dict[str, List[float]]]  # metric -> method -> the value of each sample set
  # metric -> the held-out split against the reference: how far from 0 real data scores
  data: Dict[str, float] = dataclasses.field(default_factory=dict)
  step: Optional[int] = None
  checkpoint: Optional[str] = None
  seed: Optional[int] = None
  num_samples: Optional[int] = None  # per method and sample set
  runs: Optional[int] = None  # sample sets per method
  data_split: str = ''  # '<dataset>/<split>' of `data`, the held-out split
  data_size: Optional[int] = None  # its images
  feature_net: str = ''
  feature_description: str = ''
  reference: str = ''  # '<dataset>/<split>' the metrics compare with
  chain: str = ''

  def sets(self, metric, method) -> List[float]:
    """The value of each sample set ([] when the method has none)."""
    return list(self.values.get(metric, {}).get(method, []))

  def mean(self, metric, method) -> Optional[float]:
    values = self.sets(metric, method)
    return sum(values) / len(values) if values else None

  def std(self, metric, method) -> Optional[float]:
    """The sample std (ddof 1) over the sample sets; None with fewer than two."""
    return sample_std(self.sets(metric, method))

  def to_json(self):
    return {'schema': SCHEMA, **dataclasses.asdict(self)}

  @classmethod
  def from_json(cls, saved):
    """The result of a JSON object of this schema (a ValueError for anything else)."""
    if not isinstance(saved, dict):
      raise ValueError(f'an evaluation result is a JSON object, not {type(saved).__name__}')
    if 'schema' not in saved:
      raise ValueError('an evaluation result without a schema (one list of FIDs per method, '
                       'as written before schema 2): run evaluate_fid.py on its workdir again')
    if saved['schema'] != SCHEMA:
      raise ValueError(f'an evaluation result of schema {saved["schema"]!r}; this version reads '
                       f'schema {SCHEMA}')
    fields = {f.name for f in dataclasses.fields(cls)}
    for field in ('methods', 'metrics', 'values'):  # empty when none was scored (compare)
      if not isinstance(saved.get(field), dict):
        raise ValueError(f'field {field} is {json.dumps(saved.get(field))[:40]}, not an object '
                         '(a malformed evaluation result)')
    try:
      values = {k: v for k, v in saved.items() if k in fields}
      values['metrics'] = {k: _metric(m, k) for k, m in saved['metrics'].items()}
      values['values'] = {metric: {method: [float(v) for v in sets] for method, sets in
                                   by_method.items()} for metric, by_method in
                          saved['values'].items()}
      return cls(**values)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
      if str(e).startswith('field '):  # named already
        raise ValueError(str(e)) from None
      raise ValueError(f'a malformed evaluation result ({type(e).__name__}: {e})') from None


def _metric(saved, key='?'):
  metric = Metric(**saved)
  for field, ok in (('label', isinstance(metric.label, str)),
                    ('digits', isinstance(metric.digits, int) and not isinstance(
                        metric.digits, bool) and 0 <= metric.digits <= 10),
                    ('better', isinstance(metric.better, str))):
    if not ok:
      raise ValueError(f'field metrics.{key}.{field} is {json.dumps(getattr(metric, field))}, '
                       f'not {"a whole number of decimals 0-10" if field == "digits" else "text"}')
  return metric


def from_record(result):
  """The EvalResult a reproduction stage's record holds, or None for another result (an OOD
  stage's {set: AUROC})."""
  if not isinstance(result, dict) or 'schema' not in result:
    return None
  return EvalResult.from_json(result)


def check_comparable(results):
  """Refuses to put side by side scores made with different feature networks or metric
  definitions (FIDs of two classifiers, a KID of raw features beside one of standardized
  features): a ValueError naming both. results: [(name, EvalResult)]."""
  seen_net, seen_metric = {}, {}
  for name, result in results:
    if result.feature_net:
      seen_net.setdefault(result.feature_net, name)
      if len(seen_net) > 1:
        (a, first), (b, second) = list(seen_net.items())[:2]
        raise ValueError(f'scores made with different feature networks cannot be compared: '
                         f'{first} ({a}) and {second} ({b}); score them again with one network')
    for key, metric in result.metrics.items():
      other, where = seen_metric.setdefault(key, (metric, name))
      if other != metric:
        raise ValueError(f'scores of different definitions of {key} cannot be compared: {where} '
                         f'({other.label}) and {name} ({metric.label}); score them again with '
                         'one version')


def read(path):
  """The result in a local JSON file; a ValueError naming the file when it holds none."""
  with open(path) as f:
    saved = json.load(f)
  try:
    return EvalResult.from_json(saved)
  except ValueError as e:
    raise ValueError(f'{path}: {e}') from None
