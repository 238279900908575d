r"""Retrofit: trains a joint Hat EBM over the frozen decoder of a deterministic autoencoder.

  python experiments/train_autoencoder.py            # first: workdir/digits_autoencoder
  python experiments/train_retrofit.py               # then: workdir/digits_retrofit
  python experiments/train_retrofit.py --config=cifar10_retrofit \
      --config.generator.path=/data/runs/cifar10_autoencoder --config.data.data_dir=/data/tfds

The generator comes from --config.generator.source/path ('sngan', 'autoencoder', 'savedmodel',
'factory'); a generator whose shapes do not match the config is an error before training starts.
Running the same command again resumes from the workdir's latest checkpoint.
"""
from tf_hat_ebm import cli

if __name__ == '__main__':
  cli.main('train', default_config='digits_retrofit')  # tf-hat-ebm-train with this default --config
