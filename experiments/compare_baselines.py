r"""The Hat EBM beside its baselines, for any run over a frozen generator (refinement, retrofit).

  python experiments/compare_baselines.py --workdir=workdir/digits_refine    # SN-GAN, DDLS, Hat EBM
  python experiments/compare_baselines.py --workdir=workdir/digits_retrofit  # decoder, Hat EBM

All three start from the same latents Z0 ~ N(0, I): G(Z0); DDLS (Langevin in z on
||z||^2/2 - D(G(z)), config.ddls); the Hat EBM's joint chain (config.sampling), X = G(Z_K) + Y_K.
Writes <workdir>/compare/{generator,ddls,hat_ebm,side_by_side}.png (the first --num samples). For
the digits it also prints and writes scores.json: per method, the small-data FID against the train
split (features of the cached digits classifier, --fid_samples samples, --fid_runs runs, mean and
std), the classifier confidence, a digit Inception-Score analogue and the nearest-train distance,
with the real test digits as the reference row. The same program as tf-hat-ebm-compare:
tf_hat_ebm.evaluation.compare.compare_run.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('compare')
