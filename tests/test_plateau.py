"""The plateau rule (reproduction/plateau.py) and the report's table of it, from made-up records."""
import json
import math
import os

import numpy as np
import pytest
from scipy import stats as scipy_stats

from conftest import REPO, fid_result
from tf_hat_ebm.reproduction import plateau
from tf_hat_ebm.reproduction import tables


@pytest.mark.parametrize('num_steps, loop, step', [(2000, 1, 1333), (1200, 25, 800),
                                                   (2, 1, 1), (800, 1, 533), (6000, 25, 4000)])
def test_the_checkpoint_is_two_thirds_of_training_on_the_loop_grid(num_steps, loop, step):
  assert plateau.checkpoint_step(num_steps, loop) == step
  assert step % loop == 0 and 0 < step < max(num_steps, 2)


STEADY = [(7500, [10.1, 10.3]), (8000, [9.9, 10.3]), (8500, [10.2, 10.0])]


def test_a_steady_run_with_five_checkpoints_is_converged_and_with_four_too_few():
  r = plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000, window=STEADY)
  steps = [6000, 7500, 8000, 8500, 9000]
  means = [10.2, 10.2, 10.1, 10.1, 10.1]
  slope, intercept = np.polyfit(steps, means, 1)
  residual = np.array(means) - (slope * np.array(steps) + intercept)
  assert r['window_steps'] == steps and r['n'] == 5
  assert r['difference'] == pytest.approx(slope * 3000)
  assert r['scatter'] == pytest.approx(math.sqrt(np.sum(residual ** 2) / 3))
  # eval sd pooled over the 5 checkpoints' sample sets; the interval's sd never below its /sqrt(2)
  eval_sd = math.sqrt(np.mean([np.var(r_, ddof=1) for r_ in (
      [10.0, 10.4], [10.1, 10.3], [9.9, 10.3], [10.2, 10.0], [10.0, 10.2])]))
  assert r['eval_sd'] == pytest.approx(eval_sd) and r['sd'] == pytest.approx(eval_sd / math.sqrt(2))
  half = scipy_stats.t.ppf(0.975, 3) * r['sd'] * 3000 / math.sqrt(np.sum(
      (np.array(steps) - np.mean(steps)) ** 2))
  assert (r['low'], r['high']) == pytest.approx((r['difference'] - half, r['difference'] + half))
  assert -1.01 < r['low'] and r['high'] < 1.01  # within +-10% of the end's 10.1
  assert r['verdict'] == plateau.CONVERGED and r['converged']
  few = plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000, window=STEADY[1:])
  assert few['verdict'] == plateau.TOO_FEW and not few['converged'] and few['n'] == 4
  assert few['text'].endswith('(4 checkpoints of the 5 the rule needs)')


def test_a_run_that_swings_between_checkpoints_is_unstable_whatever_its_change(monkeypatch):
  # 10.2 -> 14.2 -> 10.1 -> 6.1 -> 10.1: no change over the third, scatter 15x the eval sd
  swing = [(7500, [14.1, 14.3]), (8000, [9.9, 10.3]), (8500, [6.2, 6.0])]
  r = plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000, window=swing)
  assert r['verdict'] == plateau.UNSTABLE and not r['converged']
  assert r['scatter'] / r['eval_sd'] == pytest.approx(14.9, abs=0.1)
  assert r['text'] == ('no: unstable: 5 checkpoints scatter by 3.13 about their trend, 14.9x the '
                       'eval sd 0.21')
  # the gate is what reads it: at 20x the same run passes as a flat one
  monkeypatch.setattr(plateau, 'GATE', 20.0)
  assert plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000, window=swing)['verdict'] == (
      plateau.UNRESOLVED)
  monkeypatch.undo()
  # a straight-line trend is no swing: a steady fall reads still improving
  falling = plateau.rule([14.0, 14.2], [10.0, 10.2], 6000, 9000, window=[
      (7500, [12.0, 12.2]), (8000, [11.3, 11.5]), (8500, [10.7, 10.9])])
  assert falling['verdict'] == plateau.IMPROVING and falling['high'] < 0


def test_a_checkpoint_above_the_collapse_line_is_a_collapse_wherever_it_is():
  r = plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000,
                   window=[(7500, [10.1, 10.3]), (8000, [180.7, 180.1]), (8500, [10.2, 10.0])])
  assert (r['verdict'], r['collapsed_at']) == (plateau.COLLAPSED, 8000)
  assert r['collapsed_fid'] == pytest.approx(180.4)
  assert r['text'] == 'no: collapsed at step 8,000 (FID 180.4 > 100)'
  # with too few checkpoints to call a run converged, a collapse and a swing are still read
  assert plateau.rule([10.0, 10.4], [150.0, 150.2], 6000, 9000)['verdict'] == plateau.COLLAPSED
  assert plateau.rule([10.0, 10.4], [10.0, 10.2], 6000, 9000, window=[(8000, [30.0, 30.2])])[
      'verdict'] == plateau.UNSTABLE


