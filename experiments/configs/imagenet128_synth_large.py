"""'Scaled' ImageNet 128x128 synthesis: both networks twice as wide (ngf 2048).

Learning-rate schedule as imagenet128_synth.py (`:paper` selects the paper's).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import imagenet128_synth  # noqa: E402  pylint: disable=g-import-not-at-top


def get_config(schedule='release'):
  config = imagenet128_synth.get_config(schedule)
  config.name = 'imagenet128_synth_large'
  config.model.hat_width = 2048
  config.model.gen_width = 2048
  config.sampling.steps = 125   # the release's FID config of the scaled model (T 1e-8 as above)
  return config
