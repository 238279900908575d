"""The code's shape (docs/code.md): imports go down the layers and form no circle, and every
script under experiments/ is flags plus one call. Reads source only: milliseconds."""
import ast
import graphlib
import io
import os
import re
import tokenize

from conftest import REPO
from tf_hat_ebm import registry

# docs/code.md's layer table, bottom up: a module imports only modules of its own layer or below.
LAYERS = (
    ('registry', 'config', 'errors', 'checkpoints', 'guard', 'langevin', 'learning', 'optim',
     'augment', 'bank', 'figures', 'flops', 'validation', 'text', 'files', 'interrupts', 'perf',
     'progress',
     'reproduction.stages', 'reproduction.paper', 'reproduction.statistics',
     'reproduction.children', 'reproduction.plateau', 'reproduction.departures',
     'reproduction.plan', 'reproduction.records', 'reproduction.scheduler',
     'results', 'keras_compat', 'tfgan_compat'),
    ('data', 'image_sources', 'nets', 'workdir', 'outputs', 'tasks.base', 'reproduction.report',
     'reproduction.tables', 'reproduction.quote', 'reproduction.timing'),
    ('generators', 'trained_run', 'run_record', 'summaries', 'digits_eval', 'evaluation.features',
     'evaluation.named_features', 'release_import', 'pretrained',
     'tasks.synthesis', 'tasks.joint', 'tasks.sngan', 'tasks.autoencoder'),
    ('actions', 'trainer', 'result_files'),
    ('export', 'samples', 'evaluation.ood', 'evaluation.fid', 'evaluation.metrics',
     'evaluation.samplers', 'evaluation.evaluate', 'evaluation.compare',
     'evaluation.calibration'),
    ('cli',),
    ('reproduction.runner', 'reproduction.pipeline', 'reproduction.command'),
)
MAX_SCRIPT_LINES, MAX_FUNCTION_LINES = 120, 40
# TensorFlow's own Keras, Keras 3 from TensorFlow 2.16 on: the code's Keras 2 comes from
# tf_hat_ebm/keras_compat.py alone.
TENSORFLOW_KERAS = re.compile(
    r'\btf\.keras\b|\btensorflow\.keras\b|from tensorflow import\s+keras\b')
# Code of a user's process, run by tests: the export's loader (no project code imported, it picks
# its own Keras) and the check that importing the package leaves a user's tf.keras as it was.
TENSORFLOW_KERAS_ELSEWHERE = {'tests/test_export.py': 1, 'tests/test_stacks.py': 2}


def package_files():
  """{module: its file} for tf_hat_ebm/, modules named below the package ('evaluation.fid')."""
  files = {}
  for root, _, names in os.walk(os.path.join(REPO, 'tf_hat_ebm')):
    for name in names:
      if name.endswith('.py') and name != '__init__.py':
        path = os.path.join(root, name)
        module = os.path.relpath(path, os.path.join(REPO, 'tf_hat_ebm'))[:-3]
        files[module.replace(os.sep, '.')] = path
  return files


def package_imports():
  """{module: the package's modules it imports, anywhere in its file} for tf_hat_ebm/."""
  files = package_files()
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


def test_nothing_of_the_library_imports_the_reproduction():
  # The reproduction runs the library's commands (runner.py imports cli): the library naming it
  # back, even a TensorFlow-free table of it, is an arrow up (the command line names the
  # reproduce command's flags and flow as 'module:function' strings instead).
  up = [(m, d) for m, deps in package_imports().items() for d in deps
        if d.startswith('reproduction.') and not m.startswith('reproduction.')]
  assert not up, up


def test_the_top_level_imports_none_of_the_packages_above_it():
  # evaluation/, tasks/ and reproduction/ are built on the top-level modules: one of those
  # importing them (export.py read the typed result from evaluation/) is an arrow back up. The
  # registry and cli name them as 'module:function' strings, imported when asked.
  imports = package_imports()
  assert 'results' in imports.get('export', ())  # what the check sees: the export's import
  up = sorted((m, d) for m, deps in imports.items() for d in deps
              if '.' not in m and d.split('.')[0] in ('evaluation', 'tasks', 'reproduction'))
  assert not up, up


def test_the_registry_holds_kinds_only():
  # A test's sizes are the tests' (conftest.KIND_SIZES), a benchmark's variants the benchmark's
  # (step_time.variants_of): every hook a kind has is one the library itself asks of it.
  asked = set()
  for path in package_files().values():
    with open(path) as f:
      asked |= set(re.findall(r"hook\('(\w+)'", f.read()))
  hooks = {name for kind in registry.KINDS.values() for name in kind.hooks}
  assert not {'tiny', 'speed_variants'} & hooks
  assert hooks <= asked, f'hooks nothing in tf_hat_ebm/ asks for: {sorted(hooks - asked)}'


def literal_lists(path):
  """{module-level name: its values} of every tuple or list of constants the file writes."""
  with open(path) as f:
    return {t.id: frozenset(e.value for e in node.value.elts)
            for node in ast.parse(f.read()).body if isinstance(node, ast.Assign)
            and isinstance(node.value, (ast.Tuple, ast.List)) and len(node.value.elts) > 1
            and all(isinstance(e, ast.Constant) for e in node.value.elts)
            for t in node.targets if isinstance(t, ast.Name)}


def test_every_choice_list_is_written_once_in_validation():
  # A second literal copy of a choice list drifts from the one the configs are checked against.
  files = package_files()
  lists = set(literal_lists(files.pop('validation')).values())
  copies = [f'{module}.{name}' for module, path in files.items()
            for name, values in literal_lists(path).items() if values in lists]
  assert not copies


def test_one_name_per_thing():
  # Two classes of one name (a restored run and a run's record were both `Run`) read as one
  # thing wherever the module prefix is dropped: a docstring, a traceback, a reader's memory.
  defined = {}
  for module, path in package_files().items():
    with open(path) as f:
      for node in ast.parse(f.read()).body:
        if isinstance(node, ast.ClassDef):
          defined.setdefault(node.name, []).append(module)
  assert not {name: m for name, m in defined.items() if len(m) > 1}


# An FID or a score with decimals, or a duration: a measurement that changes with every rerun.
MEASURED = re.compile(r'(FID|scored)[^.;:]*\d\.\d|\d+(\.\d+)? ?(s|min|minutes|h|hours)\b')
# In the package's text a duration is spaced ('54 s'): '2h' is a FLOP formula, '45s' a format.
MEASURED_IN_CODE = re.compile(r'(FID|scored)[^.;:]*\d\.\d|\b\d+(\.\d+)? (s|min|minutes|h|hours)\b')


def test_measured_numbers_are_the_docs_not_the_code():
  # A config's docstring says what the run is, its command and what to expect; the FIDs and
  # costs it measured change with every rerun and live in docs/ (digits_settings.md, results.md)
  # or in data files the code reads (reproduction/departures.json, eta.json): so does every
  # string of the package (its messages, docstrings and tables' text).
  directory = os.path.join(REPO, 'experiments', 'configs')
  found = {}
  for name in sorted(os.listdir(directory)):
    if name.endswith('.py'):
      with open(os.path.join(directory, name)) as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ''
      found.update({name: m.group(0) for m in [MEASURED.search(doc)] if m})
  for module, path in package_files().items():
    with open(path) as f:
      tree = ast.parse(f.read())
    found.update({f'{module}:{node.lineno}': m.group(0) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  for m in [MEASURED_IN_CODE.search(node.value)] if m})
  assert not found


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
