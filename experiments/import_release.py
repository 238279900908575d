r"""Turns the authors' published models (Keras save_weights checkpoints) into a tf_hat_ebm workdir.

  python experiments/import_release.py --config=cifar10_synth \
      --hat=release/cifar10/ebm.ckpt --generator=release/cifar10/gen.ckpt \
      --workdir=workdir/release_c10
  python experiments/import_release.py --config=cifar10_retrofit \
      --hat=release/retrofit/ebm.ckpt --decoder=release/retrofit/dec.ckpt \
      --workdir=workdir/release_rf

--hat/--generator/--decoder take a checkpoint prefix (the path given to save_weights, without
.index). The config must describe the published networks (resolution, widths, latent size):
every variable is checked by name and shape. Joint configs get the generator (refinement) or
decoder (retrofit) in --generator_workdir (default <workdir>/generator). The workdir then works
with sample.py, evaluate_fid.py, evaluate_ood.py and export.py. Each workdir appears complete or
not at all (written beside it, then renamed); an interrupted import is finished by the same
command, and a workdir holding anything else is refused. The same program as
tf-hat-ebm-import-release: tf_hat_ebm.release_import.import_command.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('import-release')
