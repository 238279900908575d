r"""Trains the deterministic autoencoder whose decoder the retrofit Hat EBM makes sampleable.

  python experiments/train_autoencoder.py                 # digits, ./workdir/digits_autoencoder
  python experiments/train_autoencoder.py --config=experiments/configs/cifar10_autoencoder.py \
      --workdir=/data/runs/cifar10_autoencoder --config.data.data_dir=/data/tfds

Train and test reconstruction errors (MSE per pixel, images in [-1, 1]) are printed and written to
TensorBoard (eval/train_mse, eval/test_mse) once per epoch. Running again resumes.
"""
import train  # experiments/train.py with this script's default --config

if __name__ == '__main__':
  train.run('digits_autoencoder.py')
