"""Embedded default: synthesis Hat EBM on the scikit-learn digits at 16x16, minutes on 2 CPU cores.

  python experiments/train_synthesis.py
9,000 steps: the plateau measured on seeds 0-2 (docs/reproduce.md, Converged arms).
Expected: the FID of X = G(Z) + Y below or near its generator G(Z)'s (digits classifier; the
generator alone catches up late in training); the measured FIDs and cost: docs/digits_settings.md
(Expected results and cost).
Data noise 0.03 hides the bilinear upscaling grid the hat would learn, and a 1,000-entry bank keeps
the generator's targets ~30 steps old (docs/experiments.md: both ran away without).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('synthesis'), 'digits_synth', steps=9000,
                             every=500)
  config.model.update(hat_width=32, gen_width=64)
  # 20 steps at T 1e-8; drift 0.5 per step (2.5 was tuned for 32x32x3 and leaves stripes here).
  config.langevin.update(steps=20, temperature=1e-8, max_drift=0.5)
  config.sampling.update(steps=20, temperature=1e-8, max_drift=0.5, init_scale=0.0)
  config.training.update(data_eps=0.03, bank_size=1000)
  return config_lib.sized(config, size)
