r"""Trains the SN-GAN baseline whose frozen generator (and discriminator, for DDLS) refinement uses.

  python experiments/train_sngan.py                    # embedded digits, ./workdir/digits_sngan
  python experiments/train_sngan.py --config=cifar10_sngan \
      --workdir=/data/runs/cifar10_sngan --config.data.data_dir=/data/tfds

Running the same command again resumes from the workdir's latest checkpoint.
"""
from tf_hat_ebm import cli

if __name__ == '__main__':
  cli.main('train', default_config='digits_sngan')  # tf-hat-ebm-train with this default --config
