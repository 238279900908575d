r"""Counts the tests that start a subprocess (a test suite's slow part on a small machine).

  python benchmarks/subprocess_tests.py            # the default run (-m 'not long')
  python benchmarks/subprocess_tests.py -m ''      # every test

Reads the tests' source (no test runs): a test starts a subprocess when its function, a function
of its file it calls, a fixture it takes (its file's or conftest.py's) or a function of an
imported benchmarks/ module it calls uses `subprocess`. Parametrized tests count once per case,
as pytest collects them.
"""
import argparse
import ast
import collections
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, 'tests')


def _functions(path):
  with open(path) as f:
    tree = ast.parse(f.read())
  return {node.name: node for node in ast.walk(tree)
          if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}, tree


STARTS = ('run', 'Popen', 'call', 'check_call', 'check_output')


def _starts(node):
  """Whether the function `node` itself calls subprocess.run, Popen, ..."""
  return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in STARTS and isinstance(n.func.value, ast.Name)
             and n.func.value.id == 'subprocess' for n in ast.walk(node))


def _starters(functions, outside=()):
  """Names of `functions` that (transitively) start a subprocess or use a name in `outside`."""
  calls = {name: {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                  if isinstance(n, (ast.Name, ast.Attribute))} | {a.arg for a in node.args.args}
           for name, node in functions.items()}
  found = {name for name, node in functions.items()
           if _starts(node) or calls[name] & set(outside)}
  while True:
    more = {name for name, used in calls.items() if used & found} - found
    if not more:
      return found
    found |= more


def _benchmark_starters(tree):
  """Functions of the benchmarks/ modules a test file imports that start a subprocess."""
  names = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.ImportFrom) and node.module == 'benchmarks' or (
        isinstance(node, ast.Import) and any(a.name.startswith('benchmarks') for a in node.names)):
      for alias in node.names:
        path = os.path.join(REPO, 'benchmarks', alias.name.split('.')[-1] + '.py')
        if os.path.exists(path):
          names |= _starters(_functions(path)[0])
  return names


def count(marker):
  out = subprocess.run([sys.executable, '-m', 'pytest', '--collect-only', '-q', '-m', marker],
                       cwd=REPO, capture_output=True, text=True, check=False).stdout
  ids = [line.split('::') for line in out.splitlines() if '::' in line]
  conftest = _starters(_functions(os.path.join(TESTS, 'conftest.py'))[0])
  per_file, total = collections.Counter(), collections.Counter()
  cache = {}
  for path, test in ids:
    if path not in cache:
      functions, tree = _functions(os.path.join(REPO, path))
      cache[path] = _starters(functions, conftest | _benchmark_starters(tree))
    total[path] += 1
    per_file[path] += test.split('[')[0] in cache[path]
  return per_file, total


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('-m', default='not long', help="pytest's -m (default: 'not long')")
  args = parser.parse_args()
  per_file, total = count(args.m)
  for path in sorted(total):
    if per_file[path]:
      print(f'{per_file[path]:4d} of {total[path]:3d}  {path}')
  print(f'{sum(per_file.values())} of {sum(total.values())} tests start a subprocess')


if __name__ == '__main__':
  main()