def test_a_change_whose_interval_excludes_zero_outside_the_band_has_a_direction():
  def run(mid, end):
    window = [(s, [mid + (end - mid) * (s - 6000) / 3000 + d for d in (-0.1, 0.1)])
              for s in (7500, 8000, 8500)]
    return plateau.rule([mid - 0.1, mid + 0.1], [end - 0.1, end + 0.1], 6000, 9000, window=window)
  assert run(14.0, 10.0)['verdict'] == plateau.IMPROVING
  assert run(10.0, 14.0)['verdict'] == plateau.WORSENING
  assert run(10.0, 10.5)['verdict'] == plateau.CONVERGED  # a real +0.5, within +-10%
  noisy = plateau.rule([10.0, 12.0], [11.0, 13.0], 6000, 9000,
                       window=[(7500, [10.0, 12.4]), (8000, [11.0, 12.6]), (8500, [10.4, 12.8])])
  assert noisy['verdict'] == plateau.UNRESOLVED and noisy['low'] < 0 < noisy['high']


def test_a_runaway_is_scored_at_its_last_healthy_checkpoint_and_labelled():
  r = plateau.rule([9.0, 9.5], None, 1333, 2000, ran_away=True)
  assert r['verdict'] == plateau.RUNAWAY and r['scored_step'] == 1333 and r['end'] is None
  assert 'last healthy checkpoint (FID 9.25)' in r['text']
  nan = plateau.rule([9.0, 9.5], [float('nan'), 8.0], 1333, 2000)
  assert nan['verdict'] == plateau.RUNAWAY and nan['scored_step'] == 1333
  assert plateau.rule(None, [8.0, 8.2], None, 2000)['verdict'] == plateau.UNMEASURED
  # The runner scored the checkpoint it kept (step 1,750): that is its last healthy one.
  kept = plateau.rule([9.0, 9.5], [7.0, 7.2], 1333, 1750, ran_away=True, num_steps=2000)
  assert (kept['verdict'], kept['scored_step'], kept['scored']) == (plateau.RUNAWAY, 1750, 7.1)
  assert kept['text'] == ('ran away before step 2000; scored at step 1750, its last healthy '
                          'checkpoint (FID 7.10)')


def test_the_ablation_table_labels_a_run_the_guard_stopped_with_its_scored_step():
  cell = tables.per_seed_cell([11.8, 31.9, None], [0, 1, 2], {1: 3500, 2: None})
  assert cell == ('s0 11.8, s1 31.9 (ran away; its last healthy checkpoint, step 3,500), '
                  f's2 {tables.DASH} (ran away)')


def test_two_checkpoints_read_a_trend_from_the_sample_sets_noise_and_skip_what_is_not_finite():
  # 2/3 -> end only: no scatter; the interval from the sets' sd (0.14, 2 degrees of freedom)
  alone = plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000)
  assert alone['scatter'] is None and alone['df'] == 2
  half = scipy_stats.t.ppf(0.975, 2) * math.sqrt(0.02) / math.sqrt(2) * math.sqrt(2)
  assert (alone['low'], alone['high']) == pytest.approx((-1.1 - half, -1.1 + half))
  assert alone['verdict'] == plateau.IMPROVING
  assert plateau.rule([3.0, 3.2], [2.9, 3.1], 4000, 6000)['verdict'] == plateau.UNRESOLVED
  # A window checkpoint without finite FIDs is left out; a run that ran away ignores its window.
  assert plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000, window=[(5500, [float('nan')])])[
      'window_steps'] == [4000, 6000]
  assert plateau.rule([3.0, 3.2], None, 4000, 6000, ran_away=True,
                      window=[(5000, [2.0, 2.0])])['verdict'] == plateau.RUNAWAY


