"""SN-GAN on the embedded digits at 16x16, minutes on 2 CPU cores (digits_refine.py's generator).

  python experiments/train_sngan.py
2,400 generator steps, both rates decayed linearly to 0 over them (Mimicry's schedule): on 1,500
digits the end of a run scores better the longer the run (seed 0: 40.1 at 600 steps, 34.5 at
1,200, 27.1 at 2,400; at 2,400 seeds 1 and 2 scored 40.4 and 20.5 against 46.0 and 35.1 at 1,200;
digits classifier, 2 x 1,000 samples; docs/experiments.md). Its FID is lowest early in a run, at
a high rate (17-19 at steps 400-1,200 of seed 0's 2,400), so the plateau rule reads the end as
past its best. At 4,800 steps seeds 0 and 1 ended at 18.63 and 55.68.
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = config_lib.digits(registry.defaults('sngan'), 'digits_sngan', steps=2400, every=200)
  config.model.update(gen_width=32, disc_width=32, z_dim=16)
  config.training.update(steps_per_loop=25, log_every=100)
  return config_lib.sized(config, size)
