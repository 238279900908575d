"""The metrics of an evaluation: each scores one pool of sample features against the reference's.

A metric is a function (reference activations [n, d], sample activations [m, d]) -> float and a
row of results.METRICS (its label, decimals and direction, written into every result, and where
it is shown). `score_sets` draws each method's pool of features once per sample set and scores
it with every metric, so adding a metric is its function plus its row there.
"""
import time

import numpy as np

from tf_hat_ebm import interrupts
from tf_hat_ebm import progress
from tf_hat_ebm import registry
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.evaluation import fid

KID_BLOCK = 1024  # TF-GAN's max_block_size: KID is the mean of its blocks' unbiased MMD^2
K_NEAREST = 3  # Kynkaanniemi et al. 2019's k of the k-NN manifold


def kernel_distance(reference, samples, block=KID_BLOCK):
  """KID (Binkowski et al. 2018): the unbiased MMD^2 with the kernel (x.y / d + 1)^3, averaged
  over blocks of at most `block` images of each set, as TF-GAN's
  kernel_classifier_distance_from_activations (float64 here). Its expectation is 0 for two draws
  of one distribution at any size, unlike FID's."""
  reference, samples = (np.asarray(a, np.float64) for a in (reference, samples))
  blocks = -(-max(len(reference), len(samples)) // block)

  def split(x):  # TF-GAN's blocks: as equal as can be, the larger ones last
    size, larger = divmod(len(x), blocks)
    return np.split(x, np.cumsum([size] * (blocks - larger) + [size + 1] * larger)[:-1])

  def kernel(a, b):
    return (a @ b.T / reference.shape[1] + 1.0) ** 3

  def unbiased(k):  # the mean of a kernel matrix without its diagonal
    return (k.sum() - np.trace(k)) / (len(k) * (len(k) - 1))

  return float(np.mean([unbiased(kernel(r, r)) + unbiased(kernel(s, s)) - 2 * kernel(r, s).mean()
                        for r, s in zip(split(reference), split(samples))]))


def standardized(reference, samples):
  """Both sets in the reference's units: minus its per-dimension mean, over its per-dimension sd
  (1 where the reference is constant, as a ReLU unit no reference image fires)."""
  reference, samples = (np.asarray(a, np.float64) for a in (reference, samples))
  mean, sd = reference.mean(0), reference.std(0)
  sd = np.where(sd > 0, sd, 1.0)
  return (reference - mean) / sd, (samples - mean) / sd


def kid(reference, samples):
  """KID x10^3 of standardized features: the kernel (x.y / d + 1)^3 of raw classifier features
  is ruled by their mean (ReLU units, all positive) and its estimate's spread by their largest
  units; standardized, x.y / d is a correlation and KID the same in any feature units."""
  return 1e3 * kernel_distance(*standardized(reference, samples))


def manifold_share(manifold, points, k=K_NEAREST, batch=256):
  """The share of `points` inside the k-NN manifold of `manifold`: the union of balls around its
  points reaching to their k-th nearest neighbour (Kynkaanniemi et al. 2019)."""
  manifold, points = (np.asarray(a, np.float64) for a in (manifold, points))

  def distances(a, b):
    return np.sqrt(np.maximum((a**2).sum(1)[:, None] - 2 * a @ b.T + (b**2).sum(1)[None], 0.0))

  chunks = [slice(i, i + batch) for i in range(0, max(len(manifold), len(points)), batch)]
  # the (k + 1)-th smallest distance: each point's own, 0, comes first
  radii = np.concatenate([np.partition(distances(manifold[c], manifold), k, axis=1)[:, k]
                          for c in chunks if len(manifold[c])])
  inside = [(distances(points[c], manifold) <= radii).any(axis=1) for c in chunks
            if len(points[c])]
  return float(np.concatenate(inside).mean())


def precision(reference, samples):
  """The share of samples on the reference's manifold: how many look like data."""
  return manifold_share(reference, samples)


def recall(reference, samples):
  """The share of the reference on the samples' manifold: how much of the data they cover."""
  return manifold_share(samples, reference)


def scorers():
  """{metric: its function} of every metric of results.METRICS scored on sample sets."""
  return {name: registry.load(row.function) for name, row in result_lib.METRICS.items()
          if row.function}


def score(reference, pool):
  """{metric: value} of one pool of sample activations against the reference activations."""
  return {name: float(function(reference, pool)) for name, function in scorers().items()}


def described():
  """{metric: results.Metric} of every metric scored on sample sets, for a result file."""
  return result_lib.metrics_where('function')


def draw_pools(batches, feature_net, progress_bar=None):
  """{method: activations [n, d]} of one sample set: `batches` yields {method: images}; only the
  features are kept, batch by batch."""
  parts, seen = {}, 0
  for out in interrupts.interruptible_iter(batches):  # Ctrl-C within a second mid-chain
    for name, x in out.items():
      parts.setdefault(name, []).append(fid.batch_activations(x, feature_net))
    seen += len(parts[name][-1])
    if progress_bar is not None:
      progress_bar.update(min(seen, progress_bar.total))
  return {name: np.concatenate(p) for name, p in parts.items()}


def score_sets(sets, feature_net, reference, runs, verbose=True, what='samples', total=None):
  """{metric: {method: [value per sample set]}}: `sets(r)` yields the {method: images} batches
  of sample set r, `total` images of each method (shown as progress over the sampling)."""
  scores = {name: {} for name in described()}
  for r in range(runs):
    if verbose:
      print(f'sample set {r + 1}/{runs}: {what}', flush=True)
    bar = progress.Progress(total, unit='samples') if verbose and total else None
    start = time.perf_counter()
    for method, pool in draw_pools(sets(r), feature_net, bar).items():
      for name, value in score(reference, pool).items():
        scores[name].setdefault(method, []).append(value)
    if verbose:  # sampling, features and every metric of every method of the set
      print(f'sample set {r + 1}/{runs} took {time.perf_counter() - start:.1f} s', flush=True)
  return scores
