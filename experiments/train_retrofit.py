r"""Retrofit: trains a joint Hat EBM over the frozen decoder of a deterministic autoencoder.

  python experiments/train_autoencoder.py            # first: workdir/digits_autoencoder
  python experiments/train_retrofit.py               # then: workdir/digits_retrofit
  python experiments/train_retrofit.py --config=experiments/configs/cifar10_retrofit.py \
      --config.generator.path=/data/runs/cifar10_autoencoder --config.data.data_dir=/data/tfds

The generator comes from --config.generator.source/path ('sngan', 'autoencoder', 'savedmodel',
'factory'); a generator whose shapes do not match the config is an error before training starts.
Running the same command again resumes from the workdir's latest checkpoint.
"""
import train  # experiments/train.py with this script's default --config

if __name__ == '__main__':
  train.run('digits_retrofit.py')
