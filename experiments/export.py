r"""Exports a trained Hat EBM as a SavedModel (tf.saved_model.load / tensorflow_hub.load).

  python experiments/export.py --workdir=workdir/digits_synth --output=exported/digits_synth

Signatures: sample(num_samples, seed) -> images in [-1, 1] (the config's sampling chain, same
K / eps / T, deterministic for a seed), sample_path(num_samples, seed) -> the same chains at
--path_steps, energy(images) -> per-image energies H(x). An existing SavedModel at --output is
only replaced with --overwrite, and only once the new one is written completely. The same
program as tf-hat-ebm-export: tf_hat_ebm.export.export_run.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('export')
