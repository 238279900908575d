"""The report's tables from made-up stage records: paper scale (1 seed, 3 FID runs) and digits."""
import os
import re

import pytest

from tf_hat_ebm.reproduction import paper
from tf_hat_ebm.reproduction import stages as stages_lib
from tf_hat_ebm.reproduction import tables

from conftest import REPO, fid_result


def fid_record(**methods):
  """A done record of a FID stage: per method the FID of each sample set."""
  return {'result': fid_result(**methods)}


def records_for(seeds, shift=0.0, prefixes=('',)):
  """Stages of every part; seed s adds s * shift (a seed effect the pairing must cancel)."""
  records = {}
  for s in seeds:
    d = s * shift
    for extra in prefixes:
      records[f'refinement{extra}_s{s}'] = fid_record(
          generator=[18.5 + d, 18.6 + d, 18.7 + d], ddls=[14.5 + d, 14.6 + d, 14.7 + d],
          hat_ebm=[14.0 + d, 14.1 + d, 14.2 + d])
      records[f'sngan{extra}_s{s}'] = fid_record(generator=[18.4 + d, 18.6 + d, 18.8 + d])
    records[f'synthesis_s{s}'] = fid_record(hat_ebm=[19.1 + d, 19.3 + d, 19.5 + d],
                                            generator=[25.0 + d, 25.5 + d, 26.0 + d])
    records[f'retrofit_s{s}'] = fid_record(generator=[200.0 + d, 201.0 + d, 202.0 + d],
                                           hat_ebm=[26.0 + d, 26.1 + d, 26.2 + d])
    records[f'current_s{s}'] = {'failed': True, 'exit_code': 1}
    records[f'coop_bn_s{s}'] = fid_record(hat_ebm=[30.0 + d, 31.0 + d, 32.0 + d])
    records[f'noresidual_s{s}'] = fid_record(hat_ebm=[13.5 + d, 13.6 + d, 13.7 + d + s / 10])
    records[f'ood_s{s}'] = {'result': {'svhn_cropped': 0.9, 'cifar100': 0.85, 'celeb_a': 0.93}}
  return records


def table_rows(lines, title):
  """(header cells, row cells) of the markdown table under the heading starting with `title`."""
  start = next(i for i, line in enumerate(lines) if line.startswith('## ' + title))
  block = []
  for line in lines[start + 1:]:
    if line.startswith('## '):
      break
    if line.startswith('|'):
      block.append([c.strip() for c in line.strip().strip('|').split('|')])
  return block[0], block[2:]


def paper_scale_report():
  seeds = [0]
  records = records_for(seeds, prefixes=('', '_celeba'))
  lines = tables.header('paper', seeds, 'float32', 50_000, 'Inception pool_3')
  lines += tables.refinement_table(records, 'paper', seeds)[0]
  lines += tables.synthesis_table(records, 'paper', seeds, [('synthesis', 'cifar10_synth')])[0]
  lines += tables.retrofit_table(records, 'paper', seeds)[0]
  lines += tables.ood_table(records, 'paper', seeds)[0]
  lines += tables.ablation_table(records, seeds)[0]
  lines += tables.checks_table(records, seeds)[0]
  return lines


