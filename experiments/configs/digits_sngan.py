"""SN-GAN on the embedded digits at 16x16, minutes on 2 CPU cores (digits_refine.py's generator).

  python experiments/train_sngan.py
2,400 generator steps (2x the first default, 1,200), both rates decayed linearly to 0 over them
(Mimicry's schedule): on seeds 0-2 its ends beat 1,200 steps' and 4,800 steps' are no better on
average; its FID is lowest early in a run, at a high rate, so the plateau rule reads the end as
past its best. Expected: an FID several times the Hat EBM refinement's over it. The measured FIDs
(at 600 to 4,800 steps) and cost: docs/digits_settings.md and docs/experiments.md.
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('sngan'), 'digits_sngan', steps=2400, every=200)
  # The synthesis generator's size (digits_synth.py); small-data GAN training: DiffAugment's
  # translation and cutout on every input of D, and G's weights averaged over ~1,000 steps.
  config.model.update(gen_width=64, disc_width=32, z_dim=128)
  config.training.update(diffaugment='translation,cutout', gen_ema=0.999)
  config.training.update(steps_per_loop=25, log_every=100)
  return config_lib.sized(config, size)
