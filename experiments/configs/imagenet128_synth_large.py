"""'Scaled' ImageNet 128x128 synthesis: both networks twice as wide (ngf 2048).

  python experiments/train_synthesis.py --config=experiments/configs/imagenet128_synth_large.py
Learning-rate schedule as imagenet128_synth.py (`:paper` selects the paper's).
"""
from tf_hat_ebm import config as config_lib


def get_config(schedule='release'):
  config = config_lib.sibling(__file__, 'imagenet128_synth', schedule)
  config.name = 'imagenet128_synth_large'
  config.model.update(hat_width=2048, gen_width=2048)
  config.sampling.steps = 125   # the release's FID chain of the scaled model
  return config
