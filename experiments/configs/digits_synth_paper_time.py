"""The digits synthesis (digits_synth.py) at the paper's Langevin time, as digits_refine.py keeps
it: K = 20 steps, each step size the paper's times sqrt(K_paper / K) (training: the paper's 50;
the FID chain: the release's 125), so K eps^2 / 2 is the paper's (digits_synth.py: 0.4x and 0.16x).

  python experiments/train_synthesis.py --config=experiments/configs/digits_synth_paper_time.py
Measured beside digits_synth.py on seeds 0-2 by the reproduction (its paper_time arm, paired);
the result and which of the two the digits keep: docs/reproduce.md.
"""
import math

from tf_hat_ebm import config as config_lib

PAPER_K = dict(langevin=50, sampling=125)  # the appendix's training K; the release's FID chain


def get_config(size=None):
  config = config_lib.sibling(__file__, 'digits_synth', size)
  config.name = 'digits_synth_paper_time'
  for name, paper_k in PAPER_K.items():
    chain = config[name]
    chain.step_size = chain.step_size * math.sqrt(paper_k / chain.steps)
  return config
