r"""Out-of-distribution detection by the energy H(x) (the paper's Table 3): AUROC per OOD set.

  python experiments/evaluate_ood.py --workdir=workdir/digits_synth
  python experiments/evaluate_ood.py --workdir=/data/runs/cifar10 --data_dir=/data/tfds

In-distribution: the test split of the run's dataset. OOD sets: tfds svhn_cropped, cifar100,
celeb_a (resized to the model's resolution), or for digits the offline sets of
tf_hat_ebm/evaluation/ood.py. Higher energy = OOD. The same program as tf-hat-ebm-evaluate-ood:
tf_hat_ebm.evaluation.ood.evaluate_run.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('evaluate-ood')
