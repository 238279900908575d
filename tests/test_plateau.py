"""The plateau rule (reproduction/plateau.py) and the report's table of it, from made-up records."""
import math

import pytest

from tf_hat_ebm.reproduction import plateau
from tf_hat_ebm.reproduction import tables


@pytest.mark.parametrize('num_steps, loop, step', [(2000, 1, 1333), (1200, 25, 800),
                                                   (2, 1, 1), (800, 1, 533), (6000, 25, 4000)])
def test_the_checkpoint_is_two_thirds_of_training_on_the_loop_grid(num_steps, loop, step):
  assert plateau.checkpoint_step(num_steps, loop) == step
  assert step % loop == 0 and 0 < step < max(num_steps, 2)


def test_a_change_below_the_evaluation_sd_is_converged_and_above_it_is_not():
  # runs 10, 12 (sd 1.41) and 11, 13 (sd 1.41): pooled sd 1.41, change +1.0 < 1.41
  r = plateau.rule([10.0, 12.0], [11.0, 13.0], 1333, 2000)
  assert r['verdict'] == plateau.CONVERGED and r['converged']
  assert r['difference'] == pytest.approx(1.0) and r['sd'] == pytest.approx(math.sqrt(2))
  just_above = plateau.rule([10.0, 12.0], [11.5, 13.5], 1333, 2000)  # +1.5 > 1.41
  assert just_above['verdict'] == plateau.WORSENING and not just_above['converged']
  still = plateau.rule([14.0, 14.2], [11.0, 11.2], 1333, 2000)
  assert still['verdict'] == plateau.IMPROVING and not still['converged']
  assert still['difference'] == pytest.approx(-3.0) and 'change -3.00' in still['text']
  worse = plateau.rule([11.0, 11.2], [14.0, 14.2], 1333, 2000)
  assert worse['verdict'] == plateau.WORSENING


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


def test_the_end_window_averages_the_last_checkpoints_and_weighs_their_scatter():
  # One checkpoint at the end reads a 2/3 -> end drop of 1.0 against sample sets' sd 0.14 as
  # still improving; the window's checkpoints (3.5, 2.0 and the end's 2.0) scatter with sd 0.87.
  alone = plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000)
  assert alone['verdict'] == plateau.IMPROVING and alone['scatter'] is None
  r = plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000,
                   window=[(5000, [3.4, 3.6]), (5500, [1.9, 2.1])])
  assert r['end'] == pytest.approx(2.5) and r['scatter'] == pytest.approx(0.86603, abs=1e-5)
  assert r['sd'] == r['scatter'] and r['eval_sd'] == pytest.approx(math.sqrt(0.02))
  assert r['difference'] == pytest.approx(-0.6) and r['converged']
  assert r['window_steps'] == [5000, 5500, 6000]
  assert r['text'] == ('yes: FID 3.10 at step 4000, 2.50 over steps 5,000, 5,500, 6,000, change '
                       '-0.60 against sd 0.87')
  # A quiet window leaves the sample sets' sd the rule's: a real trend still counts.
  quiet = plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000,
                       window=[(5000, [1.95, 2.05]), (5500, [2.0, 2.0])])
  assert quiet['sd'] == pytest.approx(math.sqrt(0.02)) and quiet['verdict'] == plateau.IMPROVING
  # A window checkpoint without finite FIDs is left out; a run that ran away ignores its window.
  assert plateau.rule([3.0, 3.2], [1.9, 2.1], 4000, 6000,
                      window=[(5500, [float('nan')])])['scatter'] is None
  assert plateau.rule([3.0, 3.2], None, 4000, 6000, ran_away=True,
                      window=[(5000, [2.0, 2.0])])['verdict'] == plateau.RUNAWAY


def test_the_table_reads_each_runs_end_window_from_its_seeds_window_stage():
  records = {'synthesis_s0': record([1.9, 2.1], [3.0, 3.2], step=6000),
             'window_s0': {'result': {
                 'window_s0/synthesis_s0_w1.json': {'step': 5000, 'hat_ebm_runs': [3.4, 3.6]},
                 'window_s0/synthesis_s0_w2.json': {'step': 5500, 'hat_ebm_runs': [1.9, 2.1]},
                 'window_s0/sngan_s0_w2.json': {'step': 2200, 'generator_runs': [9.0, 9.0]}}}}
  assert [s for s, _ in tables.end_window(records, 0, 'synthesis_s0', 'hat_ebm')] == [5000, 5500]
  lines, out = tables.plateau_table(records, [0])
  row = next(line for line in lines if line.startswith('| synthesis'))
  assert [c.strip() for c in row.strip('|').split('|')][3:] == [
      '3.10', '2.50', '-0.60', '0.87', '0.14', 'yes']
  assert out[0]['seeds'][0]['window_steps'] == [5000, 5500, 6000]


def test_an_arm_is_converged_when_its_mean_change_over_the_seeds_is_within_their_sd():
  yes = plateau.rule([10.0, 10.4], [10.1, 10.3], 1333, 2000)
  no = plateau.rule([14.0, 14.2], [11.0, 11.2], 1333, 2000)
  assert plateau.arm([yes, yes, yes])['verdict'] == plateau.CONVERGED
  mixed = plateau.arm([yes, no, yes])
  assert not mixed['converged'] and mixed['verdict'] == 'no: still improving'
  assert mixed['mid'] == pytest.approx((10.2 * 2 + 14.1) / 3)
  assert mixed['difference'] == pytest.approx(-1.0)
  # Seeds that each move by more than their sd, one up and two down, at a plateau on average:
  # two of three fail the rule alone, the arm's mean change (-0.03) is well within it.
  noisy = [plateau.rule([10.0, 10.2], [10.0 + d, 10.2 + d], 1333, 2000)
           for d in (0.3, -0.3, -0.1)]
  assert [r['converged'] for r in noisy] == [False, False, True]
  assert plateau.arm(noisy)['verdict'] == plateau.CONVERGED
  # A seed that ran away, or was not measured, keeps the arm from "yes", named.
  away = plateau.rule([9.0, 9.5], None, 1333, 2000, ran_away=True)
  unmeasured = plateau.rule(None, [8.0, 8.2], None, 2000)
  assert plateau.arm([yes, dict(away, seed=1), dict(unmeasured, seed=2)])['verdict'] == (
      'no: not measured (seed 2); ran away (seed 1)')
  assert plateau.arm([no, dict(away, seed=1)])['verdict'] == (
      'no: still improving; ran away (seed 1)')


def record(end_runs, mid_runs=None, step=2000, key='hat_ebm', failed=False):
  if failed:
    return dict(failed=True, step=step - 700)
  result = {key: sum(end_runs) / len(end_runs), f'{key}_runs': end_runs}
  if mid_runs:
    result['plateau'] = {'step': 1333, 'end_step': step, f'{key}_runs': mid_runs}
  return dict(result=result, step=step)


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
  assert cells['synthesis: Hat EBM'][1:] == ['2,000', '1,333', '9.20', '9.10', '-0.10',
                                             tables.DASH, '0.14', 'yes']
  assert cells['refinement: Hat EBM'][-1] == 'no: still improving'
  assert cells["SN-GAN (the refinement's generator)"][-1] == plateau.UNMEASURED
  assert cells['current samples'][-1] == 'no: ran away (seed 0)'
  assert 'retrofit: Hat EBM' not in cells  # no stage, no row
  assert out[0]['converged'] and not out[1]['converged']
  assert out[3]['seeds'][0]['verdict'] == plateau.RUNAWAY
  assert 'predates the rule' not in text
