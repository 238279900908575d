"""Langevin sampling for the Hat EBM: the energy, one Langevin step, and the samplers built on it.

Energy of a pair (Y, Z):       U(Y, Z) = H(G(Z) + Y) / T  [+ tau * ||Y||^2, tau = 1 / (2 sigma^2)]
One Langevin step on state S:  S <- S - (eps^2 / 2) * grad_S U + eps * N(0, I)        (paper eq. 2)

The residual gradient is clipped per sample so that one step's drift never moves Y by more than
`max_drift` (2.5 in the authors' release, tuned for 32x32x3 images). Energies are divided by T down
to 1e-8, so gradients of 1e8..1e18 are normal: norms are computed with a max-abs rescaling that does
not overflow float32.
"""
import dataclasses
import math
from typing import Optional

import numpy as np

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class ChainSettings:
  """Settings of every Langevin chain: conditional (Y only), joint (Y and Z) and DDLS (Z only).

  A chain with latent_step_size > 0 is joint: each of the K iterations is a Y step (eps1 =
  step_size, drift clip, optional prior) and a Z step (eps2 = latent_step_size, gradient of
  H(G(Z)+Y)/T through G; no clip, no prior on Z, as in the paper), in the order Y, Z (paper) or
  Z, Y (`latent_first`, the authors' release). `use_residual=False` removes Y: the paper's unstable
  ablation U(z) = H(G(z))/T. `latent_sphere` keeps Z0 and every Z step on the sphere of radius
  sqrt(m) (projected Langevin), for a decoder trained only on such latents. DDLS reads steps,
  step_size and noise.
  """
  steps: int = 50                     # K
  step_size: float = 5e-4             # eps (image / residual space; DDLS: latent space)
  temperature: float = 1e-3           # T
  max_drift: Optional[float] = 2.5    # per-sample bound on ||(eps^2/2) grad_Y U||; None: no clip
  prior_sigma: Optional[float] = None  # Gaussian prior on Y; None: no prior
  noise: bool = True                  # False: gradient descent on U (for tests / diagnostics)
  init_scale: float = 0.0             # Y0 = init_scale * N(0, I) (0: the paper's Y0 = 0)
  latent_step_size: float = 0.0       # eps2; 0: Z fixed (the conditional chain)
  latent_first: bool = False
  use_residual: bool = True
  latent_sphere: bool = False

  @property
  def joint(self):
    return self.latent_step_size > 0

  def describe(self):
    """The chain in one line, as the model card, the export and the FID reports write it: K, the
    step sizes (eps_y and eps_z of a joint chain), T, Y0's scale, and the drift clip and prior on
    Y where there is one."""
    eps = (f'eps_y={self.step_size:g}, eps_z={self.latent_step_size:g}' if self.joint else
           f'eps={self.step_size:g}')
    parts = [f'K={self.steps}', eps, f'T={self.temperature:g}', f'Y0 scale={self.init_scale:g}']
    if self.max_drift is not None:
      parts.append(f'drift clip={self.max_drift:g}')
    if self.prior_sigma is not None:
      parts.append(f'prior sigma={self.prior_sigma:g}')
    return ', '.join(parts)

  @classmethod
  def from_config(cls, cfg):
    """From a config section. A field it does not hold keeps its default, but for max_drift: a
    section without one (DDLS) has no residual to clip."""
    fields = {'max_drift': None}
    for f in dataclasses.fields(cls):
      if f.name in cfg and cfg[f.name] is not None:
        # int and bool fields keep their type; the others (also the Optional ones) are floats
        cast = type(f.default) if isinstance(f.default, (bool, int)) else float
        fields[f.name] = cast(cfg[f.name])
      elif f.name in cfg:
        fields[f.name] = None
    return cls(**fields)


def _sample_axes(x):
  return list(range(1, len(x.shape)))


