r"""How far the release's Langevin chains move under float32 rounding: the bounds of
tests/test_release_import.py::test_release_chains_are_reproduced.

  python benchmarks/release_chain_rounding.py --roundings=12

Each chain of tests/data/release_nets (noise off, from the file's Z0, Y0) is run by equally valid
float32 evaluations: oneDNN's kernels for each instruction set this CPU has (ONEDNN_MAX_CPU_ISA),
Eigen's (TF_ENABLE_ONEDNN_OPTS=0), and `--roundings` copies of the networks whose every weight is
moved by up to one float32 ulp (another rounding of the same weights: a kernel with another
summation order differs from ours by as much). Per sample the error is
max |change - release's change|, in ulps of the state and relative to the release's change;
printed per chain and state: how many ulps half the samples stay within and the relative error of
the worst sample, their largest over all these evaluations (the spread), how far the test's bounds
are above it, and in which chains those bounds fail deliberate mistakes in the chain (so the
bounds still test something).
"""
import argparse
import dataclasses
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ISAS = ('', 'AVX512_CORE', 'AVX2', 'SSE41')  # '' = the best this CPU has


# Mistakes the test must still catch: each changes one thing of the release's chain.
MISTAKES = {
    'Y step before Z step': lambda s: dataclasses.replace(s, latent_first=not s.latent_first),
    'prior left out': lambda s: dataclasses.replace(s, prior_sigma=None),
    'temperature 1% off': lambda s: dataclasses.replace(s, temperature=1.01 * s.temperature),
    'one step short': lambda s: dataclasses.replace(s, steps=s.steps - 1),
}


def errors(roundings, mistakes=False):
  """{run: {chain/state: per-sample errors (ulps, relative)}} in this float32 setting."""
  sys.path.insert(0, os.path.join(REPO, 'tests'))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import test_release_import as t  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import release_import  # pylint: disable=g-import-not-at-top

  def network(name):
    return release_import.load_release_weights(t.NETWORKS[name]().build_for_input(),
                                               t.release_path(name))
  hat, gen = network('hat32'), network('gen32')
  weights = [v.numpy() for v in hat.weights + gen.weights]
  runs = [(f'rounding {r}' if r else 'weights as saved', r, None) for r in range(roundings + 1)]
  runs += [(name, 0, change) for name, change in MISTAKES.items()] if mistakes else []
  found = {}
  for label, rounding, change in runs:
    rs = np.random.RandomState(rounding)
    for v, w in zip(hat.weights + gen.weights, weights):
      v.assign(w if rounding == 0 else
               (w * (1 + 2.0**-23 * rs.uniform(-1, 1, w.shape))).astype(w.dtype))
    for chain in t.CHAINS:
      for state, (ours, start, theirs) in t.run_release_chain(hat, gen, chain, change).items():
        ulps, relative = t.sample_errors(ours, start, theirs)
        found.setdefault(label, {})[f'{chain}/{state}'] = (ulps.tolist(), relative.tolist())
  return found


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--roundings', type=int, default=12)
  parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(errors(args.roundings, mistakes=not os.environ.get('ONEDNN_MAX_CPU_ISA')
                            and not os.environ.get('TF_ENABLE_ONEDNN_OPTS'))))
    return
  sys.path.insert(0, os.path.join(REPO, 'tests'))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import test_release_import as t  # pylint: disable=g-import-not-at-top
  spread, mistakes = {}, {}
  settings = [dict(ONEDNN_MAX_CPU_ISA=isa) if isa else {} for isa in ISAS]
  settings.append(dict(TF_ENABLE_ONEDNN_OPTS='0'))
  for i, extra in enumerate(settings):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO, **extra)
    out = subprocess.run([sys.executable, __file__, '--worker',
                          f'--roundings={args.roundings if i == 0 else 0}'], env=env,
                         check=True, capture_output=True, text=True).stdout
    label = ' '.join(f'{k}={v}' for k, v in extra.items()) or 'oneDNN, best ISA'
    for run, found in json.loads(out.splitlines()[-1]).items():
      for key, (ulps, relative) in found.items():
        half, worst = float(np.sort(ulps)[(len(ulps) - 1) // 2]), max(relative)
        print(f'{label:26s} {run:22s} {key:34s} half within {half:8.1f} ulps, every sample '
              f'within {worst:.2e}', flush=True)
        if run in MISTAKES:
          mistakes.setdefault(run, []).extend(
              [key] if t.outside_bounds(np.array(ulps), np.array(relative)) else [])
          continue
        old = spread.get(key, ((0, ''), (0, '')))
        spread[key] = (max(old[0], (half, f'{label}, {run}')),
                       max(old[1], (worst, f'{label}, {run}')))
  print('\nspread (half the samples within / every sample within, and where):')
  for key, ((half, h_where), (worst, w_where)) in spread.items():
    print(f'  {key:34s} {half:6.1f} ulps ({h_where})  {worst:.2e} ({w_where})')
  half = max(h for (h, _), _ in spread.values())
  worst = max(w for _, (w, _) in spread.values())
  print(f'\nlargest: half the samples within {half:.1f} ulps, every sample within {worst:.2e}; '
        f'the test allows {t.HALF_WITHIN_ULPS} ulps and {t.EVERY_WITHIN} '
        f'({t.HALF_WITHIN_ULPS / max(half, 1e-9):.1f}x, {t.EVERY_WITHIN / worst:.1f}x)')
  print('the test fails for:')
  for mistake in MISTAKES:
    print(f'  {mistake:22s} in {", ".join(mistakes.get(mistake, [])) or "NO CHAIN"}')


if __name__ == '__main__':
  main()
