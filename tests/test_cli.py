"""The command line: every --help answers fast without TensorFlow and names the program as typed;
--config takes a shipped config's name; the console commands are library functions; the wheel."""
import inspect
import os
import re
import subprocess
import sys
import time
import types

import pytest

from tf_hat_ebm import cli

from conftest import REPO, script_call

# Each command with flags its --help must list.
FLAGS = {
    'train': ['--config', '--workdir', '--checkpoint'],
    'evaluate-fid': ['--workdir', '--checkpoint', '--overwrite', '--num_samples'],
    'evaluate-ood': ['--workdir', '--checkpoint', '--overwrite', '--sets'],
    'export': ['--workdir', '--checkpoint', '--overwrite', '--output'],
    'sample': ['--workdir', '--saved_model', '--checkpoint', '--overwrite'],
    'compare': ['--workdir', '--checkpoint', '--overwrite'],
    'gallery': ['--workdir', '--out', '--overwrite'],
    'import-release': ['--config', '--workdir', '--hat'],
    'calibrate-fid': ['--workdir', '--num', '--samples', '--output', '--overwrite'],
    'reproduce': ['--scale', '--seeds', '--out', '--jobs', '--dry_run'],
    'pretrained': ['--model', '--workdir', '--overwrite'],
}
# Every command's --help in one process whose tensorflow cannot be imported.
HELP_WITHOUT_TF = r"""
import sys
from tf_hat_ebm import cli
for name in cli.COMMANDS:
  try:
    cli.main(name, [f'tf-hat-ebm-{name}', '--help'])
  except SystemExit as e:
    assert e.code == 0, (name, e.code)
  print('=' * 10)
"""


def test_every_help_answers_without_tensorflow(tmp_path):
  (tmp_path / 'tensorflow').mkdir()
  (tmp_path / 'tensorflow' / '__init__.py').write_text('raise ImportError("tensorflow imported")')
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]))
  start = time.time()
  result = subprocess.run([sys.executable, '-c', HELP_WITHOUT_TF], capture_output=True,
                          text=True, env=env, timeout=60)
  elapsed = time.time() - start
  assert result.returncode == 0, result.stderr[-2000:]
  pages = dict(zip(cli.COMMANDS, result.stdout.split('=' * 10)))
  assert set(FLAGS) == set(pages)
  for name, flags in FLAGS.items():
    assert f'usage: tf-hat-ebm-{name} [flags]' in pages[name]
    for flag in flags:
      assert f'  {flag}:' in pages[name] or f'  --[no]{flag[2:]}:' in pages[name], (flag, name)
  assert elapsed < 10, elapsed  # about a second idle; generous for a loaded machine


def help_page(name, argv0, capsys, *args, **keywords):
  with pytest.raises(SystemExit) as exit_:
    cli.main(name, [argv0, *args, '--help'], **keywords)
  assert exit_.value.code == 0
  return capsys.readouterr().out


def test_help_names_the_program_as_typed_with_its_examples(capsys):
  page = help_page('train', '/venv/bin/tf-hat-ebm-train', capsys)
  assert page.startswith('usage: tf-hat-ebm-train [flags]\n')
  assert '\n    tf-hat-ebm-train --config=digits_refine --workdir=workdir/digits_refine\n' in page
  assert 'python' not in page and 'experiments/' not in page
  shipped = page.split('shipped configs')[1]
  for name in ('cifar10_synth', 'digits_refine', 'digits_synth', 'celeba_sngan'):
    assert name in shipped
  page = help_page('sample', 'experiments/sample.py', capsys)
  assert page.startswith('usage: python experiments/sample.py [flags]\n')
  assert '\n    python experiments/sample.py --workdir=workdir/digits_synth' in page
  # A training script is the train command with its own default config.
  page = help_page('train', 'experiments/train_retrofit.py', capsys,
                   **script_call('train_retrofit.py')[1])
  assert 'default digits_retrofit' in page


