r"""Trains the deterministic autoencoder whose decoder the retrofit Hat EBM makes sampleable.

  python experiments/train_autoencoder.py                 # digits, ./workdir/digits_autoencoder
  python experiments/train_autoencoder.py --config=cifar10_autoencoder \
      --workdir=/data/runs/cifar10_autoencoder --config.data.data_dir=/data/tfds

Train and test reconstruction errors (MSE per pixel, images in [-1, 1]) are printed and written to
TensorBoard (eval/train_mse, eval/test_mse) once per epoch. Running again resumes.
"""
from tf_hat_ebm import cli

if __name__ == '__main__':
  # tf-hat-ebm-train with this default --config
  cli.main('train', default_config='digits_autoencoder')
