"""The command line: every --help answers fast without TensorFlow; the wheel's contents."""
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import REPO

# Each script with the flags its --help must list.
SCRIPTS = {
    'train.py': ['--config', '--workdir', '--checkpoint'],
    'train_synthesis.py': ['--config', '--workdir', '--checkpoint'],
    'train_refinement.py': ['--config', '--workdir', '--checkpoint'],
    'evaluate_fid.py': ['--workdir', '--checkpoint', '--overwrite', '--num_samples'],
    'evaluate_ood.py': ['--workdir', '--checkpoint', '--overwrite', '--sets'],
    'export.py': ['--workdir', '--checkpoint', '--overwrite', '--output'],
    'sample.py': ['--workdir', '--saved_model', '--checkpoint', '--overwrite'],
    'compare_baselines.py': ['--workdir', '--checkpoint', '--overwrite'],
    'import_release.py': ['--config', '--workdir', '--hat'],
    'calibrate_fid.py': ['--workdir', '--num', '--samples', '--output', '--overwrite'],
}


@pytest.mark.parametrize('script', sorted(SCRIPTS))
def test_help_lists_flags_without_tensorflow(script, tmp_path):
  # A tensorflow that cannot be imported: --help must answer before any import of it.
  (tmp_path / 'tensorflow').mkdir()
  (tmp_path / 'tensorflow' / '__init__.py').write_text('raise ImportError("tensorflow imported")')
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), REPO]))
  start = time.time()
  result = subprocess.run([sys.executable, os.path.join(REPO, 'experiments', script), '--help'],
                          capture_output=True, text=True, env=env, timeout=60)
  elapsed = time.time() - start
  assert result.returncode == 0, result.stderr[-2000:]
  for flag in SCRIPTS[script]:
    listed = f'  {flag}:' in result.stdout or f'  --[no]{flag[2:]}:' in result.stdout
    assert listed, (flag, result.stdout)
  assert 'example:' in result.stdout and 'python experiments/' in result.stdout
  assert elapsed < 10, elapsed  # about a second idle; generous for a loaded machine


def test_wheel_declares_dependencies_scripts_and_configs(tmp_path):
  import zipfile  # pylint: disable=g-import-not-at-top
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
  pins = [p for p in pins if p and not p.startswith('-') and p.split('=')[0].split('<')[0]
          not in ('pytest', 'pytest-xdist', 'flake8')]
  assert 'matplotlib==3.9.4' in pins
  for pin in pins:
    assert f'Requires-Dist: {pin}' in meta, pin
  assert 'tf-hat-ebm-train = tf_hat_ebm.cli:train' in entry
  assert 'tf-hat-ebm-export = tf_hat_ebm.cli:export' in entry
  assert 'tf_hat_ebm/experiments/configs/digits_synth.py' in names
  assert 'tf_hat_ebm/experiments/export.py' in names
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