def test_config_names_resolve_to_the_shipped_files(tmp_path):
  shipped = os.path.join(REPO, 'experiments', 'configs')
  assert cli.configs_dir() == shipped
  assert cli.resolve_config(['p', '--config=cifar10_synth', '--config.seed=1']) == [
      'p', f'--config={shipped}/cifar10_synth.py', '--config.seed=1']
  assert cli.resolve_config(['p', '--config', 'digits_refine.py']) == [
      'p', '--config', f'{shipped}/digits_refine.py']
  mine = tmp_path / 'cifar10_synth.py'
  mine.write_text('')
  assert cli.config_path(str(mine)) == str(mine)  # a path that exists wins over a name
  assert cli.config_path('none.py') == 'none.py'  # left to ml_collections' "No such file"
  with pytest.raises(SystemExit):  # a name that is neither: the shipped names in one line
    cli.config_path('cifar10_synthesis')
  assert cli.config_path('some/dir/cifar10_synth.py') == 'some/dir/cifar10_synth.py'
  assert cli.config_path('digits_refine:tiny') == f'{shipped}/digits_refine.py:tiny'  # a size
  with pytest.raises(SystemExit):
    cli.config_path('digits_refined:tiny')
  assert 'digits_synth' in cli.config_names() and '__init__' not in cli.config_names()


def test_a_shipped_config_by_name_is_loaded(monkeypatch):
  seen = {}
  monkeypatch.setattr(cli, 'COMMANDS', {**cli.COMMANDS, 'train': cli.dataclasses.replace(
      cli.COMMANDS['train'], flow='test_cli:record')})
  monkeypatch.setitem(sys.modules, 'test_cli', types.SimpleNamespace(
      record=lambda **kw: seen.update(kw)))
  cli.main('train', ['tf-hat-ebm-train', '--config=digits_refine', '--config.seed=3',
                     '--workdir=w'])
  assert seen['config'].name == 'digits_refine' and seen['config'].seed == 3
  assert seen['workdir'] == 'w'
  cli.main('train', ['tf-hat-ebm-train', '--config=digits_refine:tiny', '--workdir=w'])
  assert seen['config'].training.num_steps == 2  # its tiny size


def console_commands():
  with open(os.path.join(REPO, 'pyproject.toml')) as f:
    section = f.read().split('[project.scripts]')[1].split('\n[')[0]
  return dict(re.findall(r'^(tf-hat-ebm-[\w-]+) = "tf_hat_ebm\.cli:(\w+)"$', section, re.M))


def test_console_commands_are_library_functions_taking_their_flags():
  commands = console_commands()
  assert set(commands) == {f'tf-hat-ebm-{n}' for n in cli.COMMANDS} | {'tf-hat-ebm-reproduce'}
  for name, command in cli.COMMANDS.items():
    assert commands[f'tf-hat-ebm-{name}'] == name.replace('-', '_')
    assert script_call(command.script)[0] == [name]  # the script is the same program
    module, _, function = command.flow.partition(':')
    parameters = inspect.signature(getattr(__import__(module, fromlist=[function]),
                                           function)).parameters
    fv = cli._define(command, ['x'])  # pylint: disable=protected-access
    takes_rest = any(p.kind == p.VAR_KEYWORD for p in parameters.values())
    for argument in cli.flow_arguments(fv):
      assert argument in parameters or takes_rest, (name, argument)


def test_reproduce_passes_its_flags_to_the_pipeline_as_options(monkeypatch, tmp_path):
  from tf_hat_ebm.reproduction import pipeline  # pylint: disable=g-import-not-at-top
  seen = []
  monkeypatch.setattr(pipeline, 'reproduce', lambda options: seen.append(options) or {})
  monkeypatch.setattr(sys, 'argv', ['/venv/bin/tf-hat-ebm-reproduce', '--seeds=4,5',
                                    f'--out={tmp_path}', '--parts=synthesis', '--jobs=1'])
  cli.reproduce()
  options, = seen
  assert (options.scale, options.seeds, options.out, options.parts, options.jobs) == (
      'digits', (4, 5), str(tmp_path), ('synthesis',), '1')
  monkeypatch.setattr(sys, 'argv', ['tf-hat-ebm-reproduce', '--seeds=a'])
  with pytest.raises(SystemExit) as exit_:
    cli.reproduce()
  assert exit_.value.code == 1 and not seen[1:]


