r"""Samples of a trained Hat EBM as PNG grids and an .npz, and the Langevin-path figure.

  python experiments/sample.py --workdir=workdir/digits_synth --num_samples=100
  python experiments/sample.py --saved_model=exported/digits_synth --output=/tmp/samples

Writes labelled grids samples_grid_NNN.png (X = G(Z) + Y), generator_grid_NNN.png (G(Z)) and
residual_grid_NNN.png (Y on a symmetric scale printed on it), samples.npz (images,
generator_images, residuals in [-1, 1]) and langevin_path.png (per chain rows X and Y, G(Z) once
where Z is fixed, columns = chain steps, the mean energy along the chain below), the figure also
logged to <output>/tensorboard. The files are listed in <output>/.sample.manifest.json:
--overwrite replaces exactly those, and the output is never a workdir's own directory. The same
program as tf-hat-ebm-sample: tf_hat_ebm.samples.sample_run.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('sample')
