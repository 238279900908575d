r"""Trains the SN-GAN baseline whose frozen generator (and discriminator, for DDLS) refinement uses.

  python experiments/train_sngan.py                    # embedded digits, ./workdir/digits_sngan
  python experiments/train_sngan.py --config=experiments/configs/cifar10_sngan.py \
      --workdir=/data/runs/cifar10_sngan --config.data.data_dir=/data/tfds

Running the same command again resumes from the workdir's latest checkpoint.
"""
import train  # experiments/train.py with this script's default --config

if __name__ == '__main__':
  train.run('digits_sngan.py')