def test_wheel_declares_dependencies_scripts_and_configs(tmp_path):
  import zipfile  # pylint: disable=g-import-not-at-top
  from packaging import requirements  # pylint: disable=g-import-not-at-top
  subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation',
                  '-q', '-w', str(tmp_path), REPO], check=True, capture_output=True, timeout=300,
                 cwd=str(tmp_path))
  wheel, = [p for p in tmp_path.iterdir() if p.suffix == '.whl']
  with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    meta = z.read(next(n for n in names if n.endswith('/METADATA'))).decode()
    entry = z.read(next(n for n in names if n.endswith('/entry_points.txt'))).decode()
  # Every runtime pin of requirements.txt is a dependency of the wheel (the test tools are not).
  with open(os.path.join(REPO, 'requirements.txt')) as f:
    pins = [line.split('#')[0].strip() for line in f]
  pins = [p for p in pins if p and not p.startswith('-') and re.split(r'[<>=!~ ]', p)[0]
          not in ('pytest', 'pytest-xdist', 'flake8', 'setuptools')]
  # both stacks: pins that hold below Python 3.12 and pins that hold from it
  markers = [requirements.Requirement(p).marker for p in pins]
  for version in ('3.11', '3.12'):
    assert any(m is not None and m.evaluate({'python_version': version}) for m in markers)
  declared = {str(requirements.Requirement(line[len('Requires-Dist: '):]))
              for line in meta.splitlines() if line.startswith('Requires-Dist: ')}
  for pin in pins:  # both stacks, each with its python_version marker
    assert str(requirements.Requirement(pin)) in declared, pin
  assert 'tf-hat-ebm-train = tf_hat_ebm.cli:train' in entry
  assert 'tf-hat-ebm-export = tf_hat_ebm.cli:export' in entry
  assert 'tf-hat-ebm-gallery = tf_hat_ebm.cli:gallery' in entry
  assert 'tf_hat_ebm/configs/digits_synth.py' in names  # --config=digits_synth in a wheel
  assert 'tf_hat_ebm/reproduction/eta.json' in names  # the reproduction's ETA table, data
  shipped = os.listdir(os.path.join(REPO, 'tf_hat_ebm', 'evaluation', 'feature_classifiers'))
  assert {os.path.splitext(f)[1] for f in shipped} == {'.npz', '.json'}  # the FID classifiers
  assert {f'tf_hat_ebm/evaluation/feature_classifiers/{f}' for f in shipped} <= set(names)
  assert not [n for n in names if 'experiments' in n]  # the scripts are a checkout's
  from tf_hat_ebm import pretrained  # pylint: disable=g-import-not-at-top
  assert {f'tf_hat_ebm/models/{m}/{f}' for m in pretrained.names()
          for f in pretrained.entry(m)['files']} | {'tf_hat_ebm/models/manifest.json'} <= set(
              names)  # the ready-made models
  for root, _, files in os.walk(os.path.join(REPO, 'tf_hat_ebm')):
    if '__init__.py' in files:  # every subpackage is listed in pyproject.toml
      rel = os.path.relpath(os.path.join(root, '__init__.py'), REPO).replace(os.sep, '/')
      assert rel in names, rel


# A TensorFlow C++ log line of level E (or F): 'YYYY-MM-DD HH:MM:SS.ffffff: E path:line] ...'.
TF_ERROR_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [EF] ')


@pytest.mark.slow
def test_readme_commands_print_no_tensorflow_error_lines(tmp_path):
  """The README's commands on a tiny run, with TensorFlow's log level left to the scripts."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  workdir = str(tmp_path / 'run')
  commands = [
      ['train_synthesis.py', f'--workdir={workdir}', '--config.training.num_steps=4',
       '--config.model.hat_width=8', '--config.model.gen_width=8', '--config.langevin.steps=2',
       '--config.training.batch_size=8', '--config.training.sample_every=4',
       '--config.training.num_grid_samples=4', '--config.sampling.steps=2'],
      ['sample.py', f'--workdir={workdir}', '--num_samples=4', '--path_chains=2'],
      ['export.py', f'--workdir={workdir}', f'--output={tmp_path / "exported"}'],
      ['evaluate_ood.py', f'--workdir={workdir}', '--num=50'],
      ['evaluate_fid.py', f'--workdir={workdir}', '--num_samples=20', '--runs=1'],
  ]
  for script, *args in commands:
    proc = subprocess.run([sys.executable, os.path.join(REPO, 'experiments', script), *args],
                          capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, (script, proc.stderr[-2000:])
    errors = [line for line in (proc.stdout + proc.stderr).splitlines()
              if TF_ERROR_LINE.match(line)]
    assert not errors, (script, errors)
