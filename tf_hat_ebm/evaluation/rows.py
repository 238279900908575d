"""The FID rows each kind offers (its `fid_rows` hook, evaluation.fid.FidRows), for evaluate_fid.py.

Each function gives ([(method, row label)], {method: [FID per run]}, chain description).
"""
import re
import types

import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import export
from tf_hat_ebm import generators
from tf_hat_ebm import langevin
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.evaluation import compare
from tf_hat_ebm.evaluation import fid


def synthesis(run, net, train, num_samples, runs, seed, batch_size, baselines=True):
  """The Hat EBM's samples X = G(Z) + Y and (`baselines`) its generator alone G(Z)."""
  module = export.build_module(run)
  fids = fid.sample_fids(module, net, train, num_samples, batch_size, runs, seed)
  chain = run.model.sampling.describe()
  rows = [('hat_ebm', 'Hat EBM samples X = G(Z) + Y'), ('generator', 'generator alone G(Z)')]
  return rows[:2 if baselines else 1], fids, chain


def joint(run, net, train, num_samples, runs, seed, batch_size, baselines=True):
  """From one Z0: the frozen generator G(Z0), DDLS (when there is a D) and the Hat EBM; the Hat
  EBM alone without `baselines` (an ablation arm: DDLS's chain is most of the cost)."""
  sampler = compare.make_sampler(run, baselines)
  fids = compare.method_fids(run.model, sampler, net, train, num_samples, runs, seed,
                             batch_size, verbose=True)
  gan = {'sngan': 'SN-GAN', 'autoencoder': 'decoder'}.get(run.config.generator.source, 'generator')
  rows = [('generator', f'{gan} G(Z0)'), ('ddls', 'DDLS (Langevin in z, SN-GAN D)'),
          ('hat_ebm', 'Hat EBM X = G(Z_K) + Y_K')]
  d = run.config.ddls
  chain = f'{run.model.sampling.describe()}; DDLS K={d.steps}, eps={d.step_size:g}'
  return [r for r in rows if r[0] in fids], fids, chain


def sngan(run, net, train, num_samples, runs, seed, batch_size, baselines=True):
  """An SN-GAN run's generator alone, from the latents a refinement over it draws (joint); it is
  the baseline itself, so `baselines` changes nothing."""
  del baselines
  generator = run.model.generator
  sample = tf.function(
      lambda z0, seed: {'generator': tf.clip_by_value(langevin.generate(generator, z0), -1., 1.)})
  fids = compare.method_fids(run.model, sample, net, train, num_samples, runs, seed, batch_size,
                             verbose=True)
  return [('generator', 'SN-GAN G(Z0)')], fids, 'none (Z0 ~ N(0, I))'


def load_sngan_run(workdir, checkpoint=None):
  """An SN-GAN workdir as a run whose model is its frozen `generator` (no Hat EBM to load)."""
  config = workdir_lib.load_config(workdir, lambda _: config_lib.sngan_defaults())
  path = checkpoints.resolve_checkpoint(workdir, checkpoint, what='SN-GAN',
                                        script='experiments/train_sngan.py')
  model, _ = generators.load_sngan(workdir, config, path)
  generator = generators.FrozenGenerator(model, model.latent_shape)
  step = re.search(r'ckpt-(\d+)$', path)
  return types.SimpleNamespace(config=config, model=types.SimpleNamespace(generator=generator),
                               step=int(step.group(1)) if step else None)
