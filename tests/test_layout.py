"""The code's shape (docs/code.md): imports go down the layers and form no circle, and every
script under experiments/ is flags plus one call. Reads source only: milliseconds."""
import ast
import graphlib
import io
import os
import re
import tokenize

from conftest import REPO

# docs/code.md's layer table, bottom up: a module imports only modules of its own layer or below.
LAYERS = (
    ('registry', 'config', 'errors', 'checkpoints', 'guard', 'langevin', 'learning', 'optim',
     'bank', 'figures', 'flops', 'validation', 'text', 'perf', 'progress',
     'reproduction.stages', 'reproduction.paper', 'reproduction.statistics',
     'reproduction.children', 'keras_compat', 'tfgan_compat'),
    ('data', 'nets', 'workdir', 'outputs', 'tasks.base', 'reproduction.report',
     'reproduction.tables'),
    ('generators', 'trained_run', 'run_record', 'summaries', 'digits_eval', 'evaluation.features',
     'release_import', 'tasks.synthesis', 'tasks.joint', 'tasks.sngan', 'tasks.autoencoder'),
    ('actions', 'trainer', 'run_lib'),
    ('export', 'samples', 'evaluation.ood', 'evaluation.fid', 'evaluation.compare',
     'evaluation.rows', 'evaluation.calibration'),
    ('cli',),
    ('reproduction.runner', 'reproduction.pipeline'),
)
MAX_SCRIPT_LINES, MAX_FUNCTION_LINES = 120, 40
# TensorFlow's own Keras, Keras 3 from TensorFlow 2.16 on: the code's Keras 2 comes from
# tf_hat_ebm/keras_compat.py alone.
TENSORFLOW_KERAS = re.compile(
    r'\btf\.keras\b|\btensorflow\.keras\b|from tensorflow import\s+keras\b')
# Code of a user's process, run by tests: the export's loader (no project code imported, it picks
# its own Keras) and the check that importing the package leaves a user's tf.keras as it was.
TENSORFLOW_KERAS_ELSEWHERE = {'tests/test_export.py': 1, 'tests/test_stacks.py': 2}


def package_imports():
  """{module: the package's modules it imports, anywhere in its file} for tf_hat_ebm/."""
  files = {}
  for root, _, names in os.walk(os.path.join(REPO, 'tf_hat_ebm')):
    for name in names:
      if name.endswith('.py') and name != '__init__.py':
        path = os.path.join(root, name)
        module = os.path.relpath(path, os.path.join(REPO, 'tf_hat_ebm'))[:-3]
        files[module.replace(os.sep, '.')] = path
  imports = {}
  for module, path in files.items():
    with open(path) as f:
      tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
      if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('tf_hat_ebm'):
        base = node.module[len('tf_hat_ebm.'):]
        found |= {f'{base}.{a.name}'.lstrip('.') if f'{base}.{a.name}'.lstrip('.') in files
                  else base for a in node.names}
    imports[module] = {m for m in found if m in files and m != module}
  return imports


def test_imports_form_no_circle_and_go_down_the_layers():
  imports = package_imports()
  graphlib.TopologicalSorter(imports).prepare()  # raises CycleError naming the circle
  layer = {module: i for i, modules in enumerate(LAYERS) for module in modules}
  assert sorted(layer) == sorted(imports), 'a module missing from LAYERS (and docs/code.md)'
  backward = [(m, d) for m, deps in imports.items() for d in deps if layer[d] > layer[m]]
  assert not backward, backward


def test_every_script_is_flags_and_one_call():
  directory = os.path.join(REPO, 'experiments')
  for name in sorted(os.listdir(directory)):
    if not name.endswith('.py'):
      continue
    with open(os.path.join(directory, name)) as f:
      text = f.read()
    assert len(text.splitlines()) <= MAX_SCRIPT_LINES, name
    for node in ast.walk(ast.parse(text)):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        length = node.end_lineno - node.lineno + 1
        assert length <= MAX_FUNCTION_LINES, f'{name}: {node.name} is {length} lines'


def test_keras_comes_from_one_module():
  found = {}
  for top in ('tf_hat_ebm', 'tests', 'benchmarks', 'experiments', 'tpu_utils'):
    for root, _, names in os.walk(os.path.join(REPO, top)):
      for name in (n for n in names if n.endswith('.py')):
        path = os.path.join(root, name)
        with open(path) as f:  # code and strings (code a test runs), not comments
          text = f.read()
        lines = text.splitlines()
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
          if token.type == tokenize.COMMENT:
            row, column = token.start
            lines[row - 1] = lines[row - 1][:column]
        uses = len(TENSORFLOW_KERAS.findall('\n'.join(lines)))
        relative = os.path.relpath(path, REPO).replace(os.sep, '/')
        if uses and relative != 'tf_hat_ebm/keras_compat.py':
          found[relative] = uses
  assert found == TENSORFLOW_KERAS_ELSEWHERE
