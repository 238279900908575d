"""FLOP counts of networks and of one Hat EBM training step (for the speed harness).

Forward FLOPs of a network come from tf.profiler on a loop-free graph of one call. A training step
contains while-loops (the Langevin chain) that a static profile counts once, so the step total is
composed analytically from per-image forward counts h (hat network H) and g (generator G):
  input-gradient pass ~ 1x forward, weight-gradient pass ~ 1x forward
  EBM update (both):  2B x (H forward + input-grad + weight-grad)       = 6 B h

Synthesis (conditional chain, langevin.sample_conditional; G trains in tandem):
  conditional chain:  K x B x (H forward + H input-gradient)          = 2 K B h
  generator:          B x G forward (chain) + B x 3 G (update)          = 4 B g
(with `recompute_generator` the chain adds K x B x g: the release's extra work).

Joint (langevin.sample_joint over a frozen G; only H trains). One iteration, per image:
  G(Z) forward on the tape watching Z, shared by both half-steps        g
  Y step: H(G(Z) + Y) forward + input gradient with G(Z) held fixed      2h  (0 without residual)
  Z step: H(G(Z) + Y') forward, gradient back through H, then through G  2h + g
so (2g + 4h) per iteration, (2g + 2h) without the residual (use_residual=False: no Y step).
Around the loop: G(Z0) before it (it fixes Y0's shape) and G(Z_K) after it            2g
The release's order (latent_first, K > 0) runs a Z-only half-step, K - 1 iterations and a Y-only
half-step; each half-step computes G(Z) on its own, so the same work plus one G forward      g
  joint chain:  B x (2g + K (2g + 4h) [+ g with latent_first])   (4h -> 2h without residual)
  joint step:   joint chain + EBM update 6 B h       (G is frozen: no generator update)
Counted as sample_joint is written; graph optimisation may prune G(Z0), of which only the shape
is used.
"""
from typing import Callable, Optional, Tuple

import ml_collections
import tensorflow as tf

from tf_hat_ebm import langevin

# A kind's `flops` hook (registry.Kind.hooks): (config, h, g, batch, steps) -> (FLOPs of a training
# step, of one chain), at per-image forward FLOPs h (hat) and g (generator).
StepFlops = Callable[[ml_collections.ConfigDict, float, float, int, int], Tuple[float, float]]


def step_flops(kind, config, h, g, batch, steps) -> Optional[Tuple[float, float]]:
  """The kind's StepFlops at these sizes, or None when it has no formula."""
  formula: Optional[StepFlops] = kind.load_hook('flops')
  return formula(config, h, g, batch, steps) if formula else None


def forward_flops(model, input_shape, dtype=tf.float32):
  """Float operations of model(x) for x of input_shape (batch included), by tf.profiler."""
  fn = tf.function(lambda x: model(x))
  graph = fn.get_concrete_function(tf.TensorSpec(input_shape, dtype)).graph
  opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
  opts['output'] = 'none'
  info = tf.compat.v1.profiler.profile(graph, options=opts)
  return int(info.total_float_ops)


def synthesis_step_flops(hat_flops_per_image, gen_flops_per_image, batch, steps,
                         recompute_generator=False):
  """Needed FLOPs of one tandem training step at per-image forward costs h and g."""
  h, g = hat_flops_per_image, gen_flops_per_image
  chain = 2 * steps * batch * h + (steps * batch * g if recompute_generator else 0)
  return chain + 6 * batch * h + 4 * batch * g


def sampler_flops(hat_flops_per_image, gen_flops_per_image, batch, steps,
                  recompute_generator=False):
  """FLOPs of one conditional chain including the one G(Z) forward."""
  h, g = hat_flops_per_image, gen_flops_per_image
  return steps * batch * (2 * h + (g if recompute_generator else 0)) + batch * g


def joint_sampler_flops(hat_flops_per_image, gen_flops_per_image, batch, steps,
                        latent_first=False, use_residual=True):
  """FLOPs of one joint chain (langevin.sample_joint): K iterations of a Y and a Z step."""
  h, g = hat_flops_per_image, gen_flops_per_image
  per_iteration = 2 * g + (4 if use_residual else 2) * h
  split_half_steps = g if latent_first and steps > 0 else 0
  return batch * (2 * g + steps * per_iteration + split_half_steps)


def joint_step_flops(hat_flops_per_image, gen_flops_per_image, batch, steps, latent_first=False,
                     use_residual=True):
  """Needed FLOPs of one joint training step: the chain and the hat network's update."""
  return (joint_sampler_flops(hat_flops_per_image, gen_flops_per_image, batch, steps,
                              latent_first, use_residual)
          + 6 * batch * hat_flops_per_image)


def synthesis(config, h, g, batch, steps):
  """(FLOPs of a synthesis training step, of its chain): the synthesis kind's formula."""
  del config  # the timed variants all do the same work but `release` (its own baseline)
  return synthesis_step_flops(h, g, batch, steps), sampler_flops(h, g, batch, steps)


def joint(config, h, g, batch, steps):
  """(FLOPs of a joint training step, of its chain) in the config's chain order."""
  settings = langevin.ChainSettings.from_config(config.langevin)
  order = dict(latent_first=settings.latent_first, use_residual=settings.use_residual)
  return (joint_step_flops(h, g, batch, steps, **order),
          joint_sampler_flops(h, g, batch, steps, **order))
