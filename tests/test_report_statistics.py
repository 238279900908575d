"""The report's statistics: sample std over seeds, evaluation std over FID runs, paired CIs."""
import math

import numpy as np
import pytest

from tf_hat_ebm.reproduction import statistics


def test_sample_std_is_ddof_one_and_needs_two_values():
  assert statistics.sample_std([1.0, 2.0, 3.0]) == pytest.approx(1.0)
  assert statistics.sample_std([1.0, 2.0, 3.0]) == pytest.approx(np.std([1, 2, 3], ddof=1))
  assert statistics.sample_std([5.0]) is None
  assert statistics.sample_std([5.0, None, float('nan')]) is None


def test_summary_keeps_the_seed_spread_and_the_evaluation_spread_apart():
  # Three seeds, each scored on two sample sets: seeds 10, 12, 14 (sd 2), runs +-0.5 (sd 0.707).
  s = statistics.summary([10.0, 12.0, 14.0], [[9.5, 10.5], [11.5, 12.5], [13.5, 14.5]])
  assert (s['mean'], s['std'], s['n'], s['eval_runs']) == (12.0, 2.0, 3, 2)
  assert s['eval_std'] == pytest.approx(math.sqrt(0.5))
  one = statistics.summary([19.3], [[19.1, 19.3, 19.5]])  # the paper scale: 1 seed, 3 FID runs
  assert one['std'] is None and one['eval_std'] == pytest.approx(0.2)
  assert statistics.summary([None, None])['mean'] is None


def test_t_interval_matches_the_t_table():
  mean, low, high = statistics.t_interval([1.0, 2.0, 3.0])
  half = 4.302653 / math.sqrt(3)  # t_{0.975, 2} * sd / sqrt(n)
  assert (mean, low, high) == pytest.approx((2.0, 2.0 - half, 2.0 + half), abs=1e-5)
  assert statistics.t_interval([4.0])[1:] == (None, None)


@pytest.mark.parametrize('better, worse, verdict', [
    ([10.0, 11.0, 12.0], [20.0, 21.5, 22.0], 'holds'),
    ([20.0, 21.5, 22.0], [10.0, 11.0, 12.0], 'reversed'),
    ([10.0, 11.0, 12.0], [11.0, 10.5, 13.0], 'not resolved at 3 seeds'),
])
def test_the_verdict_comes_from_the_paired_interval(better, worse, verdict):
  effect = statistics.paired_effect(better, worse)
  assert effect['verdict'] == verdict and effect['n'] == 3
  assert effect['text'].startswith(verdict) and '95% interval' in effect['text']


def test_pairing_resolves_what_unpaired_stds_hide():
  # Seeds differ a lot, the gap on each seed is ~1: the unpaired spreads overlap, the pairs do not.
  better, worse = [10.0, 20.0, 30.0], [11.0, 21.2, 30.9]
  assert abs(np.mean(worse) - np.mean(better)) < statistics.sample_std(better)
  assert statistics.paired_effect(better, worse)['verdict'] == 'holds'


def test_higher_is_better_scores_flip_the_sign():
  assert statistics.paired_effect([0.9, 0.95, 0.92], [0.5, 0.55, 0.6],
                                  lower_is_better=False)['verdict'] == 'holds'


def test_one_seed_says_it_has_no_interval():
  effect = statistics.paired_effect([14.0], [18.0])
  assert effect['verdict'] == 'one seed: no interval' and effect['low'] is None
  assert "+4.00 (the paper's sign)" in effect['text']


def test_a_failed_ablation_counts_only_beside_a_healthy_reference():
  effect = statistics.paired_effect([11.0, 12.0], [None, None], failed_seeds=[0, 1])
  assert effect['verdict'] == 'holds' and effect['failed_counted'] == [0, 1]
  both = statistics.paired_effect([None, 12.0], [None, None], failed_seeds=[0, 1])
  assert both['failed_not_counted'] == [0] and both['failed_counted'] == [1]
  assert 'both arms failed' in both['text']
  assert statistics.paired_effect([None], [None], failed_seeds=[0])['verdict'] == 'not measured'


def test_holm_steps_down_over_the_family_and_the_p_value_is_the_paired_t_tests():
  # sorted 0.01, 0.03, 0.04 of a family of 3: 3 x 0.01, max(0.03, 2 x 0.03), max(0.06, 0.04)
  assert statistics.holm([0.04, 0.01, None, 0.03]) == pytest.approx([0.06, 0.03, None, 0.06])
  assert statistics.holm([0.5, 0.9]) == [1.0, 1.0]  # capped
  # [1, 2, 3]: t = 2 / (1 / sqrt 3) = 3.464 on 2 degrees of freedom
  assert statistics.t_p_value([1.0, 2.0, 3.0]) == pytest.approx(0.07418, abs=1e-5)
  assert statistics.t_p_value([1.0]) is None
  assert statistics.paired_effect([1.0, 1.0, 1.0], [2.0, 3.0, 4.0])['p'] == pytest.approx(
      0.07418, abs=1e-5)


def test_the_relative_gain_is_the_interval_over_the_worse_arms_fid():
  effect = dict(mean=0.10, low=-1.12, high=1.33)  # DDLS - SN-GAN on the committed report
  assert statistics.relative_gain(effect, 29.82) == pytest.approx(
      (0.10 / 29.82, -1.12 / 29.82, 1.33 / 29.82))
  assert statistics.relative_gain(dict(mean=None), 29.82) == (None, None, None)
