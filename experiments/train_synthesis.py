r"""Trains a synthesis Hat EBM: hat network and generator in tandem (paper Alg. 1).

  python experiments/train_synthesis.py             # embedded digits, ./workdir/digits_synth
  python experiments/train_synthesis.py --config=experiments/configs/cifar10_synth.py \
      --workdir=gs://bucket/cifar10 --tpu=my-tpu --config.data.data_dir=gs://bucket/tfds

Running the same command again resumes from the workdir's latest checkpoint.
"""
import train  # experiments/train.py with this script's default --config

if __name__ == '__main__':
  train.run('digits_synth.py')
