r"""How far the release's Langevin chains move under float32 rounding: the bounds of
tests/test_release_import.py::test_release_chains_are_reproduced.

  python benchmarks/release_chain_rounding.py --roundings=12

Each chain of tests/data/release_nets (noise off, from the file's Z0, Y0) is run by equally valid
float32 evaluations: oneDNN's kernels for each instruction set this CPU has (ONEDNN_MAX_CPU_ISA),
Eigen's (TF_ENABLE_ONEDNN_OPTS=0), and `--roundings` copies of the networks whose every weight is
moved by up to one float32 ulp (another rounding of the same weights: a kernel with another
summation order differs from ours by as much). Printed per chain and state: the largest
|change - release's change| / max |release's change| over them all (the spread), and by which.
"""
import argparse
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ISAS = ('', 'AVX512_CORE', 'AVX2', 'SSE41')  # '' = the best this CPU has


def errors(roundings):
  """{label: {chain/state: relative error}} in this process's float32 setting."""
  sys.path.insert(0, os.path.join(REPO, 'tests'))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  import test_release_import as t  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import langevin, release_import  # pylint: disable=g-import-not-at-top

  def network(name):
    return release_import.load_release_weights(t.NETWORKS[name]().build_for_input(),
                                               t.release_path(name))
  hat, gen = network('hat32'), network('gen32')
  weights = [v.numpy() for v in hat.weights + gen.weights]
  found = {}
  for rounding in range(roundings + 1):
    rs = np.random.RandomState(rounding)
    for v, w in zip(hat.weights + gen.weights, weights):
      v.assign(w if rounding == 0 else
               (w * (1 + 2.0**-23 * rs.uniform(-1, 1, w.shape))).astype(w.dtype))
    for chain in t.CHAINS:
      ref = np.load(os.path.join(t.RELEASE, f'chain_{chain}.npz'))
      settings = t.release_settings(t.manifest()[f'chain_{chain}']['settings'])
      rng = tf.random.Generator.from_seed(0)
      if settings.joint:
        z, y, _, _ = langevin.sample_joint(hat, gen, rng, settings, z0=ref['z0'], y0=ref['y0'])
        states = dict(z=z, y=y)
      else:
        y, _ = langevin.sample_conditional(hat, langevin.generate(gen, ref['z0']), rng, settings,
                                           y0=ref['y0'])
        states = dict(y=y)
      for name, state in states.items():
        expected = ref[name] - ref[f'{name}0']
        error = np.abs(state.numpy() - ref[f'{name}0'] - expected).max()
        found.setdefault(f'rounding {rounding}' if rounding else 'weights as saved',
                         {})[f'{chain}/{name}'] = float(error / np.abs(expected).max())
  return found


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--roundings', type=int, default=12)
  parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:
    print(json.dumps(errors(args.roundings)))
    return
  spread = {}
  settings = [dict(ONEDNN_MAX_CPU_ISA=isa) if isa else {} for isa in ISAS]
  settings.append(dict(TF_ENABLE_ONEDNN_OPTS='0'))
  for i, extra in enumerate(settings):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO, **extra)
    out = subprocess.run([sys.executable, __file__, '--worker',
                          f'--roundings={args.roundings if i == 0 else 0}'], env=env,
                         check=True, capture_output=True, text=True).stdout
    label = ' '.join(f'{k}={v}' for k, v in extra.items()) or 'oneDNN, best ISA'
    for run, found in json.loads(out.splitlines()[-1]).items():
      for key, error in found.items():
        print(f'{label:26s} {run:16s} {key:34s} {error:.2e}', flush=True)
        if error >= spread.get(key, (-1, ''))[0]:
          spread[key] = (error, f'{label}, {run}')
  print('\nspread (largest relative error of the change, and where):')
  for key, (error, where) in spread.items():
    print(f'  {key:34s} {error:.2e}  ({where})')


if __name__ == '__main__':
  main()
