"""Inputs checked before the work: sample counts a metric cannot use are refused at the flags,
and every reader of a results or record file names the file and field of a malformed value."""
from tf_hat_ebm import validation
from tf_hat_ebm.evaluation import metrics


def test_the_least_sample_count_is_the_k_nn_manifolds():
  assert validation.MIN_METRIC_SAMPLES == metrics.K_NEAREST + 1