def test_the_table_reads_each_runs_end_window_from_its_seeds_window_stage():
  records = {'synthesis_s0': record([10.0, 10.2], [10.0, 10.4], step=9000),
             'window_s0': {'result': {
                 f'window_s0/synthesis_s0_w{i}.json': fid_result(step, hat_ebm=runs)
                 for i, (step, runs) in enumerate(STEADY, 1)}}}
  records['window_s0']['result']['window_s0/sngan_s0_w2.json'] = fid_result(
      2200, generator=[9.0, 9.0])
  records['synthesis_s0']['plateau']['step'] = 6000
  assert [s for s, _ in tables.end_window(records, 0, 'synthesis_s0', 'hat_ebm')] == [
      7500, 8000, 8500]
  lines, out = tables.plateau_table(records, [0])
  row = next(line for line in lines if line.startswith('| synthesis'))
  assert [c.strip() for c in row.strip('|').split('|')][3:] == [
      '5', '10.20', '10.10', '-0.12 [-0.73, +0.50]', '0.04', '0.21', 'yes']
  assert out[0]['seeds'][0]['window_steps'] == [6000, 7500, 8000, 8500, 9000]


def test_an_arm_pools_its_seeds_changes_and_names_every_seed_that_broke():
  def seed(i, d=0.0, window=STEADY):
    return dict(plateau.rule([10.0 + d, 10.4 + d], [10.0, 10.2], 6000, 9000, window=window),
                seed=i)
  steady = [seed(i) for i in range(3)]
  arm = plateau.arm(steady)
  assert arm['verdict'] == plateau.CONVERGED and arm['checkpoints'] == 5
  se = math.sqrt(sum(r['se'] ** 2 for r in steady)) / 3
  df = 3 * 3  # three seeds of 3 degrees of freedom and one se: Welch-Satterthwaite's sum
  assert arm['difference'] == pytest.approx(steady[0]['difference'])
  assert arm['high'] - arm['difference'] == pytest.approx(scipy_stats.t.ppf(0.975, df) * se)
  # Too few checkpoints in a seed: steady, never converged
  few = plateau.arm(steady[:2] + [seed(2, window=STEADY[1:])])
  assert few['verdict'] == f'{plateau.TOO_FEW} (4 of 5)' and not few['converged']
  # Seeds that collapsed, swung, ran away or were not measured are named with their numbers.
  swing = seed(1, window=[(7500, [14.1, 14.3]), (8000, [9.9, 10.3]), (8500, [6.2, 6.0])])
  collapsed = seed(2, window=[(8000, [180.7, 180.1])])
  assert plateau.arm([steady[0], swing, collapsed])['verdict'] == (
      'no: collapsed (s2: FID 180.4 at step 8,000); unstable (s1: scatter 3.13, 14.9x its eval '
      'sd)')
  away = dict(plateau.rule([9.0, 9.5], None, 6000, 9000, ran_away=True), seed=1)
  unmeasured = dict(plateau.rule(None, [8.0, 8.2], None, 9000), seed=2)
  assert plateau.arm([steady[0], away, unmeasured])['verdict'] == (
      'no: ran away (seed 1); not measured (seed 2)')
  # A seed still improving is named; the arm's pooled change is read too.
  falling = seed(0, d=4.0, window=[(7500, [12.0, 12.2]), (8000, [11.3, 11.5]),
                                   (8500, [10.7, 10.9])])
  assert falling['verdict'] == plateau.IMPROVING
  assert plateau.arm([falling, steady[1], steady[2]])['verdict'] == 'no: still improving (seed 0)'


def test_the_committed_reports_unstable_arms_read_unstable_and_the_sngan_flat(monkeypatch):
  """The rule on docs/reproduction/digits/report.json's recorded checkpoints (5 in each run's last
  third): current samples and cooperative batch norm swing (one coop seed collapsed), the SN-GAN
  is flat and not past its best, the refinement still improving; without the gate the swinging
  arms would not read unstable."""
  with open(os.path.join(REPO, 'docs', 'reproduction', 'digits', 'report.json')) as f:
    records = json.load(f)['stages']
  _, arms = tables.plateau_table(records, [0, 1, 2])
  arms = {a['arm']: a for a in arms}
  current, coop = arms['current samples'], arms['cooperative, batch norm']
  assert current['counts'] == {plateau.UNSTABLE: [0, 1, 2]}
  assert current['verdict'].startswith('no: unstable (s0: scatter 17.31, 13.1x its eval sd;')
  assert coop['counts'] == {plateau.UNSTABLE: [0, 1], plateau.COLLAPSED: [2]}
  assert coop['verdict'].startswith('no: collapsed (s2: FID 130.5 at step 2,250); unstable')
  sngan = arms["SN-GAN (the refinement's generator)"]
  assert sngan['verdict'] == plateau.UNRESOLVED and sngan['counts'] == {
      plateau.UNRESOLVED: [0, 1, 2]}
  assert (sngan['low'], sngan['high']) == pytest.approx((-1.44, 1.09), abs=0.01)
  refinement = arms['refinement: Hat EBM']
  assert refinement['verdict'] == 'no: still improving' and refinement['high'] < 0
  monkeypatch.setattr(plateau, 'GATE', 1e9)  # no gate: the swings pass as trends
  _, arms = tables.plateau_table(records, [0, 1, 2])
  arms = {a['arm']: a for a in arms}
  assert not arms['current samples']['verdict'].startswith('no: unstable')
  assert plateau.UNSTABLE not in arms['cooperative, batch norm']['counts']


