"""'Scaled' ImageNet 128x128 synthesis: both networks twice as wide (ngf 2048).

  python experiments/train_synthesis.py --config=experiments/configs/imagenet128_synth_large.py
Learning-rate schedule as imagenet128_synth.py (`:paper` selects the paper's).
"""
import importlib.util
import os

_SPEC = importlib.util.spec_from_file_location(
    'imagenet128_synth', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      'imagenet128_synth.py'))
imagenet128_synth = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(imagenet128_synth)


def get_config(schedule='release'):
  config = imagenet128_synth.get_config(schedule)
  config.name = 'imagenet128_synth_large'
  config.model.update(hat_width=2048, gen_width=2048)
  config.sampling.steps = 125   # the release's FID chain of the scaled model
  return config
