"""Generator factories for `--config.generator.source=factory` in the benchmarks (fresh weights).

  python benchmarks/step_time.py --config=experiments/configs/cifar10_refine.py \
      --config.generator.source=factory --config.generator.path=factories:cifar10_sngan_generator \
      --config.generator.latent_shape='(128,)'
The script's directory is on sys.path when it runs, so the module is importable as `factories`.
"""
from tf_hat_ebm import nets


def cifar10_sngan_generator():
  """The CIFAR-10 SN-GAN generator's architecture (width 256, z_dim 128), untrained."""
  return nets.Generator(32, 3, 256, 128, 1.0).build_for_input()
