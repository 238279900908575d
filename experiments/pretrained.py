r"""Installs a ready-made digits model shipped with the package as a workdir (no training).

  python experiments/pretrained.py --model=digits_synth --workdir=workdir/digits_synth
  python experiments/sample.py --workdir=workdir/digits_synth

Models: digits_synth (synthesis), digits_sngan (the SN-GAN), digits_refine (its refinement, the
SN-GAN in <workdir>/generator), digits_autoencoder (its decoder) and digits_retrofit (over it,
likewise); --help lists the ones shipped.
Every file is checked against the sha256 in tf_hat_ebm/models/manifest.json before any is
written; a directory that is not empty is refused unless --overwrite. The same program as
tf-hat-ebm-pretrained: tf_hat_ebm.pretrained.install_command.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('pretrained')
