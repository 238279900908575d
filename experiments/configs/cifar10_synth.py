"""CIFAR-10 32x32 synthesis: the paper's run (the synthesis defaults are its appendix table).

  python experiments/train_synthesis.py --config=experiments/configs/cifar10_synth.py
The release trained 50,000 steps at T 1e-8 (--config.langevin.temperature=1e-8).
"""
from tf_hat_ebm import registry


def get_config():
  config = registry.defaults('synthesis')
  config.name = 'cifar10_synth'
  return config
