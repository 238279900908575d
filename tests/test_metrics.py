"""The evaluation seam: every metric of results.METRICS on one pool of features, KID against
TF-GAN and on real digits, the typed result written and read back (one without a schema refused)."""
import json
import os
import shutil

import numpy as np
import pytest

from tf_hat_ebm import export
from tf_hat_ebm import results as result_lib
from tf_hat_ebm import summaries
from tf_hat_ebm import trained_run
from tf_hat_ebm.evaluation import evaluate
from tf_hat_ebm.evaluation import features
from tf_hat_ebm.evaluation import fid
from tf_hat_ebm.evaluation import metrics
from tf_hat_ebm.reproduction import report
from tf_hat_ebm.reproduction import stages
from tf_hat_ebm.reproduction import tables

from conftest import REPO, fid_result, run_command, tiny


@pytest.fixture(scope='module')
def test_digits(tmp_path_factory):
  """The digits classifier's features of the 297 test digits (the classifier of every FID, cached
  once per session in $TF_HAT_EBM_CACHE)."""
  data = tiny().data
  return fid.data_activations(data, 'test', features.classifier_features(data, verbose=False),
                              str(tmp_path_factory.mktemp('stats')), verbose=False)


@pytest.mark.parametrize('sizes', [(100, 100), (1500, 1000), (50, 2100)])
def test_kid_is_tf_gans_block_estimator(sizes):
  tfgan = pytest.importorskip('tensorflow_gan')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  rs = np.random.RandomState(0)
  a, b = rs.normal(size=[sizes[0], 8]), rs.normal(size=[sizes[1], 8]) + 0.1
  expected = tfgan.eval.kernel_classifier_distance_from_activations(
      tf.constant(a), tf.constant(b), dtype=tf.float64)
  assert metrics.kernel_distance(a, b) == pytest.approx(float(expected), rel=1e-9, abs=1e-12)


def test_kid_of_disjoint_real_draws_is_near_zero_where_fid_is_not(test_digits):
  """Two disjoint draws of 100 test digits: FID's small-sample bias is far above 0 (about 13 here),
  KID's mean over draws is within 3 standard errors of 0."""
  rs = np.random.RandomState(0)
  kids, fids = [], []
  for _ in range(20):
    order = rs.permutation(len(test_digits))
    a, b = test_digits[order[:100]], test_digits[order[100:200]]
    kids.append(metrics.kid(a, b))
    fids.append(fid.frechet_distance(a, b))
  assert abs(np.mean(kids)) < 3 * np.std(kids, ddof=1) / np.sqrt(len(kids))
  assert min(fids) > 2.0 and np.mean(fids) > 10 * np.std(fids, ddof=1) / np.sqrt(len(fids))
  # a draw of other images is no draw of the data: KID far above its spread
  shifted = metrics.kid(test_digits[:100], test_digits[100:200] * 1.3)
  assert shifted > 10 * np.std(kids, ddof=1)


def test_held_out_digits_score_kid_0_within_its_sd(test_digits, tmp_path):
  """With the shipped classifier: the test split's KID x10^3 against the train split (-3.153 on
  this machine) lies within the spread of KIDs of random 1,500 / 297 splits of all 1,797 digits
  (sd about 8 here), whose mean is 0 within 3 standard errors."""
  data = tiny().data
  train = fid.data_activations(data, 'train', features.classifier_features(data, verbose=False),
                               str(tmp_path), verbose=False)
  value = metrics.kid(train, test_digits)
  assert value == pytest.approx(-3.153, abs=0.01)
  every, rs = np.concatenate([train, test_digits]), np.random.RandomState(0)
  null = []
  for _ in range(20):
    order = rs.permutation(len(every))
    null.append(metrics.kid(every[order[:1500]], every[order[1500:]]))
  assert abs(np.mean(null)) < 3 * np.std(null, ddof=1) / np.sqrt(len(null))
  assert abs(value) < 2 * np.std(null, ddof=1) and 3 < np.std(null, ddof=1) < 20


def test_precision_and_recall_tell_poor_samples_from_missing_modes(test_digits):
  assert metrics.manifold_share(np.arange(5.0)[:, None], [[4.5], [5.5], [-1.5]], k=1) == 1 / 3
  _, labels = features.labelled_arrays(tiny().data, 'test')  # in the order of the features
  order = np.random.RandomState(0).permutation(len(test_digits))
  a, b = test_digits[order[:140]], test_digits[order[140:280]]
  assert metrics.precision(a, b) > 0.85 and metrics.recall(a, b) > 0.85  # real against real
  zeros = test_digits[labels == 0]  # a collapsed model: one class of real digits
  assert metrics.precision(a, zeros) > 0.85 and metrics.recall(a, zeros) < 0.2
  unlike = test_digits[order[140:280]] * 3.0  # images unlike any data, spread as widely
  assert metrics.precision(a, unlike) < 0.2