def test_paper_scale_tables_print_the_evaluation_std_and_the_paper_beside_ours():
  lines = paper_scale_report()
  text = '\n'.join(lines)
  assert 'Precision: float32' in text
  assert [line for line in lines if line.startswith('## Table')] == [
      '## Table 1: ' + paper.TABLES[1]['title'], '## Table 2: ' + paper.TABLES[2]['title'],
      '## Table 3: ' + paper.TABLES[3]['title']]
  head, rows = table_rows(lines, 'Table 1')
  assert head[1:3] == ['ours: FID (1 seed: no sd)', 'eval sd (3 FID runs)']
  hat = next(r for r in rows if r[0] == 'Hat EBM X = G(Z_K) + Y_K, CIFAR-10')
  # ours 14.10 with the sd of its 3 FID runs (0.10), the paper's 14.04 ± 0.11 beside it
  assert hat[1:3] == ['14.10', '0.10'] and hat[4] == '14.04 ± 0.11'
  celeba = next(r for r in rows if r[0].startswith('Hat EBM') and 'CelebA' in r[0])
  assert celeba[4] == '5.98 ± 0.02'
  assert hat[3] == '-24.2%' and hat[5] == '-24.4%'  # ours and the paper's vs the SN-GAN
  _, synth = table_rows(lines, 'Table 2')
  assert synth[0][1:3] == ['19.30', '0.20'] and synth[0][4] == '19.30 ± 0.15'
  _, ood = table_rows(lines, 'Table 3')
  assert {r[0]: r[2] for r in ood} == {'celeb_a': '0.94', 'cifar100': '0.87',
                                       'svhn_cropped': '0.92'}
  assert not re.search(r'± 0\.00\b', text)  # one seed never shows a zero spread


def test_every_table_is_well_formed():
  lines = paper_scale_report()
  tables_seen = 0
  for title in ('Table 1', 'Table 2', 'Table 3', 'Retrofit', 'Ablations', 'Does each'):
    head, rows = table_rows(lines, title)
    assert rows and all(len(r) == len(head) for r in rows), title
    tables_seen += 1
  assert tables_seen == 6
  head, rows = table_rows(lines, 'Ablations')
  assert len(head) == 6 and [r[0] for r in rows][:3] == [
      'historical bank (the paper)', 'current samples = cooperative learning without batch norm',
      'cooperative learning (batch-norm generator)']
  assert 'ran away: seed 0, scored at the last healthy checkpoint' in rows[1][-1]
  assert tables.COOP_NOTE in lines  # why one row stands for two of the paper's arms
  assert 'fails without batch norm' in rows[1][4] and 'works with batch norm' in rows[2][4]
  with pytest.raises(ValueError, match='has 3 cells, the header 4'):
    tables.markdown(['a', 'b', 'c', 'd'], [[1, 2, 3]])


def test_one_seed_checks_say_there_is_no_interval():
  _, rows = table_rows(paper_scale_report(), 'Does each')
  by_claim = {r[0]: r for r in rows}
  sngan = by_claim['Hat EBM beats its SN-GAN (Table 1, CIFAR-10)']
  # effect, difference, interval, seeds, Holm p, relative, precision/recall, paper, verdict
  assert sngan[2] == 'none (one seed)' and sngan[8].startswith('one seed, no interval')
  assert sngan[7] == '-24.4%' and sngan[4] == '–'  # no interval, no p: outside Holm's family
  assert by_claim['Hat EBM beats its SN-GAN (Table 1, CelebA)'][7] == '-2.4%'
  current = by_claim['historical bank beats current samples']
  assert current[8].startswith('holds') and 'stopped on seed(s) [0]' in current[8]


