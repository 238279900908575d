"""No input or fault loses a checkpoint or an output, and no command exits 0 with a wrong result.

The scripts' failures are one line on stderr naming the flag, config field or file, with a
non-zero exit; the pieces behind them (checkpoint lookup, output guards, SavedModel input checks,
config range checks, the error guard) are tested in-process.
"""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import runs
from tf_hat_ebm import export
from tf_hat_ebm import registry
from tf_hat_ebm import generators
from tf_hat_ebm import run_lib
from tpu_utils.strategy import check_batch_split

from conftest import REPO, tiny

TINY = ['--config.model.hat_width=8', '--config.model.gen_width=8', '--config.model.z_dim=4',
        '--config.langevin.steps=2', '--config.sampling.steps=2',
        '--config.training.batch_size=4', '--config.training.bank_size=16']


def script(name, *args, **popen):
  command = [sys.executable, os.path.join(REPO, 'experiments', name), *args]
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO)
  if popen:
    return subprocess.Popen(command, env=env, text=True, **popen)
  return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def assert_one_line_error(result, *names, code=1):
  lines = result.stderr.strip().splitlines()
  assert result.returncode == code, result.stderr[-2000:]
  assert len(lines) == 1 and lines[0].startswith('error: '), result.stderr[-2000:]
  for name in names:
    assert name in lines[0], (name, lines[0])
  return lines[0]