def test_every_metric_scores_one_pool():
  rs = np.random.RandomState(1)
  reference, pool = rs.normal(size=[60, 4]), rs.normal(size=[40, 4])
  scores = metrics.score(reference, pool)
  assert list(scores) == list(metrics.described())  # every metric a function scores, in order
  assert 'fid' in scores and not set(scores) & set(result_lib.metrics_where('grid'))
  assert scores['fid'] == fid.frechet_distance(reference, pool)
  assert scores['kid'] == metrics.kid(reference, pool)


def test_score_passes_the_reference_first_so_precision_and_recall_keep_their_meaning():
  # A collapsed pool (every sample on one reference point's doorstep) looks like data but covers
  # little of it: high precision, low recall. Swapped arguments in score() would swap the two
  # in every result; these values are far apart, so the swap fails here.
  rs = np.random.RandomState(2)
  reference = rs.normal(size=[200, 2])
  collapsed = reference[0] + 0.01 * rs.normal(size=[100, 2])
  scores = metrics.score(reference, collapsed)
  assert scores['precision'] == 1.0 and scores['recall'] < 0.1
  wide = 5.0 * rs.normal(size=[200, 2])  # spread far past the data: covers it, mostly unlike it
  scores = metrics.score(reference, wide)
  assert scores['recall'] > 0.7 and scores['precision'] < 0.5


def test_kid_is_tf_gans_estimator_on_standardized_features_times_1e3():
  rs = np.random.RandomState(2)
  reference = rs.gamma(2.0, 3.0, size=[300, 6]) * [1, 2, 5, 10, 20, 0]  # ReLU-like, a dead unit
  samples = rs.gamma(2.0, 3.3, size=[200, 6]) * [1, 2, 5, 10, 20, 0]
  mean, sd = reference.mean(0), reference.std(0)
  sd[-1] = 1.0  # a unit the reference never fires keeps its units
  expected = 1e3 * metrics.kernel_distance((reference - mean) / sd, (samples - mean) / sd)
  assert metrics.kid(reference, samples) == pytest.approx(expected, rel=1e-12)
  # the same in any feature units: a per-unit scale and shift leave it as it was (factor 1),
  # while the raw MMD^2 of the cubic kernel moves by orders of magnitude
  scale, shift = np.array([0.1, 1, 3, 10, 30, 1]), np.array([5, 0, -1, 2, 0, 0])
  assert metrics.kid(reference * scale + shift, samples * scale + shift) == pytest.approx(
      metrics.kid(reference, samples), rel=1e-9)
  raw = metrics.kernel_distance(reference, samples)
  assert abs(metrics.kernel_distance(reference * 10, samples * 10) / raw) > 1e3


def test_evaluate_fid_writes_the_result_it_prints_and_logs(trained_workdir, tmp_path):
  workdir = str(tmp_path / 'run')
  shutil.copytree(trained_workdir, workdir)
  out = run_command('evaluate_fid.py', f'--workdir={workdir}', '--num_samples=20', '--runs=2',
                    '--batch_size=10')
  assert out.returncode == 0, out.stderr[-2000:]
  result = result_lib.read(os.path.join(workdir, 'fid.json'))
  with open(os.path.join(workdir, 'fid.json')) as f:
    saved = json.load(f)
  assert saved['schema'] == result_lib.SCHEMA == 2
  assert result_lib.EvalResult.from_json(saved).to_json() == saved  # read back unchanged
  assert list(result.methods) == ['hat_ebm', 'generator']
  assert list(result.metrics) == list(metrics.described())
  assert (result.step, result.checkpoint, result.seed) == (2, 'ckpt-2', 0)
  assert (result.num_samples, result.runs, result.data_size) == (20, 2, 297)
  assert result.reference == 'digits/train' and result.data_split == 'digits/test'
  assert result.feature_net.startswith('classifier_')
  assert all(len(result.sets(metric, method)) == 2 for metric in result.metrics
             for method in result.methods)
  assert all(result.std('fid', method) > 0 for method in result.methods)  # sets share no chain
  rows = [line for line in out.stdout.splitlines() if line.startswith('| ')]
  assert [c.strip() for c in rows[0].split('|')[1:-1]] == ['samples'] + [
      m.label for m in result.metrics.values()]
  fid_cell = rows[1].split('|')[2].strip()
  assert fid_cell == (f'{result.mean("fid", "hat_ebm"):.2f} ± '
                      f'{result.std("fid", "hat_ebm"):.2f}')
  assert rows[-1].split('|')[1].strip() == 'data: test split (297)'
  logged = summaries.read_scalars(os.path.join(workdir, 'tensorboard'))
  for metric in result.metrics:
    mean = result.mean(metric, 'hat_ebm')
    assert logged[f'eval/{metric}_hat_ebm'] == [(2, pytest.approx(mean))]
    assert logged[f'eval/{metric}_data_test_vs_train'] == [
        (2, pytest.approx(result.data[metric]))]
  # The model card shows each value by its metric's label.
  card = export.build_module(trained_run.load_run(workdir)).asset_texts['README.md']
  shown = [line for line in card.splitlines() if line.startswith('- ') and ' samples, step 2): '
           in line]
  assert len(shown) == len(result.metrics) * len(result.methods)
  assert [line.split(' (')[0] for line in shown[:2]] == ['- FID hat\\_ebm', '- FID generator']
  kid = result.metrics['kid']
  assert (f'- {kid.label} generator ({result.feature_net.replace("_", chr(92) + "_")}, 20 samples, '
          f'step 2): {result.mean("kid", "generator"):.{kid.digits}f} ± '
          f'{result.std("kid", "generator"):.{kid.digits}f}') in shown


