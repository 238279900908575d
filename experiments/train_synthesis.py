r"""Trains a synthesis Hat EBM: hat network and generator in tandem (paper Alg. 1).

  python experiments/train_synthesis.py             # embedded digits, ./workdir/digits_synth
  python experiments/train_synthesis.py --config=cifar10_synth \
      --workdir=gs://bucket/cifar10 --tpu=my-tpu --config.data.data_dir=gs://bucket/tfds

Running the same command again resumes from the workdir's latest checkpoint.
"""
from tf_hat_ebm import cli

if __name__ == '__main__':
  cli.main('train', default_config='digits_synth')  # tf-hat-ebm-train with this default --config
