r"""Trains a joint Hat EBM on top of a frozen generator (refinement of a pretrained SN-GAN).

  python experiments/train_sngan.py        # first: the digits SN-GAN, workdir/digits_sngan
  python experiments/train_refinement.py   # then: workdir/digits_refine
  python experiments/train_refinement.py --config=cifar10_refine \
      --config.generator.path=/data/runs/cifar10_sngan --config.data.data_dir=/data/tfds

The generator comes from --config.generator.source/path ('sngan', 'autoencoder', 'savedmodel',
'factory'); a generator whose shapes do not match the config is an error before training starts.
Running the same command again resumes from the workdir's latest checkpoint.
"""
from tf_hat_ebm import cli

if __name__ == '__main__':
  cli.main('train', default_config='digits_refine')  # tf-hat-ebm-train with this default --config