@pytest.fixture(scope='module')
def damaged(trained_workdir, tmp_path_factory):
  """Copies of the trained workdir: truncated latest .data, garbled state file, bad config.json."""
  root = tmp_path_factory.mktemp('damaged')
  out = {}
  for kind in ('truncated', 'state', 'config'):
    out[kind] = str(root / kind)
    shutil.copytree(trained_workdir, out[kind])
  data = os.path.join(out['truncated'], 'checkpoints', 'ckpt-2.data-00000-of-00001')
  with open(data, 'r+b') as f:
    f.truncate(os.path.getsize(data) // 2)
  with open(os.path.join(out['state'], 'checkpoints', 'checkpoint'), 'w') as f:
    f.write('garbage {{')
  with open(os.path.join(out['config'], 'config.json'), 'w') as f:
    f.write('{"data": ')
  return out


# (script, arguments, texts the error line must contain); {w}: trained workdir, {t}: tmp_path,
# {truncated} / {state} / {config}: damaged copies.
CASES = {
    'misspelt_field': ('train_synthesis.py', ['--workdir={t}/w', '--config.training.batchsize=3'],
                       ['--config.training.batchsize', 'batch_size']),
    'missing_config_file': ('train_synthesis.py', ['--workdir={t}/w', '--config={t}/none.py'],
                            ['--config={t}/none.py', 'No such file']),
    'batch_zero': ('train_synthesis.py', ['--workdir={t}/w', *TINY,
                                          '--config.training.batch_size=0'],
                   ['training.batch_size', '>= 1']),
    'refinement_of_a_synthesis_run': ('compare_baselines.py', ['--workdir={w}', '--out={t}/c'],
                                      ['synthesis run', 'sample.py']),
    'num_samples_zero': ('sample.py', ['--workdir={w}', '--num_samples=0', '--output={t}/s'],
                         ['--num_samples=0']),
    'path_chains_zero': ('sample.py', ['--workdir={w}', '--path_chains=0', '--output={t}/s'],
                         ['--path_chains=0']),
    'fid_runs_zero': ('evaluate_fid.py', ['--workdir={w}', '--runs=0'], ['--runs=0']),
    'truncated_checkpoint': ('sample.py', ['--workdir={truncated}', '--output={t}/s'],
                             ['ckpt-2', 'truncated']),
    'garbled_state_file': ('export.py', ['--workdir={state}', '--output={t}/e'],
                           ['{state}/checkpoints/checkpoint', 'ckpt-2', '--checkpoint=2']),
    'garbled_config_json': ('evaluate_ood.py', ['--workdir={config}'],
                            ['{config}/config.json', 'not valid JSON']),
    'export_to_a_file': ('export.py', ['--workdir={w}', '--output={w}/config.json'],
                         ['--output={w}/config.json', 'is a file']),
    'corrupt_saved_model': ('sample.py', ['--saved_model={t}/sm', '--output={t}/s'],
                            ['--saved_model={t}/sm', 'unreadable SavedModel']),
}


@pytest.mark.slow
@pytest.mark.parametrize('case', sorted(CASES))
def test_script_failure_is_one_line_naming_the_cause(case, trained_workdir, damaged, tmp_path):
  name, args, texts = CASES[case]
  fill = dict(w=trained_workdir, t=tmp_path, **damaged)
  (tmp_path / 'sm').mkdir()
  (tmp_path / 'sm' / 'saved_model.pb').write_bytes(b'\x08\x01garbage')
  before = sorted(os.listdir(trained_workdir))
  result = script(name, *[a.format(**fill) for a in args])
  assert_one_line_error(result, *[t.format(**fill) for t in texts])
  # Nothing half-written: no output directory, no training workdir, the trained run untouched.
  assert not os.path.exists(tmp_path / 's') and not os.path.exists(tmp_path / 'e')
  assert not os.path.exists(tmp_path / 'w' / 'checkpoints')
  assert sorted(os.listdir(trained_workdir)) == before


@pytest.mark.slow
def test_sample_refuses_a_used_output_and_overwrite_leaves_no_stale_grid(trained_workdir, tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  for name in ('samples_000.png', 'samples_001.png', 'samples_002.png', 'notes.txt'):
    (out / name).write_bytes(b'old')
  args = [f'--workdir={trained_workdir}', f'--output={out}', '--num_samples=3', '--path_chains=2']
  assert_one_line_error(script('sample.py', *args), f'--output={out}', '--overwrite')
  assert (out / 'samples_000.png').read_bytes() == b'old'  # refused: nothing touched
  result = script('sample.py', *args, '--overwrite', '--checkpoint=2')
  assert result.returncode == 0, result.stderr[-2000:]
  assert sorted(os.listdir(out)) == ['generator_000.png', 'langevin_path.png', 'notes.txt',
                                     'residual_x5_000.png', 'samples.npz', 'samples_000.png']
  assert (out / 'notes.txt').read_bytes() == b'old'  # not this script's: kept
  assert (out / 'samples_000.png').read_bytes()[:4] == b'\x89PNG'


@pytest.mark.slow
def test_ctrl_c_is_one_line_with_the_resume_step_and_exit_130(tmp_path):
  workdir = tmp_path / 'w'
  proc = script('train_synthesis.py', f'--workdir={workdir}', *TINY,
                '--config.training.num_steps=100000', '--config.training.steps_per_loop=2',
                '--config.training.checkpoint_every=2', '--config.training.sample_every=100000',
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  index = workdir / 'checkpoints' / 'ckpt-2.index'
  deadline = time.time() + 240
  while not index.exists() and proc.poll() is None and time.time() < deadline:
    time.sleep(0.2)
  assert index.exists(), proc.stderr.read() if proc.poll() is not None else 'no checkpoint'
  proc.send_signal(signal.SIGINT)
  _, stderr = proc.communicate(timeout=120)
  result = subprocess.CompletedProcess(proc.args, proc.returncode, '', stderr)
  line = assert_one_line_error(result, 'interrupted', 'resume with the same command', code=130)
  last = checkpoints.list_checkpoints(str(workdir / 'checkpoints'))[-1]
  assert f'last checkpoint: step {last}' in line


# ---- checkpoints --------------------------------------------------------------------------------
def test_state_file_loss_names_the_checkpoints_instead_of_train_first(trained_workdir, tmp_path):
  shutil.copytree(trained_workdir, tmp_path / 'w')
  ckpt_dir = tmp_path / 'w' / 'checkpoints'
  assert checkpoints.list_checkpoints(str(ckpt_dir)) == [2]
  os.remove(ckpt_dir / 'checkpoint')
  with pytest.raises(ValueError, match=r'state file .*checkpoint is missing or unreadable, but '
                                       r'ckpt-2 exist: pass --checkpoint=2'):
    runs.load_run(str(tmp_path / 'w'))
  run = runs.load_run(str(tmp_path / 'w'), checkpoint=2)
  assert run.step == 2 and run.checkpoint == str(ckpt_dir / 'ckpt-2')
  assert runs.load_run(str(tmp_path / 'w'), checkpoint=str(ckpt_dir / 'ckpt-2')).step == 2
  with pytest.raises(ValueError, match=r'--checkpoint=5: no checkpoint .*ckpt-5.*: ckpt-2$'):
    runs.load_run(str(tmp_path / 'w'), checkpoint=5)


def test_list_checkpoints_reads_index_files_only(tmp_path):
  for name in ('ckpt-10.index', 'ckpt-10.data-00000-of-00001', 'ckpt-3.index', 'ckpt-7.data',
               'checkpoint', 'ckpt-x.index'):
    (tmp_path / name).write_bytes(b'')
  assert checkpoints.list_checkpoints(str(tmp_path)) == [3, 10]
  assert checkpoints.list_checkpoints(str(tmp_path / 'missing')) == []


# ---- outputs ------------------------------------------------------------------------------------
def test_prepare_output_dir_refuses_then_clears_only_owned_entries(tmp_path):
  (tmp_path / 'variables').mkdir()
  for name in ('saved_model.pb', 'variables/variables.index', 'mine.txt'):
    (tmp_path / name).write_bytes(b'x')
  with pytest.raises(ValueError, match='--output=.* is not empty .*pass --overwrite'):
    run_lib.prepare_output_dir(str(tmp_path), ('saved_model.pb', 'variables'), False, 'output')
  assert sorted(os.listdir(tmp_path)) == ['mine.txt', 'saved_model.pb', 'variables']
  run_lib.prepare_output_dir(str(tmp_path), ('saved_model.pb', 'variables'), True, 'output')
  assert os.listdir(tmp_path) == ['mine.txt']
  with pytest.raises(ValueError, match=r'--out=.*mine\.txt is a file'):
    run_lib.prepare_output_dir(str(tmp_path / 'mine.txt'), (), True, 'out')
  run_lib.prepare_output_dir(str(tmp_path / 'new' / 'dir'), (), False, 'output')
  assert os.path.isdir(tmp_path / 'new' / 'dir')


# Runs experiments/export.py with tf.saved_model.save failing half-way through its write.
FAILING_SAVE = r'''
import os, runpy, sys
import tensorflow as tf
error = sys.argv.pop(1)
def save(module, output_dir, **kwargs):
  os.makedirs(os.path.join(output_dir, 'variables'))
  with open(os.path.join(output_dir, 'variables', 'variables.data-00000-of-00001'), 'wb') as f:
    f.write(b'half')
  if error == 'disk_full':
    raise tf.errors.ResourceExhaustedError(None, None, 'No space left on device')
  raise KeyboardInterrupt
tf.saved_model.save = save
sys.argv[0] = os.path.join(os.environ['PYTHONPATH'], 'experiments', 'export.py')
runpy.run_path(sys.argv[0], run_name='__main__')
'''


@pytest.mark.slow
@pytest.mark.parametrize('error,code,text', [('disk_full', 1, 'out of space or memory'),
                                             ('interrupt', 130, 'interrupted')])
def test_failed_export_removes_its_staging_dir_and_keeps_the_old_export(
    error, code, text, trained_workdir, tmp_path):
  output = tmp_path / 'export'
  (output / 'variables').mkdir(parents=True)
  for name in ('saved_model.pb', 'variables/variables.index'):
    (output / name).write_bytes(b'old ' + name.encode())
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO)
  command = [sys.executable, '-c', FAILING_SAVE, error, f'--workdir={trained_workdir}',
             f'--output={output}', '--overwrite']
  result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
  assert_one_line_error(result, text, code=code)
  assert sorted(os.listdir(tmp_path)) == ['export']  # no export.export-tmp left behind
  assert sorted(os.listdir(output)) == ['saved_model.pb', 'variables']
  assert (output / 'saved_model.pb').read_bytes() == b'old saved_model.pb'
  assert os.listdir(output / 'variables') == ['variables.index']
  assert (output / 'variables' / 'variables.index').read_bytes() == b'old variables/variables.index'


def test_result_file_is_never_replaced_by_nan_or_silently(tmp_path):
  path = str(tmp_path / 'fid.json')
  run_lib.write_json(path, {'fid': 1.5})
  with pytest.raises(ValueError, match=r'fid\.json exists: pass --overwrite'):
    run_lib.check_output_file(path, overwrite=False)
  run_lib.check_output_file(path, overwrite=True)
  with pytest.raises(ValueError, match=r'fid\.json not written: the result holds NaN'):
    run_lib.write_json(path, {'fid': float('nan')})
  assert json.load(open(path)) == {'fid': 1.5}
  assert os.listdir(tmp_path) == ['fid.json']


# ---- SavedModel inputs --------------------------------------------------------------------------
@pytest.fixture(scope='module')
def module(trained_workdir):
  return export.build_module(runs.load_run(trained_workdir))


@pytest.mark.parametrize('num, message', [(2**32 + 4, 'num_samples must be <= 2147483647'),
                                          (0, 'num_samples must be >= 1'),
                                          (-3, 'num_samples must be >= 1')])
def test_sample_rejects_num_samples_out_of_range_instead_of_wrapping(module, num, message):
  for fn in (module.sample, module.sample_path):
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
      fn(num, 0)
  assert module.sample(2, 0)['images'].shape[0] == 2


@pytest.mark.parametrize('fill, message', [(np.nan, 'images must be finite'),
                                           (np.inf, 'images must be finite'),
                                           (255.0, r'images must lie in \[-1, 1\]'),
                                           (1.01, r'images must lie in \[-1, 1\]'),
                                           (None, 'images must not be empty')])
def test_energy_rejects_non_finite_out_of_range_and_empty_images(module, fill, message):
  images = (np.zeros([0, 16, 16, 1], np.float32) if fill is None
            else np.full([2, 16, 16, 1], fill, np.float32))
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    module.energy(images)
  edge = np.full([2, 16, 16, 1], 1.0 + export.RANGE_TOLERANCE / 2, np.float32)
  assert np.all(np.isfinite(module.energy(edge)['energy']))  # float rounding is accepted


def test_foreign_saved_model_is_named(tmp_path):
  tf.saved_model.save(tf.Module(), str(tmp_path / 'foreign'))
  with pytest.raises(ValueError, match=r'--saved_model=.*foreign is not a Hat EBM export '
                                       r'\(no sample, sample_path, energy\)'):
    export.load_saved_model(str(tmp_path / 'foreign'), 'saved_model')


# ---- config ranges ------------------------------------------------------------------------------
@pytest.mark.parametrize('field, value', [
    ('langevin.steps', -3), ('langevin.steps', 0), ('sampling.steps', -1),
    ('langevin.step_size', 0.0), ('sampling.temperature', -1e-3), ('langevin.temperature', 0.0),
    ('training.batch_size', 0), ('training.batch_size', -4), ('optim.hat_lr', 1e39),
    ('optim.gen_lr', float('nan')), ('optim.hat_lr', -1e-4)])
def test_range_checks_name_the_config_field(field, value):
  config = tiny(**{field: value})
  with pytest.raises(ValueError, match=rf'^config field {field} must be'):
    run_lib.validate(config)


def test_range_checks_accept_sampling_without_steps():
  run_lib.validate(tiny(**{'sampling.steps': 0}))


def test_batch_split_rejects_non_positive_batches(two_replicas):
  for batch in (0, -4):
    with pytest.raises(ValueError,
                       match=f'training.batch_size must be an integer >= 1; got {batch}'):
      check_batch_split(batch, two_replicas)
  assert check_batch_split(4, two_replicas) == 2


# ---- the error guard ----------------------------------------------------------------------------
def raise_(error):
  def fn():
    raise error
  return fn


@pytest.mark.parametrize('error, code, text', [
    (OSError(errno.ENOSPC, 'No space left on device'), 1, 'out of space or memory'),
    (tf.errors.ResourceExhaustedError(None, None, 'ckpt-4.data: No space left on device'), 1,
     'ckpt-4.data: No space left on device'),
    (KeyboardInterrupt(), 130, 'interrupted at the test'),
    (ValueError('first\nsecond'), 1, 'first')])
def test_main_guard_one_line_and_exit_code(capsys, error, code, text):
  with pytest.raises(SystemExit) as exit_info:
    run_lib.main_guard(raise_(error), interrupted=lambda: 'interrupted at the test')
  assert exit_info.value.code == code
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and err.startswith('error: ') and text in err


@pytest.mark.parametrize('error', [OSError(errno.EIO, 'I/O error'), TypeError('a bug'),
                                   IndexError('a bug')])
def test_main_guard_keeps_genuine_bugs_as_tracebacks(error):
  with pytest.raises(type(error)):
    run_lib.main_guard(raise_(error))


# ---- generator factories ------------------------------------------------------------------------
def factory_raises():
  raise RuntimeError('no weights here')


def factory_returns_none():
  return None


NOT_A_FUNCTION = 3


@pytest.mark.parametrize('name, message', [
    ('factory_raises', 'raised RuntimeError: no weights here'),
    ('factory_returns_none', 'returned NoneType, not a callable model'),
    ('NOT_A_FUNCTION', 'is a int, not a function')])
def test_generator_factory_failures_name_the_factory(name, message):
  config = registry.defaults('joint')
  config.generator.source, config.generator.path = 'factory', f'test_reliability:{name}'
  config.generator.latent_shape = (4,)
  with pytest.raises(ValueError, match=f"generator factory 'test_reliability:{name}' {message}"):
    generators.load(config)
