r"""The README's gallery figure from a trained run: X = G(Z) + Y, G(Z), Y and a Langevin path.

  python experiments/gallery.py --workdir=workdir/digits_synth --out=docs/gallery.png

Draws --num samples of the run's sampling chain (seed --seed) as three labelled panels, and below
them the Langevin path of --path_chains chains, in one PNG. The same program as
tf-hat-ebm-gallery: tf_hat_ebm.samples.gallery.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('gallery')
