"""What each kind samples to be scored: its methods (the Hat EBM, G(Z), DDLS), their labels and
the batches of each sample set; metrics.py scores them, evaluate.py and compare.py report them.

A kind's `samplers` hook (registry.Kind.hooks, `Samplers`) gives the `Methods` of a restored run.
Every method's images are in [-1, 1] (the baselines clipped as the Hat EBM's samples are); the
methods of a joint run all start from the same latents Z0.
"""
import dataclasses
import re
import types
from typing import Callable, Dict, Iterable, Optional, Protocol

import numpy as np
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import export
from tf_hat_ebm import generators
from tf_hat_ebm import langevin
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm import trained_run
from tf_hat_ebm import workdir as workdir_lib


@dataclasses.dataclass(frozen=True)
class Methods:
  """The methods of a run: `labels` {method: row label} in table order, the sampling `chain` in
  words, and `sets(num, seed, batch_size, r)`: the {method: images} batches of sample set r (`num`
  images of each method); sets share no chain. Methods that start from latents also give their
  `sampler` f(z0, seed) -> {method: images} (sample_all: the grids)."""
  labels: Dict[str, str]
  chain: str
  sets: Callable[[int, int, int, int], Iterable[Dict[str, tf.Tensor]]]
  sampler: Optional[Callable[[tf.Tensor, tf.Tensor], Dict[str, tf.Tensor]]] = None


class Samplers(Protocol):
  """A kind's `samplers` hook: the Methods of a run (the Hat EBM alone without `baselines`)."""

  def __call__(self, run: trained_run.Run, baselines: bool = True) -> Methods:
    ...


class LoadRun(Protocol):
  """A kind's `sampler_run` hook: its run read for its samplers when it has no inference model
  for trained_run.load_run (an SN-GAN's generator alone)."""

  def __call__(self, workdir: str, checkpoint: Optional[str] = None):
    ...


def synthesis(run, baselines=True):
  """The Hat EBM's samples X = G(Z) + Y and (`baselines`) its generator alone G(Z), of the same
  chains; set r draws the streams (seed, batch, r) of the exported module's `sample`."""
  module = export.build_module(run)
  labels = {'hat_ebm': 'Hat EBM samples X = G(Z) + Y', 'generator': 'generator alone G(Z)'}
  labels = labels if baselines else {'hat_ebm': labels['hat_ebm']}

  def sets(num, seed, batch_size, r):
    for out in samples_lib.sample_batches(module, num, batch_size, seed, r):
      # G(Z) is scored as an image, clipped to [-1, 1] as the Hat EBM samples are.
      both = {'hat_ebm': out['images'],
              'generator': tf.clip_by_value(out['generator_images'], -1.0, 1.0)}
      yield {k: both[k] for k in labels}

  return Methods(labels, run.model.sampling.describe(), sets)


def joint(run, baselines=True):
  """From one Z0: the frozen generator G(Z0), DDLS (when there is a D) and the Hat EBM; the Hat
  EBM alone without `baselines` (an ablation arm: DDLS's chain is most of the cost)."""
  model = run.model
  gan = {'sngan': 'SN-GAN', 'autoencoder': 'decoder'}.get(run.config.generator.source, 'generator')
  labels = {'generator': f'{gan} G(Z0)', 'ddls': 'DDLS (Langevin in z, SN-GAN D)',
            'hat_ebm': 'Hat EBM X = G(Z_K) + Y_K'}
  sampled = ['hat_ebm'] + (['generator'] if baselines else []) + (
      ['ddls'] if baselines and model.discriminator is not None else [])
  d = run.config.ddls
  chain = f'{model.sampling.describe()}; DDLS K={d.steps}, eps={d.step_size:g}'
  sampler = make_sampler(run, baselines)
  return Methods({k: v for k, v in labels.items() if k in sampled}, chain,
                 latent_sets(model, sampler), sampler)


def sngan(run, baselines=True):
  """An SN-GAN run's generator alone, from the latents a refinement over it draws (joint); it is
  the baseline itself, so `baselines` changes nothing."""
  del baselines
  generator = run.model.generator
  sample = tf.function(
      lambda z0, seed: {'generator': tf.clip_by_value(langevin.generate(generator, z0), -1., 1.)})
  return Methods({'generator': 'SN-GAN G(Z0)'}, 'none (Z0 ~ N(0, I))',
                 latent_sets(run.model, sample), sample)


def load_sngan_run(workdir, checkpoint=None):
  """An SN-GAN workdir as a run whose model is its frozen `generator` (no Hat EBM to load)."""
  config = workdir_lib.load_config(workdir, lambda _: config_lib.sngan_defaults())
  path = checkpoints.resolve_checkpoint(workdir, checkpoint, what='SN-GAN',
                                        script='experiments/train_sngan.py')
  model, _ = generators.load_sngan(workdir, config, path)
  generator = generators.FrozenGenerator(model, model.latent_shape)
  step = re.search(r'ckpt-(\d+)$', path)
  return types.SimpleNamespace(config=config, model=types.SimpleNamespace(generator=generator),
                               step=int(step.group(1)) if step else None, checkpoint=path)


def make_sampler(run, baselines=True):
  """f(z0, seed) -> {'generator', 'ddls' (when G comes with a discriminator), 'hat_ebm'} tensors
  of a restored joint run (trained_run.load_run); only {'hat_ebm'} without `baselines`.

  Every method starts from the same Z0; the chains' noise comes from a generator seeded `seed`.
  The Hat EBM samples through the exported module's chain: what export.py saves is what is scored.
  """
  model = run.model
  module = export.build_module(run)
  ddls = langevin.ChainSettings.from_config(run.config.ddls)
  rng = tf.random.Generator.from_seed(0)

  @tf.function
  def sample(z0, seed):
    rng.reset_from_seed(seed)
    # G alone sees the chain's Z0 (on the decoder's sphere when the chain keeps Z there).
    out = {}
    if baselines:
      z_start = langevin.initial_latent(model.generator, rng, model.sampling, z0=z0)
      out['generator'] = langevin.generate(model.generator, z_start)
    if baselines and model.discriminator is not None:
      out['ddls'] = langevin.sample_ddls(model.discriminator, model.generator, rng, ddls,
                                         z0=z0)[1]
    out['hat_ebm'] = module.chain(rng, latents=z0)['images']
    # every method is scored as an image in the data range, as the Hat EBM's samples are
    return {k: tf.clip_by_value(v, -1.0, 1.0) for k, v in out.items()}

  return sample


def latent_batches(model, num, seed, batch_size=250, run=0):
  """(Z0, seed) of each batch of `num` latents; batch b draws the stream (seed, b, run)."""
  for b, start in enumerate(range(0, num, batch_size)):
    n = min(batch_size, num - start)
    s = samples_lib.stream_seed(seed, b, run)
    z0 = tf.random.Generator.from_seed(s).normal([n, *model.generator.latent_shape])
    yield z0, tf.constant(s, tf.int64)


def latent_sets(model, sampler):
  """Methods.sets of a sampler f(z0, seed) -> {method: images}: set r draws the latent streams
  (seed, batch, r + 1); stream 0 is the grids' (sample_all), never scored."""
  def sets(num, seed, batch_size, r):
    for z0, s in latent_batches(model, num, seed, batch_size, r + 1):
      yield sampler(z0, s)
  return sets


def sample_all(model, sampler, num, seed, batch_size=250):
  """`num` samples of every method, in batches; batch b draws the stream (seed, b)."""
  parts = [{k: v.numpy() for k, v in sampler(z0, s).items()}
           for z0, s in latent_batches(model, num, seed, batch_size)]
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