def per_sample_norm(x):
  """L2 norm of each sample (leading axis) without float32 overflow for entries up to ~1e38."""
  axes = _sample_axes(x)
  scale = tf.reduce_max(tf.abs(x), axis=axes, keepdims=True)
  safe = tf.where(scale > 0, scale, tf.ones_like(scale))
  norm = tf.sqrt(tf.reduce_sum(tf.square(x / safe), axis=axes, keepdims=True)) * safe
  return tf.reshape(norm, [-1])


def clip_per_sample(x, max_norm):
  """Rescales each sample of x to L2 norm at most max_norm. Returns (clipped, norms before)."""
  norm = per_sample_norm(x)
  factor = tf.minimum(1.0, max_norm / tf.maximum(norm, 1e-30))
  factor = tf.reshape(factor, [-1] + [1] * (len(x.shape) - 1))
  return x * factor, norm


def residual_prior_energy(y, prior_sigma):
  """tau * ||Y||^2 per sample with tau = 1 / (2 sigma^2); added to H/T undivided (as released)."""
  if prior_sigma is None:
    return tf.zeros(tf.shape(y)[:1], y.dtype)
  tau = 1.0 / (2.0 * prior_sigma**2)
  return tau * tf.reduce_sum(tf.square(y), axis=_sample_axes(y))


def hat_energy(hat, x, temperature):
  """Tempered energy H(x)/T per sample, in float32 whatever the network's compute dtype."""
  return tf.cast(hat(x), tf.float32) / temperature


def residual_energy_and_grad(hat, g_z, y, settings):
  """U(Y | G(Z)) = H(G(Z) + Y)/T + prior(Y) per sample, and its gradient with respect to Y."""
  with tf.GradientTape() as tape:
    tape.watch(y)
    energy = hat_energy(hat, g_z + y, settings.temperature)
    energy += residual_prior_energy(y, settings.prior_sigma)
    total = tf.reduce_sum(energy)  # samples are independent: grad of the sum is per-sample grads
  return energy, tape.gradient(total, y)


def langevin_step(state, grad, step_size, noise=None, max_drift=None):
  """One Langevin update S - (eps^2/2) grad + eps * noise, with optional per-sample drift clip.

  Clipping the drift to `max_drift` is clipping the gradient to max_drift / (eps^2 / 2).
  Returns (new state, per-sample gradient norm before clipping).
  """
  drift = 0.5 * step_size**2 * grad
  if max_drift is not None:
    drift, drift_norm = clip_per_sample(drift, max_drift)
    grad_norm = drift_norm / (0.5 * step_size**2)
  else:
    grad_norm = per_sample_norm(grad)
  new_state = state - drift
  if noise is not None:
    new_state += step_size * noise
  return new_state, grad_norm


def initial_residual(rng, shape, settings):
  if settings.init_scale > 0:
    return settings.init_scale * rng.normal(shape)
  return tf.zeros(shape)


def sample_conditional(hat, g_z, rng, settings, y0=None, generator_fn=None):
  """Conditional Hat EBM: K Langevin steps on Y with the generator output G(Z) held fixed.

  `g_z` is G(Z), computed once per chain by the caller (Z does not move). `generator_fn`, if given,
  recomputes G(Z) inside every step instead: the authors' release does this; it gives the same
  chain at ~1.8x the cost and exists only as the benchmark's baseline. Returns (Y_K, diagnostics)
  with diagnostics `residual_grad_norm` (mean over steps and samples of ||grad_Y U||, before
  clipping) and `residual_abs` (mean |Y_K|). States stay float32 whatever the networks' precision.
  """
  g_z = tf.stop_gradient(tf.cast(g_z, tf.float32))
  y = initial_residual(rng, tf.shape(g_z), settings) if y0 is None else tf.cast(y0, tf.float32)

  def body(k, y, grad_norm_sum):
    g = g_z if generator_fn is None else tf.cast(generator_fn(), tf.float32)
    _, grad = residual_energy_and_grad(hat, g, y, settings)
    noise = rng.normal(tf.shape(y)) if settings.noise else None
    y, grad_norm = langevin_step(y, grad, settings.step_size, noise, settings.max_drift)
    return k + 1, y, grad_norm_sum + tf.reduce_mean(grad_norm)

  _, y, grad_norm_sum = tf.while_loop(
      lambda k, *_: k < settings.steps, body,
      (tf.constant(0), y, tf.constant(0.0)))
  diagnostics = {
      'residual_grad_norm': grad_norm_sum / max(settings.steps, 1),
      'residual_abs': tf.reduce_mean(tf.abs(y)),
  }
  return tf.stop_gradient(y), diagnostics


