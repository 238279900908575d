"""SN-GAN on the embedded digits at 16x16, minutes on 2 CPU cores (digits_refine.py's generator).

  python experiments/train_sngan.py
Mimicry's SN-GAN trained as the small-data literature trains a GAN on 1,500 images: DiffAugment's
translation and cutout on every input of D (Zhao et al. 2020), the synthesis generator's size
(64 wide, z 128), 4,800 generator steps with both rates decayed linearly to 0 over them.
Expected: an FID that falls to the end of the run (no late rise of a memorising D). Each choice
against its alternative on seeds 0-2, and the cost: docs/digits_settings.md, docs/experiments.md.
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('sngan'), 'digits_sngan', steps=4800, every=400)
  config.model.update(gen_width=64, disc_width=32, z_dim=128)
  # The weight average (training.gen_ema) stays off: with the rates decayed to 0 it gained nothing.
  config.training.update(diffaugment='translation,cutout', steps_per_loop=25, log_every=100)
  return config_lib.sized(config, size)
