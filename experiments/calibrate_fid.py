r"""How far the digits FID can go at a sample size N, and the class coverage of models' samples.

  python experiments/calibrate_fid.py --workdir=workdir/digits_synth --num=1000 \
      --samples=synthesis=samples/synthesis/samples.npz --output=calibration.json

For the dataset of --workdir's run (its config.json), against the train split's statistics: the
FID of --num held-out test digits (the floor), of --num training digits (a generator that copied
its data) and of --num test digits without one class (a missing mode), each over --runs draws
without replacement, or, for a set smaller than --num (the 297 test digits), extrapolated from a
fit FID(n) = a + b / n over its subsamples, with the fit's standard error and the pool's own
variance (the fit redone on subsets of the pool: a delete-d jackknife). Per --samples file (an
.npz of sample.py, its `images`): the class histogram by the FID's own classifier, the share of
its rarest class, and the distance of each sample to its nearest training image beside the test
digits' own.
Writes --output (JSON). The same program as tf-hat-ebm-calibrate-fid:
tf_hat_ebm.evaluation.calibration.calibrate_command.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('calibrate-fid')