def test_a_fid_json_without_a_schema_is_one_line_naming_it_and_the_command(tmp_path):
  old = dict(step=7, feature_net='classifier_ab', num_samples=20, runs=2, reference='digits/train',
             data_test_vs_train=3.5, hat_ebm=[10.0, 12.0], generator=[20.0, 21.0])
  path = tmp_path / 'fid.json'
  path.write_text(json.dumps(old))
  with pytest.raises(ValueError) as e:
    result_lib.read(str(path))
  assert str(e.value) == (f'{path}: an evaluation result without a schema (one list of FIDs per '
                          'method, as written before schema 2): run evaluate_fid.py on its '
                          'workdir again')
  # a record of one (FIDs and their means) holds no evaluation, nor does an OOD stage's
  assert result_lib.from_record(dict(hat_ebm=11.0, hat_ebm_runs=[10.0, 12.0], data=3.5)) is None
  assert result_lib.from_record({'noise': 0.9}) is None
  with pytest.raises(ValueError, match='schema 3'):
    result_lib.EvalResult.from_json(dict(schema=3))
  # The committed digits reproduction: every FID of its records read as the runner stored it.
  with open(os.path.join(REPO, 'docs', 'reproduction', 'digits', 'report.json')) as f:
    stages = json.load(f)['stages']
  read = set()
  for name, record in stages.items():
    evaluation = result_lib.from_record(record.get('result'))
    for method in evaluation.methods if evaluation else ():
      runs = record['result']['values']['fid'][method]
      assert evaluation.mean('fid', method) == pytest.approx(sum(runs) / len(runs))
      read.add(name)
  # every stage whose record rests on its own fid.json is read as an evaluation, and no other
  scored = {name for name, record in stages.items() if any(
      f.startswith(f'{name}/') and f.endswith('/fid.json') for f in record.get('files') or ())}
  assert scored and read == scored


def test_report_tables_show_the_metrics_flagged_for_the_report_and_keep_the_rest():
  def stage(hat, gen):
    return {'result': result_lib.EvalResult(
        methods={'hat_ebm': 'Hat EBM', 'generator': 'G(Z)'}, metrics=metrics.described(),
        values={'fid': {'hat_ebm': hat, 'generator': gen},
                'kid': {'hat_ebm': [v / 100 for v in hat], 'generator': [v / 100 for v in gen]},
                'precision': {'hat_ebm': [0.5, 0.7], 'generator': [0.2, 0.4]}},
        runs=2).to_json()}

  records = {'synthesis_s0': stage([10.0, 12.0], [20.0, 22.0]),
             'synthesis_s1': stage([14.0, 16.0], [30.0, 32.0])}
  lines, rows = tables.synthesis_table(records, 'digits', [0, 1], [('synthesis', 'digits_synth')])
  header = [c.strip() for c in lines[2].split('|')[1:-1]]
  assert header[1:4] == ['ours: FID ± sd over 2 seeds', 'eval sd (2 FID runs)',
                         'ours: KID ×10³ ± sd']
  hat = [c.strip() for c in lines[4].split('|')[1:-1]]
  assert hat[1] == '13.00 ± 2.83' and hat[3] == '0.13 ± 0.03'
  assert rows[0]['others']['kid']['mean'] == pytest.approx(0.13)
  # precision is not flagged for the report: in its data, never a column
  assert not result_lib.METRICS['precision'].report and 'precision' not in lines[2]
  assert rows[0]['others']['precision']['mean'] == pytest.approx(0.6)
  # Results of FIDs alone: no column for what they lack.
  alone = {'synthesis_s0': {'result': fid_result(hat_ebm=[10.0, 12.0])}}
  lines, _ = tables.synthesis_table(alone, 'digits', [0], [('synthesis', 'digits_synth')])
  assert 'KID' not in lines[2] and '| 11.00 | 1.41 |' in lines[4]


