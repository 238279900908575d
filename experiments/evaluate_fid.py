r"""FID, KID (and every metric of evaluation/metrics.py) of a trained Hat EBM beside its baselines,
all on one feature network.

  python experiments/evaluate_fid.py --workdir=workdir/digits_synth    # small-data FID (classifier)
  python experiments/evaluate_fid.py --workdir=/data/runs/cifar10 --inception_path=/data/inception
  python experiments/evaluate_fid.py --workdir=workdir/digits_refine  # SN-GAN, DDLS and Hat EBM
  python experiments/evaluate_fid.py --workdir=workdir/digits_sngan   # the SN-GAN on its own

Synthesis runs: the Hat EBM's samples X = G(Z) + Y and its generator alone G(Z). Joint runs
(refinement, retrofit): from the same latents Z0, the generator alone G(Z0) (the SN-GAN of a
refinement), DDLS (when the generator comes with a discriminator; config.ddls) and the Hat EBM's
joint chain X = G(Z_K) + Y_K. SN-GAN runs: G(Z0) from the latents a refinement over it would
draw (the same seeds give the same number as its G(Z0) row). Samples come from the config's
`sampling` chain and are scored against the train split; --runs independent sample sets give
mean +- std; written to <workdir>/fid.json (its schema: docs/usage.md). Features: Inception for
CIFAR-10 / CelebA / ImageNet, the digits classifier for the digits. The same program as
tf-hat-ebm-evaluate-fid: tf_hat_ebm.evaluation.evaluate.evaluate_run.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('evaluate-fid')