def test_digits_scale_checks_are_paired_intervals_over_three_seeds():
  seeds = [0, 1, 2]
  records = records_for(seeds, shift=5.0)  # seeds differ by 5, each pair by the same gap
  lines, data = tables.checks_table(records, seeds)
  by_claim = {c['check']: c for c in data}
  sngan = by_claim['Hat EBM beats its SN-GAN (Table 1)']
  assert sngan['verdict'] == 'holds' and sngan['n'] == 3
  assert sngan['mean'] == pytest.approx(4.5) and sngan['low'] == pytest.approx(4.5)
  residual = by_claim['the residual Y keeps refinement stable']
  # without Y scores better on every seed here, but both arms are healthy: a stability claim
  # is not shown by FID, which the text still reports
  assert residual['verdict'] == 'not shown at this scale' and 'FID reversed' in residual['text']
  _, rows = table_rows(lines, 'Does each')
  assert all(re.match(r'\[[-+]\d+\.\d\d, [-+]\d+\.\d\d\]', r[2]) for r in rows
             if r[0] != 'historical bank beats current samples' and 'scatter' not in r[0])
  for s in seeds:  # a model of digits 0-4, scored on 5-9: its own stages
    records[f'nearood_s{s}'] = {'result': {'other_digits': 0.90 + 0.02 * s}}
  ood, _ = tables.ood_table(records, 'digits', seeds,
                            (('ood', ''), ('nearood', 'model of digits 0-4')))
  _, rows = table_rows(ood, 'Table 3')
  assert rows[-1] == ['other_digits (model of digits 0-4)', '0.920 ± 0.020',
                      '0.87 (cifar100, CIFAR-10 model)', 'nearood_s*']
  refine, _ = tables.refinement_table(records, 'digits', seeds)
  head, rows = table_rows(refine, 'Table 1')
  assert head[1:3] == ['ours: FID ± sd over 3 seeds', 'eval sd (3 FID runs)']
  assert '-24.4% on CIFAR-10, -2.4% on CelebA' in by_claim[
      'Hat EBM beats its SN-GAN (Table 1)']['paper']  # digits: both datasets for the sign
  hat = next(r for r in rows if r[0].startswith('Hat EBM'))
  assert hat[1] == '19.10 ± 5.00' and hat[2] == '0.10'
  assert hat[4] == '14.04 ± 0.11 (CIFAR-10); 5.98 ± 0.02 (CelebA)'
  assert hat[5] == '-24.4% (CIFAR-10); -2.4% (CelebA)'
  assert any('DDLS recovers 89% of' in line and '88% on CIFAR-10' in line for line in refine)


def test_settings_table_puts_the_appendix_beside_each_config():
  configs = {'cifar10_synth': {'training': {'num_steps': 75_000, 'batch_size': 128,
                                            'data_eps': 1e-3, 'bank_size': 10_000},
                               'optim': {'hat_lr': 1e-4, 'hat_clip_norm': None, 'gen_lr': 1e-4},
                               'langevin': {'step_size': 5e-4, 'steps': 50, 'temperature': 1e-8},
                               'perf': {'precision': 'float32'}}}
  lines, data = tables.settings_table(configs, 'paper')
  differs = [d['field'] for d in data if not d['same']]
  assert differs == ['langevin.temperature']
  head, rows = table_rows(lines, 'Settings')
  assert all(len(r) == len(head) for r in rows) and len(rows) == len(paper.SETTINGS[
      'cifar10_synth'])
  assert paper.appendix_settings('digits_refine')[0] == 'cifar10_refine'


def test_paper_effects_are_the_papers_numbers():
  assert paper.EFFECTS['cifar10']['hat_ebm_vs_generator'] == pytest.approx(-0.244, abs=1e-3)
  assert paper.EFFECTS['celeba']['hat_ebm_vs_generator'] == pytest.approx(-0.024, abs=1e-3)
  assert paper.EFFECTS['cifar10']['ddls_share_of_gain'] == pytest.approx(0.879, abs=1e-3)


def test_the_paper_configs_differ_from_the_appendix_only_where_documented():
  from conftest import load_config  # pylint: disable=g-import-not-at-top
  configs = {}
  for name in paper.SETTINGS:
    configs[name] = load_config(name)
    configs[name].perf.precision = 'float32'  # what the paper scale pins
  _, data = tables.settings_table(configs, 'paper')
  differs = sorted((d['config'], d['field']) for d in data if not d['same'])
  # Both follow the authors' release (docs/differences.md: each config says which it follows).
  assert differs == [('cifar10_refine', 'langevin.prior_sigma'),
                     ('cifar10_retrofit', 'training.data_eps')]