# ---- Joint Hat EBM: alternating Langevin over the residual Y and the latent Z -------------------
def generate(generator, z):
  """G(z) in float32, G in inference mode (frozen batch norm, no dropout), for any Keras model."""
  return tf.cast(generator(z, training=False), tf.float32)


def project_to_sphere(z):
  """Each latent rescaled to norm sqrt(m), m its number of entries (where N(0, I) concentrates)."""
  m = float(np.prod(z.shape[1:]))
  norm = tf.sqrt(tf.reduce_sum(tf.square(z), axis=list(range(1, len(z.shape))), keepdims=True))
  return z * (math.sqrt(m) / tf.maximum(norm, 1e-12))


def initial_latent(generator, rng, settings, batch_size=None, z0=None):
  """Z0 ~ N(0, I) (or the given z0), on the sphere when settings.latent_sphere."""
  z = (rng.normal([batch_size, *tuple(generator.latent_shape)]) if z0 is None
       else tf.cast(z0, tf.float32))
  return project_to_sphere(z) if settings.latent_sphere else z


def sample(hat, generator, rng, settings, batch_size=None, z0=None, generator_fn=None,
           generator_training=False):
  """The chain `settings` describes, from Z0 ~ N(0, I) (or z0): (Z_K, Y_K, G(Z_K), diagnostics).

  Conditional (Z fixed, G(Z) computed once; `generator_fn` recomputes it per step, the release's
  baseline) or joint. Training, grids, evaluation and the exported model all sample through here.
  generator_training: the conditional start G(Z) with batch statistics (cooperative learning with
  batch norm, whose generator is fitted in that mode), not the moving ones.
  """
  if settings.joint:
    return sample_joint(hat, generator, rng, settings, batch_size=batch_size, z0=z0)
  z, g_z, y0 = conditional_start(generator, rng, settings, batch_size, z0, generator_training)
  y, diagnostics = sample_conditional(hat, g_z, rng, settings, y0=y0, generator_fn=generator_fn)
  return z, y, g_z, diagnostics


def conditional_start(generator, rng, settings, batch_size=None, z0=None, training=False):
  """(Z0, G(Z0), Y0) of the conditional chain: G(Z) once per chain, since Z stays fixed."""
  z = initial_latent(generator, rng, settings, batch_size, z0)
  g_z = tf.cast(generator(z, training=training) if training else generator(z), tf.float32)
  return z, g_z, initial_residual(rng, tf.shape(g_z), settings)


