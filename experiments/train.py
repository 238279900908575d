r"""Trains any experiment: the kind of run comes from the config's `experiment` (registry.py).

  python experiments/train.py --config=digits_synth
  python experiments/train.py --config=cifar10_refine \
      --config.generator.path=/data/runs/cifar10_sngan --workdir=gs://bucket/refine --tpu=my-tpu

The same program as the console command tf-hat-ebm-train; --help lists its flags and the shipped
configs (--config takes one's name or the path of a config file). train_synthesis.py,
train_refinement.py, train_retrofit.py, train_sngan.py and train_autoencoder.py are this program
with another default --config. The flags go to tf_hat_ebm.trainer.train_command. Running the
same command again resumes from the workdir's latest checkpoint.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('train')