def test_a_verdict_that_flips_between_reruns_is_borderline():
  seeds = [0, 1, 2]
  records = records_for(seeds, shift=1.0)
  claim = 'historical bank beats cooperative learning with batch norm'
  earlier = [dict(path='run1/report.json', checks=[dict(check=claim, verdict='holds')]),
             dict(path='run2/report.json',
                  checks=[dict(check=claim, verdict='not resolved at 3 seeds')])]
  lines, out = tables.checks_table(records, seeds, earlier)
  checks = {c['check']: c for c in out}
  flipped = checks[claim]
  assert flipped['verdict'] == tables.BORDERLINE
  assert flipped['text'].startswith('borderline: holds in this run, but not resolved at 3 seeds '
                                    'in run2/report.json (1 of 2 earlier runs differ). This run:')
  # the same verdict at another seed count is not a flip; no earlier report: the run's own
  same = [dict(path='r', checks=[dict(check=claim, verdict='holds')])]
  assert tables.checks_table(records, seeds, same)[1][5]['verdict'] == 'holds'
  assert checks['Hat EBM beats its SN-GAN (Table 1)']['verdict'] == 'holds'
  unresolved = [dict(path='r', checks=[dict(check='DDLS beats its SN-GAN (Table 1)',
                                            verdict='not resolved at 5 seeds')])]
  assert tables.rerun_verdict('DDLS beats its SN-GAN (Table 1)', 'not resolved at 3 seeds',
                              unresolved) == ('not resolved at 3 seeds', '')


def test_a_collapsed_seed_is_labelled_in_the_ablations():
  seeds = [0, 1, 2]
  records = records_for(seeds)
  records['current_s1'] = fid_record(hat_ebm=[172.0, 174.0])
  records['current_s0'] = fid_record(hat_ebm=[50.0, 52.0])
  lines, out = tables.ablation_table(records, seeds)
  head, rows = table_rows(lines, 'Ablations')
  current = next(r for r in rows if r[0] == tables.CURRENT)
  assert current[head.index('per seed')] == 's0 51.0, s1 173.0 (collapsed), s2 – (ran away)'
  assert out[1]['collapsed_seeds'] == [1] and out[2]['collapsed_seeds'] == []
  assert 'above 100 is marked collapsed' in '\n'.join(lines)


def test_every_digits_departure_has_its_measured_reason():
  from conftest import load_config  # pylint: disable=g-import-not-at-top
  names = ('digits_synth', 'digits_sngan', 'digits_refine', 'digits_retrofit')
  lines, data = tables.settings_table({n: load_config(n) for n in names}, 'digits')
  differs = [d for d in data if not d['same']]
  assert len(differs) >= 25 and all(d['reason'] for d in differs), [
      (d['config'], d['field']) for d in differs if not d['reason']]
  fields = {(d['config'], d['field']) for d in differs}
  assert {('digits_synth', 'langevin.max_drift'), ('digits_retrofit', 'langevin.latent_sphere'),
          ('digits_refine', 'sampling.steps'), ('digits_refine', 'training.num_steps'),
          ('digits_sngan', 'training.num_steps'), ('digits_refine', 'ddls.steps')} <= fields
  text = '\n'.join(lines)
  assert 'differs (digits scale)' not in text and "the release's 1e-8" in text
  head, rows = table_rows(lines, 'Settings')
  assert all(len(r) == len(head) for r in rows)  # no stray '|' in a reason


def test_the_digits_report_says_what_it_does_not_test():
  from tf_hat_ebm.reproduction import departures  # pylint: disable=g-import-not-at-top
  text = '\n'.join(departures.scope_lines())
  for item in ('ImageNet 128', 'CelebA', 'Inception', '|Y| << |G(Z)|', 'inferred Z',
               'no paper-scale run has been made', "Table 2's SN-GAN"):
    assert item in text, item
  lines, _ = tables.ood_table({'nearood_s0': {'result': {'other_digits': 0.96}}}, 'digits', [0],
                              (('nearood', 'model of digits 0-4'),))
  assert 'not comparable' in '\n'.join(lines)
  _, checks = tables.checks_table(records_for([0, 1, 2]), [0, 1, 2])
  why = departures.effect_lines(checks)
  assert len(why) == 2 + len(checks) + 1 and why[2].startswith(
      '- Hat EBM beats its SN-GAN (Table 1): the digits SN-GAN is trained for 1,500 digits')


