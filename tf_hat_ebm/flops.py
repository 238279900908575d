"""FLOP counts of networks and of one Hat EBM training step (for the speed harness).

Forward FLOPs of a network come from tf.profiler on a loop-free graph of one call. A training step
contains while-loops (the Langevin chain) that a static profile counts once, so the step total is
composed analytically from forward counts:
  input-gradient pass ~ 1x forward, weight-gradient pass ~ 1x forward
  conditional chain:  K x B x (H forward + H input-gradient)          = 2 K B h
  EBM update:         2B x (H forward + input-grad + weight-grad)       = 6 B h
  generator:          B x G forward (chain) + B x 3 G (update)          = 4 B g
(with `recompute_generator` the chain adds K x B x g: the release's extra work).
"""
import tensorflow as tf


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