def sample_joint(hat, generator, rng, settings, batch_size=None, z0=None, y0=None):
  """Joint Hat EBM: K iterations of (Y step, then Z step) from Y0 = 0 and Z0 ~ N(0, I).

  `z0`/`y0` continue given states instead; settings.init_scale > 0 draws Y0 = init_scale N(0, I)
  after Z0. Noise is drawn in the order Z0 (if not given), then per iteration the Y noise and the
  Z noise (Z, then Y with settings.latent_first). Returns (Z_K, Y_K, G(Z_K), diagnostics):
  diagnostics are `latent_grad_norm` and `residual_grad_norm` (means over steps and samples,
  before any clipping), `latent_abs` (mean |Z_K|) and `residual_abs` (mean |Y_K|).
  With settings.latent_sphere, Z0 and every Z step are projected onto the sphere of radius sqrt(m)
  (projected Langevin): the chain can neither leave a decoder's domain nor inflate |Z| until G's
  input no longer changes.
  """
  sphere = settings.latent_sphere
  z = initial_latent(generator, rng, settings, batch_size, z0)
  g_z = generate(generator, z)
  if not settings.use_residual:
    y = tf.zeros_like(g_z)
  else:
    y = initial_residual(rng, tf.shape(g_z), settings) if y0 is None else tf.cast(y0, tf.float32)
  y_settings = dataclasses.replace(settings, steps=1)

  def half_steps(z, y, latent_sum, residual_sum, y_step=True, z_step=True):
    """[Y step with G(Z)], then [Z step with the new Y]: one pass of G serves both."""
    with tf.GradientTape() as tape:
      tape.watch(z)
      g_z = generate(generator, z)
      if y_step and settings.use_residual:
        with tape.stop_recording():
          _, grad_y = residual_energy_and_grad(hat, tf.stop_gradient(g_z), y, y_settings)
          noise = rng.normal(tf.shape(y)) if settings.noise else None
          y, y_norm = langevin_step(y, grad_y, settings.step_size, noise, settings.max_drift)
          residual_sum += tf.reduce_mean(y_norm)
      if not z_step:
        return z, y, latent_sum, residual_sum
      energy = tf.reduce_sum(hat_energy(hat, g_z + y, settings.temperature))
    grad_z = tape.gradient(energy, z)
    noise = rng.normal(tf.shape(z)) if settings.noise else None
    z, z_norm = langevin_step(z, grad_z, settings.latent_step_size, noise)
    if sphere:
      z = project_to_sphere(z)
    return z, y, latent_sum + tf.reduce_mean(z_norm), residual_sum

  def body(k, *state):
    return (k + 1, *half_steps(*state))

  state = (z, y, tf.constant(0.0), tf.constant(0.0))
  # The release's order (Z, Y) * K is Z, (Y, Z) * (K - 1), Y: the same loop with one half-step
  # added on either side.
  release = settings.latent_first and settings.steps > 0
  if release:
    state = half_steps(*state, y_step=False)
  _, *state = tf.while_loop(lambda k, *_: k < settings.steps - int(release), body,
                            (tf.constant(0), *state))
  if release:
    state = half_steps(*state, z_step=False)
  z, y, latent_sum, residual_sum = state
  steps = max(settings.steps, 1)
  z, y = tf.stop_gradient(z), tf.stop_gradient(y)
  diagnostics = {
      'latent_grad_norm': latent_sum / steps,
      'residual_grad_norm': residual_sum / steps,
      'latent_abs': tf.reduce_mean(tf.abs(z)),
      'residual_abs': tf.reduce_mean(tf.abs(y)),
  }
  return z, y, tf.stop_gradient(generate(generator, z)), diagnostics


# ---- DDLS baseline (Che et al. 2020): Langevin in z on E(z) = ||z||^2 / 2 - D(G(z)) -------------
def ddls_energy_and_grad(discriminator, generator, z):
  """E(z) = 0.5 ||z||^2 - D(G(z)) per sample (D: the logit) and its gradient with respect to z."""
  with tf.GradientTape() as tape:
    tape.watch(z)
    logit = tf.reshape(tf.cast(discriminator(generate(generator, z), training=False), tf.float32),
                       [-1])
    energy = 0.5 * tf.reduce_sum(tf.square(z), axis=_sample_axes(z)) - logit
    total = tf.reduce_sum(energy)
  return energy, tape.gradient(total, z)


def sample_ddls(discriminator, generator, rng, settings, batch_size=None, z0=None):
  """DDLS: K Langevin steps in z on E(z) from Z0 ~ N(0, I) (or z0). Returns (Z_K, G(Z_K))."""
  z = initial_latent(generator, rng, settings, batch_size, z0)

  def body(k, z):
    _, grad = ddls_energy_and_grad(discriminator, generator, z)
    noise = rng.normal(tf.shape(z)) if settings.noise else None
    z, _ = langevin_step(z, grad, settings.step_size, noise)
    return k + 1, z

  _, z = tf.while_loop(lambda k, _: k < settings.steps, body, (tf.constant(0), z))
  z = tf.stop_gradient(z)
  return z, tf.stop_gradient(generate(generator, z))