def test_the_report_says_which_arms_the_scale_shortened_and_why():
  from tf_hat_ebm.reproduction import departures  # pylint: disable=g-import-not-at-top
  shortened = stages_lib.SCALES['digits'].shortened
  records = {'current_s0': dict(num_steps=3000), 'current_s1': dict(num_steps=3000),
             'synthesis_s0': dict(num_steps=9000), 'nearood_s0': dict(num_steps=9000)}
  text = '\n'.join(departures.scope_lines(records, shortened))
  assert text.count('shorter than its config') == 1  # nearood ran its config's 9,000
  assert '- current runs 3,000 steps, shorter than its config: its verdict is' in text
  assert 'shorter' not in '\n'.join(departures.scope_lines(records, {}))
  # an arm the scale drops is named with why, unless its records are there (an earlier run's)
  dropped = stages_lib.SCALES['digits'].dropped
  assert '- noresidual is not run: the refinement without Y' in '\n'.join(
      departures.scope_lines(records, shortened, dropped))
  assert 'is not run' not in '\n'.join(departures.scope_lines(
      dict(records, noresidual_s0=dict(num_steps=2000)), shortened, dropped))


def test_a_strong_generators_refinement_and_the_paper_time_arm_are_reported_when_they_ran():
  seeds = [0, 1, 2]
  records = records_for(seeds, shift=0.5)
  base_checks = [c['check'] for c in tables.checks_table(records, seeds)[1]]
  assert not any('own G' in c or 'Langevin time' in c for c in base_checks)  # not run: no row
  for s in seeds:
    records[f'refine_own_s{s}'] = fid_record(generator=[3.0 + s, 3.1 + s, 3.2 + s],
                                             hat_ebm=[2.6 + s, 2.7 + s, 2.8 + s])
    records[f'paper_time_s{s}'] = fid_record(hat_ebm=[19.6 + s, 19.8 + s, 20.0 + s])
  lines, rows = tables.refinement_table(records, 'digits', seeds)
  own = {r['label']: r for r in rows}
  assert own["Hat EBM over the synthesis run's G"]['mean'] == pytest.approx(3.7)
  _, cells = table_rows(lines, 'Table 1')
  row = next(c for c in cells if c[0] == "Hat EBM over the synthesis run's G")
  assert '-9.8%' in row  # against that G's 4.1, not the SN-GAN's
  checks = {c['check']: c for c in tables.checks_table(records, seeds)[1]}
  own_check = checks["a new hat improves the synthesis run's own G (beside Table 1)"]
  assert own_check['mean'] == pytest.approx(0.4) and own_check['n'] == 3
  assert '-2.4% on CelebA' in own_check['paper']
  time_check = checks["synthesis at the paper's Langevin time beats the digits' 0.4x"]
  assert time_check['mean'] == pytest.approx(-1.0)  # paired: the paper's time is worse here
  ablations = [r['label'] for r in tables.ablation_table(records, seeds)[1]]
  assert ablations[-1] == "synthesis at the paper's Langevin time"
  arms = [r['arm'] for r in tables.plateau_table(records, seeds)[1]]
  assert "refinement of the synthesis run's G: Hat EBM" in arms


def test_the_committed_reports_metric_tables_stay_readable():
  # Every metric of a result was a column (10 a table, 11 with one more): the tables of the
  # models' scores show the metrics flagged for the report, the rest stay in report.json.
  with open(os.path.join(REPO, 'docs', 'reproduction', 'digits', 'report.md')) as f:
    heads = [line.split('|')[1:-1] for line in f if line.startswith('|  | ours: FID')]
  assert len(heads) >= 4 and max(len(h) for h in heads) <= 8
  assert not any('precision' in cell for h in heads for cell in h)