def record(end_runs, mid_runs=None, step=2000, key='hat_ebm', failed=False):
  if failed:
    return dict(failed=True, step=step - 700)
  done = dict(result=fid_result(**{key: end_runs}), step=step)
  if mid_runs:
    done['plateau'] = fid_result(1333, **{key: mid_runs})
  return done


def test_the_report_prints_steps_the_rules_numbers_and_a_verdict_per_arm():
  seeds = [0, 1, 2]
  records = {}
  for s in seeds:
    records[f'synthesis_s{s}'] = record([8.0 + s, 8.2 + s], [8.1 + s, 8.3 + s])
    records[f'refinement_s{s}'] = record([11.0, 11.2], [14.0, 14.2])
    records[f'sngan_s{s}'] = record([30.0, 30.5], None, step=1200, key='generator')
    records[f'current_s{s}'] = record([40.0, 41.0], [40.5, 40.0]) if s else record(
        None, failed=True)
  lines, out = tables.plateau_table(records, seeds)
  text = '\n'.join(lines)
  rows = {r[0]: r for r in (line.strip('|').split('|') for line in lines if line.startswith('| '))}
  cells = {k.strip(): [c.strip() for c in v] for k, v in rows.items()}
  assert cells['synthesis: Hat EBM'][1:] == ['2,000', '1,333', '2', '9.20', '9.10',
                                             '-0.10 [-0.30, +0.10]', tables.DASH, '0.14',  # t(6)
                                             f'{plateau.TOO_FEW} (2 of 5)']
  assert cells['refinement: Hat EBM'][-1] == 'no: still improving (seeds 0, 1, 2)'
  assert cells["SN-GAN (the refinement's generator)"][-1] == plateau.UNMEASURED
  assert cells['current samples'][-1] == 'no: ran away (seed 0)'
  assert 'retrofit: Hat EBM' not in cells  # no stage, no row
  assert not out[0]['converged'] and not out[1]['converged']
  assert out[3]['seeds'][0]['verdict'] == plateau.RUNAWAY
  assert 'predates the rule' not in text


def test_the_committed_reports_checks_bound_the_papers_gains_and_judge_stability():
  with open(os.path.join(REPO, 'docs', 'reproduction', 'digits', 'report.json')) as f:
    records = json.load(f)['stages']
  _, checks = tables.checks_table(records, [0, 1, 2])
  checks = {c['check']: c for c in checks}
  ddls = checks['DDLS beats its SN-GAN (Table 1)']
  assert ddls['verdict'] == 'not resolved at 3 seeds'
  assert ddls['bound'].startswith("gain at most 38.1% of the worse arm's FID (95% interval): "
                                  "the paper's 21.5% on CIFAR-10 and 1.1% on CelebA inside it")
  # the paper's claim of the generator updates is instability: the checkpoints' scatter
  current = checks['historical bank trains stabler than current samples (checkpoint scatter)']
  coop = checks['historical bank trains stabler than cooperative learning with batch norm '
                '(checkpoint scatter)']
  assert (current['verdict'], coop['verdict']) == ('not resolved at 3 seeds', 'holds')
  assert (current['ratio'], coop['ratio']) == pytest.approx((23, 58), abs=1)
  assert coop['ratio_low'] > 4 and current['ratio_low'] < 1
  # the hat raises recall on every seed over the SN-GAN at its best
  assert checks['Hat EBM beats its SN-GAN (Table 1)']['metrics'] == (
      'precision 0.594 vs 0.591, lower on 2 of 3 seeds; recall 0.844 vs 0.791, higher on every '
      'seed')
  # the paper's Langevin time is worse on every seed: its interval excludes 0 the other way
  assert checks["synthesis at the paper's Langevin time beats the digits' 0.4x"]['verdict'] == (
      'reversed')
  # Holm over the 10 checks with an interval: the batch-norm arm's instability holds alone only
  assert sum(c['p_holm'] is not None for c in checks.values()) == 10
  assert [c for c, v in checks.items() if tables.holds_alone(v)] == [
      'historical bank trains stabler than cooperative learning with batch norm '
      '(checkpoint scatter)']