def data_stage(hat, data_kid, feature_net='classifier_c3377ecd', shown=None):
  """A synthesis stage's record: FID and KID of the Hat EBM and of the held-out split."""
  shown = shown or metrics.described()
  return {'result': result_lib.EvalResult(
      methods={'hat_ebm': 'Hat EBM'}, metrics={k: shown[k] for k in ('fid', 'kid')},
      values={'fid': {'hat_ebm': hat}, 'kid': {'hat_ebm': [10 * v for v in hat]}},
      data={'fid': 2.9645, 'kid': data_kid}, runs=2, data_split='digits/test', data_size=297,
      reference='digits/train', feature_net=feature_net).to_json()}


def test_report_tables_read_kid_by_the_data_row_and_refuse_mixed_features():
  records = {'synthesis_s0': data_stage([1.0, 2.0], -3.153),
             'synthesis_s1': data_stage([2.0, 3.0], -3.153)}
  lines, _ = tables.synthesis_table(records, 'digits', [0, 1], [('synthesis', 'digits_synth')])
  rows = [[c.strip() for c in line.split('|')[1:-1]] for line in lines if line.startswith('| ')]
  assert rows[0][3] == 'ours: KID ×10³ ± sd' and rows[1][3] == '20.00 ± 7.07'
  assert rows[-1][:4] == ['data: digits/test (297 images) vs digits/train', '2.96 ± 0.00', '–',
                          '-3.15 ± 0.00']
  assert set(rows[-1][4:]) == {'–'} and len(rows[-1]) == len(rows[0])
  # results made with the raw KID (label 'KID', 4 decimals) render as they did: no data row
  old = result_lib.Metric('KID', 4, 'lower', 'unbiased MMD^2 of the features')
  legacy = {k: data_stage([1.0, 2.0], -22.9, 'classifier_2c506187', {
      'fid': result_lib.FID, 'kid': old}) for k in records}
  lines, _ = tables.synthesis_table(legacy, 'digits', [0, 1], [('synthesis', 'digits_synth')])
  assert not any(line.startswith('| data:') for line in lines)
  assert '| 15.0000 ± 0.0000 |' in lines[4]  # its 4 decimals, as the committed report shows
  # one report never mixes them: another feature network, or the other KID, is one line
  mixed = dict(records, synthesis_s1=legacy['synthesis_s1'])
  with pytest.raises(ValueError, match=r'^scores made with different feature networks cannot be '
                     r'compared: synthesis_s0 \(classifier_c3377ecd\) and synthesis_s1 '
                     r'\(classifier_2c506187\); score them again with one network$'):
    result_lib.check_comparable((k, result_lib.from_record(r['result']))
                                for k, r in mixed.items())
  mixed['synthesis_s1'] = data_stage([2.0, 3.0], -22.9, shown={'fid': result_lib.FID, 'kid': old})
  with pytest.raises(ValueError, match=r'different definitions of kid .* synthesis_s0 '
                     r'\(KID ×10³\) and synthesis_s1 \(KID\)'):
    report.build_report(mixed, stages.Options(out='.', scale='digits', seeds=(0, 1)))


def test_evaluation_table_has_a_column_per_metric():
  shown = metrics.described()
  result = result_lib.EvalResult(
      methods={'hat_ebm': 'Hat EBM'}, metrics={k: shown[k] for k in ('fid', 'kid')},
      values={'fid': {'hat_ebm': [1.0, 3.0]}, 'kid': {'hat_ebm': [5.0, 7.5]}},
      data={'fid': 0.25, 'kid': -3.153}, num_samples=10, data_split='digits/test', data_size=297)
  assert evaluate.table(result) == [
      '| samples                | FID         | KID ×10³    |',
      '|------------------------|-------------|-------------|',
      '| Hat EBM (10)           | 2.00 ± 1.41 | 6.25 ± 1.77 |',
      '| data: test split (297) | 0.25        | -3.15       |']
