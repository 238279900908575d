"""No input or fault loses a checkpoint or an output, and no command exits 0 with a wrong result.

The scripts' failures are one line on stderr naming the flag, config field or file, with a
non-zero exit; the pieces behind them (checkpoint lookup, output guards, SavedModel input checks,
config range checks, the error guard) are tested in-process.
"""
import errno
import re
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
from tf_hat_ebm import trained_run
from tf_hat_ebm import export
from tf_hat_ebm import registry
from tf_hat_ebm import generators
from tf_hat_ebm import errors
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import trainer as trainer_lib
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.keras_compat import keras
from tpu_utils.strategy import check_batch_split

from conftest import REPO, fid_result, run_command, tiny

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
    # recall's k-NN manifold needs 4 samples: refused at the flags, not after the sampling
    'fid_num_samples_two': ('evaluate_fid.py', ['--workdir={w}', '--num_samples=2'],
                            ['--num_samples=2', 'at least 4 samples']),
    'compare_fid_samples_three': ('compare_baselines.py', ['--workdir={w}', '--fid_samples=3',
                                                           '--out={t}/c'],
                                  ['--fid_samples=3', 'at least 4 samples']),
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


@pytest.mark.parametrize('case', sorted(CASES))
def test_script_failure_is_one_line_naming_the_cause(case, trained_workdir, damaged, tmp_path):
  name, args, texts = CASES[case]
  fill = dict(w=trained_workdir, t=tmp_path, **damaged)
  (tmp_path / 'sm').mkdir()
  (tmp_path / 'sm' / 'saved_model.pb').write_bytes(b'\x08\x01garbage')
  before = sorted(os.listdir(trained_workdir))
  result = run_command(name, *[a.format(**fill) for a in args])
  assert_one_line_error(result, *[t.format(**fill) for t in texts])
  # Nothing half-written: no output directory, no training workdir, the trained run untouched.
  assert not os.path.exists(tmp_path / 's') and not os.path.exists(tmp_path / 'e')
  assert not os.path.exists(tmp_path / 'w' / 'checkpoints')
  assert sorted(os.listdir(trained_workdir)) == before


def test_sample_refuses_a_used_output_and_overwrite_leaves_no_stale_grid(trained_workdir, tmp_path):
  out = tmp_path / 'out'
  out.mkdir()
  for name in ('samples_000.png', 'samples_001.png', 'samples_002.png', 'notes.txt'):
    (out / name).write_bytes(b'old')
  args = [f'--workdir={trained_workdir}', f'--output={out}', '--num_samples=3', '--path_chains=2']
  assert_one_line_error(run_command('sample.py', *args), f'--output={out}', '--overwrite')
  assert (out / 'samples_000.png').read_bytes() == b'old'  # refused: nothing touched
  result = run_command('sample.py', *args, '--overwrite', '--checkpoint=2')
  assert result.returncode == 0, result.stderr[-2000:]
  # The earlier files were not written by sample.py (no manifest lists them): all kept.
  assert sorted(os.listdir(out)) == [
      '.sample.manifest.json', 'generator_grid_000.png', 'langevin_path.png', 'notes.txt',
      'residual_grid_000.png', 'samples.npz', 'samples_000.png', 'samples_001.png',
      'samples_002.png', 'samples_grid_000.png', 'tensorboard']
  assert (out / 'samples_000.png').read_bytes() == b'old'
  assert (out / 'samples_grid_000.png').read_bytes()[:4] == b'\x89PNG'


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
    trained_run.load_run(str(tmp_path / 'w'))
  run = trained_run.load_run(str(tmp_path / 'w'), checkpoint=2)
  assert run.step == 2 and run.checkpoint == str(ckpt_dir / 'ckpt-2')
  assert trained_run.load_run(str(tmp_path / 'w'), checkpoint=str(ckpt_dir / 'ckpt-2')).step == 2
  with pytest.raises(ValueError, match=r'--checkpoint=5: no checkpoint .*ckpt-5.*: ckpt-2$'):
    trained_run.load_run(str(tmp_path / 'w'), checkpoint=5)


def test_list_checkpoints_reads_index_files_only(tmp_path):
  for name in ('ckpt-10.index', 'ckpt-10.data-00000-of-00001', 'ckpt-3.index', 'ckpt-7.data',
               'checkpoint', 'ckpt-x.index'):
    (tmp_path / name).write_bytes(b'')
  assert checkpoints.list_checkpoints(str(tmp_path)) == [3, 10]
  assert checkpoints.list_checkpoints(str(tmp_path / 'missing')) == []


# ---- outputs ------------------------------------------------------------------------------------
def write_owned(path, names, overwrite=False, script='sample'):
  with outputs.OwnedOutput(str(path), script, overwrite, 'output') as out:
    for name in names:
      with open(os.path.join(out.staging, name), 'w') as f:
        f.write('new')
    out.commit()
  return out


def test_output_overwrite_replaces_only_what_the_script_wrote(tmp_path):
  write_owned(tmp_path, ['a.png', 'b.png'])
  (tmp_path / 'notes.txt').write_text('mine')
  with pytest.raises(ValueError, match='--output=.* is not empty .*pass --overwrite'):
    write_owned(tmp_path, ['a.png'])
  write_owned(tmp_path, ['a.png'], overwrite=True)  # b.png was its own: removed
  assert sorted(os.listdir(tmp_path)) == ['.sample.manifest.json', 'a.png', 'notes.txt']
  with pytest.raises(FileExistsError, match='notes.txt exists and was not written by sample'):
    write_owned(tmp_path, ['notes.txt'], overwrite=True)
  assert (tmp_path / 'notes.txt').read_text() == 'mine'
  with pytest.raises(ValueError, match=r'--out=.*notes\.txt is a file'):
    outputs.check_output_dir(str(tmp_path / 'notes.txt'), True, 'out')


def test_output_is_never_a_workdir_or_its_own_directories(trained_workdir):
  for path in (trained_workdir, os.path.join(trained_workdir, 'samples'),
               os.path.join(trained_workdir, 'tensorboard'), trained_workdir + '/'):
    with pytest.raises(ValueError, match='is a training workdir or one of its own directories'):
      outputs.OwnedOutput(path, 'sample', True, 'output').check()
  outputs.OwnedOutput(os.path.join(trained_workdir, 'generated'), 'sample', True, 'output').check()


def test_a_second_writer_on_one_output_is_refused(tmp_path):
  with outputs.OwnedOutput(str(tmp_path), 'sample', True, 'output') as first:
    with pytest.raises(PermissionError, match='in use by another sample run'):
      write_owned(tmp_path, ['a.png'], overwrite=True)
    with pytest.raises(PermissionError, match='in use by another sample run'):
      write_owned(tmp_path, ['a.png'])  # its lock and staging alone: in use, not 'not empty'
    (tmp_path / 'late.png').write_text('another command')  # appeared while this one worked
    first.overwrite = False
    with pytest.raises(FileExistsError, match='was written to while this run worked'):
      first.commit()
  assert sorted(os.listdir(tmp_path)) == ['late.png']  # staging dir and claim removed


def test_staging_dirs_are_unique_and_a_killed_runs_are_cleared(tmp_path):
  (tmp_path / '.sample-staging-dead').mkdir()
  with outputs.OwnedOutput(str(tmp_path), 'sample', True, 'output') as a:
    assert os.path.basename(a.staging).startswith('.sample-staging-')
    assert not (tmp_path / '.sample-staging-dead').exists()


def write_tree(path, names, text):
  for name in names:
    if name.endswith('/'):
      (path / name).mkdir()
      (path / name / 'events').write_text(text)
    else:
      (path / name).write_text(text)


def owned(path, names, text='new', overwrite=True):
  with outputs.OwnedOutput(str(path), 'sample', overwrite, 'output') as out:
    write_tree(type(path)(out.staging), names, text)
    out.commit()


def test_overwrite_never_deletes_through_a_symlink(tmp_path):
  victim = tmp_path / 'victim'
  victim.mkdir()
  (victim / 'precious').write_text('keep')
  out = tmp_path / 'out'
  owned(out, ['tensorboard/', 'a.png'])
  os.symlink(victim, out / '.sample-staging-x')  # a leftover name pointing out of the output
  shutil.rmtree(out / 'tensorboard')
  os.symlink(victim, out / 'tensorboard')  # an entry the manifest lists, now a link
  with pytest.raises(FileExistsError, match='tensorboard is listed in .* but is not what sample'):
    owned(out, ['tensorboard/', 'a.png'])
  assert (victim / 'precious').read_text() == 'keep'
  assert not os.path.lexists(out / '.sample-staging-x')  # the link itself went, not its target
  assert (out / 'a.png').read_text() == 'new'  # the earlier output is all still there


def test_an_edited_manifest_deletes_nothing_the_script_did_not_write(tmp_path):
  owned(tmp_path, ['a.png'])
  (tmp_path / 'notes.txt').write_text('mine')
  manifest = tmp_path / '.sample.manifest.json'
  listed = json.loads(manifest.read_text())
  listed['files']['notes.txt'] = listed['files']['a.png']  # a forged entry (another file's stat)
  manifest.write_text(json.dumps(listed))
  with pytest.raises(FileExistsError, match='notes.txt is listed in .* but is not what sample'):
    owned(tmp_path, ['b.png'])
  listed['files'] = ['notes.txt', '../victim']  # the old list form: nothing can be checked
  manifest.write_text(json.dumps(listed))
  with pytest.raises(FileExistsError, match='notes.txt is listed'):
    owned(tmp_path, ['b.png'])
  assert (tmp_path / 'notes.txt').read_text() == 'mine'


def test_a_forged_commit_journal_deletes_nothing_of_the_users(tmp_path):
  owned(tmp_path, ['a.png'])
  for name in ('mine', '.sample-old-x'):
    (tmp_path / name).mkdir()
    (tmp_path / name / 'precious').write_text('keep')
  (tmp_path / 'notes.txt').write_text('keep')
  journal = tmp_path / '.sample.commit.json'
  for forged in (dict(aside='mine', old=[], new={}),
                 dict(aside='.sample-old-x', old=[], new={'notes.txt': ['file', 1, 4, 0]}),
                 dict(aside=7, old=[], new=[])):
    journal.write_text(json.dumps(forged))
    try:
      with outputs.OwnedOutput(str(tmp_path), 'sample', True, 'output'):
        pass
    except FileExistsError as e:  # unreadable: said, and nothing touched
      assert 'is unreadable' in str(e)
    assert (tmp_path / 'mine' / 'precious').read_text() == 'keep'
    assert (tmp_path / 'notes.txt').read_text() == 'keep'
    journal.unlink(missing_ok=True)


@pytest.mark.parametrize('kill_at', range(8))
def test_a_killed_commit_leaves_the_old_or_the_new_output(tmp_path, monkeypatch, kill_at):
  old, new = ['a.png', 'tensorboard/'], ['a.png', 'b.png', 'tensorboard/']
  owned(tmp_path, old, 'old')
  (tmp_path / 'notes.txt').write_text('mine')
  real, real_remove, calls = os.replace, os.remove, []

  def dying(fn):
    def call(path, *args):
      calls.append(path)
      if len(calls) > kill_at:
        raise KeyboardInterrupt  # the process dies here: nothing after it runs
      fn(path, *args)
    return call

  monkeypatch.setattr(os, 'replace', dying(real))
  journal_dies = dying(real_remove)
  monkeypatch.setattr(os, 'remove', lambda p: (
      journal_dies if p.endswith('.commit.json') else real_remove)(p))
  with pytest.raises(KeyboardInterrupt):
    owned(tmp_path, new, 'new')
  monkeypatch.setattr(os, 'replace', real)
  monkeypatch.setattr(os, 'remove', real_remove)
  with outputs.OwnedOutput(str(tmp_path), 'sample', True, 'output'):
    pass  # the next run recovers the killed commit
  names = sorted(n for n in os.listdir(tmp_path) if not n.startswith('.'))
  texts = {(tmp_path / n / 'events' if n == 'tensorboard' else tmp_path / n).read_text()
           for n in names if n != 'notes.txt'}
  # the journal's rename in, 2 renames aside, 3 in, the manifest's rename in, journal removed
  committed = kill_at >= 7
  assert names == (['a.png', 'b.png', 'notes.txt', 'tensorboard'] if committed else
                   ['a.png', 'notes.txt', 'tensorboard'])
  assert texts == {'new' if committed else 'old'}
  assert sorted(n for n in os.listdir(tmp_path) if n.startswith('.')) == [
      '.sample.manifest.json']
  owned(tmp_path, ['c.png'])  # and the output stays replaceable
  assert sorted(os.listdir(tmp_path)) == ['.sample.manifest.json', 'c.png', 'notes.txt']


class FakeModel:
  """model.sample of a Hat EBM module: images a pure function of the seed (2x2x1 pixels)."""

  def sample(self, num_samples, seed):
    x = np.random.RandomState(seed).uniform(-1, 1, [num_samples, 2, 2, 1]).astype(np.float32)
    scales = (('images', 1.0), ('generator_images', 0.5), ('residuals', 0.25))
    return {k: tf.constant(x * s) for k, s in scales}

  def sample_path(self, num_samples, seed):
    x = tf.zeros([3, num_samples, 2, 2, 1])
    return dict(images=x, residuals=x, generator_images=x[0], steps=tf.constant([0, 1, 2]))

  def energy(self, images):
    return {'energy': tf.reduce_sum(images, [1, 2, 3])}


def test_two_seeds_share_no_sample_and_evaluation_runs_are_independent():
  model = FakeModel()
  a, b = (samples_lib.draw(model, 400, 100, seed)['images'].reshape(400, -1) for seed in (0, 1))
  shared = {tuple(row) for row in a} & {tuple(row) for row in b}
  assert not shared and len({tuple(row) for row in a}) == 400
  keys = [(s, i, r) for s in range(3) for i in range(50) for r in range(3)]
  assert len({samples_lib.stream_seed(*k) for k in keys}) == len(keys)


def test_samples_stream_to_disk_in_batches(tmp_path):
  model = FakeModel()
  written, _, _ = samples_lib.write_samples(model, str(tmp_path), 250, seed=3, batch_size=60,
                                            path_chains=2)
  npz = np.load(tmp_path / 'samples.npz')
  expected = samples_lib.draw(model, 250, 60, 3)
  for k in samples_lib.ARRAYS:
    np.testing.assert_array_equal(npz[k], expected[k])
  assert int(npz['seed']) == 3
  assert sorted(os.listdir(tmp_path)) == sorted(
      [f'{p}_grid_00{i}.png' for p in ('samples', 'generator', 'residual') for i in range(3)]
      + ['langevin_path.png', 'samples.npz'])
  assert sorted(os.path.basename(p) for p in written) == sorted(os.listdir(tmp_path))  # each once
  with pytest.raises(ValueError, match=r'1000000000000 samples of \[2, 2, 1\] need about .* GB'):
    samples_lib.write_samples(model, str(tmp_path), 10**12)


# Runs experiments/export.py with tf.saved_model.save failing half-way through its write.
@pytest.mark.parametrize('error,code,text', [('disk_full', 1, 'out of disk space'),
                                             ('interrupt', 130, 'interrupted')])
def test_failed_export_removes_its_staging_dir_and_keeps_the_old_export(
    error, code, text, trained_workdir, tmp_path, monkeypatch):
  output = tmp_path / 'export'
  (output / 'variables').mkdir(parents=True)
  for name in ('saved_model.pb', 'variables/variables.index'):
    (output / name).write_bytes(b'old ' + name.encode())

  def save(module, output_dir, **kwargs):  # a save that fails half-way
    del module, kwargs
    os.makedirs(os.path.join(output_dir, 'variables'))
    with open(os.path.join(output_dir, 'variables', 'variables.data-00000-of-00001'), 'wb') as f:
      f.write(b'half')
    if error == 'disk_full':
      raise tf.errors.ResourceExhaustedError(None, None, 'No space left on device')
    raise KeyboardInterrupt

  monkeypatch.setattr(tf.saved_model, 'save', save)
  result = run_command('export.py', f'--workdir={trained_workdir}', f'--output={output}',
                       '--overwrite')
  assert_one_line_error(result, text, code=code)
  assert sorted(os.listdir(tmp_path)) == ['export']  # no export.export-tmp left behind
  assert sorted(os.listdir(output)) == ['saved_model.pb', 'variables']
  assert (output / 'saved_model.pb').read_bytes() == b'old saved_model.pb'
  assert os.listdir(output / 'variables') == ['variables.index']
  assert (output / 'variables' / 'variables.index').read_bytes() == b'old variables/variables.index'


def test_result_file_is_never_replaced_by_nan_or_silently(tmp_path):
  path = str(tmp_path / 'fid.json')
  result_files.write_json(path, {'fid': 1.5})
  with pytest.raises(ValueError, match=r'fid\.json exists: pass --overwrite'):
    result_files.check_output_file(path, overwrite=False)
  result_files.check_output_file(path, overwrite=True)
  with pytest.raises(ValueError, match='is a directory'):
    result_files.check_output_file(str(tmp_path), overwrite=True)
  with pytest.raises(ValueError, match=r'fid\.json not written: the result holds NaN'):
    result_files.write_json(path, {'fid': float('nan')})
  assert json.load(open(path)) == {'fid': 1.5}
  assert os.listdir(tmp_path) == ['fid.json']


# ---- SavedModel inputs --------------------------------------------------------------------------
@pytest.fixture(scope='module')
def module(trained_workdir):
  return export.build_module(trained_run.load_run(trained_workdir))


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
    trainer_lib.validate(config)


def test_range_checks_accept_sampling_without_steps():
  trainer_lib.validate(tiny(**{'sampling.steps': 0}))


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
    (OSError(errno.ENOSPC, 'No space left on device'), 1, 'out of disk space: free some'),
    (tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating tensor'), 1,
     'out of memory: use a smaller batch'),
    (tf.errors.ResourceExhaustedError(None, None, 'ckpt-4.data: No space left on device'), 1,
     'ckpt-4.data: No space left on device'),
    (KeyboardInterrupt(), 130, 'interrupted at the test'),
    (ValueError('first\nsecond'), 1, 'first')])
def test_main_guard_one_line_and_exit_code(capsys, error, code, text):
  with pytest.raises(SystemExit) as exit_info:
    errors.main_guard(raise_(error), interrupted=lambda: 'interrupted at the test')
  assert exit_info.value.code == code
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and err.startswith('error: ') and text in err


@pytest.mark.parametrize('error', [OSError(errno.EIO, 'I/O error'), TypeError('a bug'),
                                   IndexError('a bug')])
def test_main_guard_keeps_genuine_bugs_as_tracebacks(error):
  with pytest.raises(type(error)):
    errors.main_guard(raise_(error))


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


# ---- a joint run pins its frozen generator ---------------------------------------------------
@pytest.fixture(scope='module')
def pinned_refinement(tmp_path_factory):
  """A tiny SN-GAN (ckpt-2), a refinement over it, then the SN-GAN trained on to ckpt-4.

  One SN-GAN training of 4 steps, not two trainings: its ckpt-4 and state file are set aside
  while the refinement starts, as if not written yet (a training traces for seconds of CPU)."""
  from tf_hat_ebm.tasks import sngan  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp('pinned')
  gan, refine = str(root / 'gan'), str(root / 'refine')
  strategy = tf.distribute.get_strategy()
  gan_config = tiny('digits_sngan', **{'training.keep_checkpoints': 5})
  Trainer(sngan.SNGANTask(gan_config, strategy), gan_config, gan, strategy,
          verbose=False).train(4)
  ckpt, later = os.path.join(gan, 'checkpoints'), root / 'later'
  later.mkdir()
  for name in os.listdir(ckpt):
    if name.startswith('ckpt-4.') or name == 'checkpoint':
      shutil.move(os.path.join(ckpt, name), later / name)
  tf.compat.v1.train.update_checkpoint_state(ckpt, os.path.join(ckpt, 'ckpt-2'))
  cwd = os.getcwd()
  os.chdir(root)  # a relative generator.path: recorded absolute
  try:
    config = tiny('digits_refine', **{'generator.path': 'gan', 'model.disc_width': 8})
    trainer_lib.train(config, refine, strategy, num_steps=2,
                      verbose=False)
  finally:
    os.chdir(cwd)
  for name in os.listdir(later):
    shutil.move(later / name, os.path.join(ckpt, name))
  return gan, refine, gan_config


def test_joint_run_records_its_generator_and_loads_exactly_that(pinned_refinement):
  gan, refine, gan_config = pinned_refinement
  saved = trained_run.load_config(refine).generator
  assert saved.path == gan and saved.checkpoint == 2 and len(saved.fingerprint) == 16
  assert checkpoints.list_checkpoints(os.path.join(gan, 'checkpoints'))[-1] == 4
  run = trained_run.load_run(refine)  # the SN-GAN's latest is ckpt-4: ckpt-2 is loaded
  pinned, _ = generators.load_sngan(gan, gan_config, checkpoint=2)
  z = tf.random.normal([2, 4])
  np.testing.assert_array_equal(run.model.generator(z).numpy(), pinned(z).numpy())


def test_resume_over_another_generator_checkpoint_names_both(pinned_refinement):
  _, refine, _ = pinned_refinement
  config = tiny('digits_refine', **{'generator.path': pinned_refinement[0],
                                    'model.disc_width': 8, 'generator.checkpoint': 4})
  with pytest.raises(ValueError, match=r'made with the generator sngan .*gan ckpt-2; this '
                     r'config asks for sngan .*gan ckpt-4'):
    trainer_lib.train(config, refine, tf.distribute.get_strategy(),
                      num_steps=4, verbose=False)


def test_other_generator_weights_are_an_error_unless_asked(pinned_refinement, tmp_path):
  _, refine, _ = pinned_refinement
  copy = str(tmp_path / 'refine')
  shutil.copytree(refine, copy)
  path = os.path.join(copy, 'config.json')
  with open(path) as f:
    config = json.load(f)
  config['generator']['fingerprint'] = '0123456789abcdef'
  with open(path, 'w') as f:
    json.dump(config, f)
  with pytest.raises(ValueError, match='weights [0-9a-f]{16}, but this run was made with weights '
                     '0123456789abcdef'):
    trained_run.load_run(copy)
  run = trained_run.load_run(copy, allow_other_generator=True)
  # The trained weights stay the run's record; the substitute's are recorded beside them.
  assert run.step == 2 and run.config.generator.fingerprint == '0123456789abcdef'
  assert re.fullmatch('[0-9a-f]{16}', run.other_generator)
  card = export.build_module(run).asset_texts
  assert json.loads(card['config.json'])['generator']['fingerprint'] == '0123456789abcdef'
  assert (f'| generator | trained with weights 0123456789abcdef; this export uses other weights '
          f'{run.other_generator} (--allow_other_generator) |') in card['README.md']
  # The same weights: no substitute recorded.
  assert trained_run.load_run(refine, allow_other_generator=True).other_generator is None


def test_a_moved_or_trained_on_generator_names_this_commands_flags(pinned_refinement, tmp_path,
                                                                   trained_workdir):
  gan, refine, _ = pinned_refinement
  copy, moved_gan = str(tmp_path / 'refine'), str(tmp_path / 'gan2')
  shutil.copytree(refine, copy)
  path = os.path.join(copy, 'config.json')
  config = json.loads(open(path).read())
  config['generator']['path'] = str(tmp_path / 'gone')  # the SN-GAN was moved from here
  with open(path, 'w') as f:
    json.dump(config, f)
  with pytest.raises(ValueError, match=r'ckpt-2 of .*gone, is gone \(the directory no longer '
                     r'exists: moved\?\): if it moved, pass --generator_path=ITS_NEW_DIR'):
    trained_run.load_run(copy)
  assert trained_run.load_run(copy, generator_path=gan).step == 2
  shutil.copytree(gan, moved_gan)
  for name in os.listdir(os.path.join(moved_gan, 'checkpoints')):
    if name.startswith('ckpt-2.'):  # deleted by the SN-GAN's later training (keep_checkpoints)
      os.remove(os.path.join(moved_gan, 'checkpoints', name))
  with pytest.raises(ValueError, match='checkpoints there now: ckpt-4.*--generator_checkpoint=4 '
                     '--allow_other_generator'):
    trained_run.load_run(copy, generator_path=moved_gan)
  with pytest.raises(ValueError, match='--allow_other_generator'):  # other weights: asked for
    trained_run.load_run(copy, generator_path=moved_gan, generator_checkpoint=4)
  run = trained_run.load_run(copy, generator_path=moved_gan, generator_checkpoint=4,
                             allow_other_generator=True)
  assert run.config.generator.checkpoint == 4
  with pytest.raises(ValueError, match='apply to joint runs'):
    trained_run.load_run(trained_workdir, generator_path=gan)


# ---- one validation, on every load -------------------------------------------------------------
@pytest.mark.parametrize('field, value, message', [
    ('langevin.max_drift', -1.0,
     'langevin.max_drift must be a finite number > 0 and <= 1e+06 (or None)'),
    ('optim.beta1', 1.5, 'optim.beta1 must be a finite number >= 0 and < 1'),
    ('training.num_grid_samples', 0, 'training.num_grid_samples must be an integer >= 1'),
    ('training.keep_checkpoints', 0, 'training.keep_checkpoints must be an integer >= 1'),
    ('sampling.prior_sigma', 0.0, 'sampling.prior_sigma must be a finite number > 0')])
def test_validation_catches_values_that_reverse_or_break_a_run(field, value, message):
  with pytest.raises(ValueError, match=re.escape(message)):
    trainer_lib.validate(tiny(**{field: value}))


@pytest.mark.parametrize('experiment, field, value, message', [
    ('digits_synth', 'perf.precision', 'fp8', 'perf.precision must be one of auto, float32'),
    ('digits_synth', 'optim.hat_clip_mode', 'all', 'optim.hat_clip_mode must be one of global'),
    ('digits_synth', 'training.generator_update', 'bnk',
     'training.generator_update must be one of bank, current, cooperative, cooperative_bn'),
    ('digits_synth', 'data.crop', 'centre', 'data.crop must be one of release, random_resized'),
    ('digits_synth', 'data.resize_method', 'cubic', 'data.resize_method must be one of bilinear'),
    ('digits_sngan', 'optim.lr_decay', 'cosine', 'optim.lr_decay must be one of linear, constant'),
    ('digits_synth', 'model.init', 'he', 'model.init must be one of glorot, mimicry'),
    ('digits_refine', 'perf.jit_compile', 'yes', 'perf.jit_compile must be one of auto, on, off'),
    ('digits_synth', 'training.guard.action', 'pause', 'training.guard.action must be one of auto'),
    ('digits_refine', 'generator.source', 'pickle', 'generator.source must be one of sngan'),
    ('digits_synth', 'sampling.steps', 10**11, 'sampling.steps must be an integer >= 0 and <= '),
    ('digits_synth', 'langevin.step_size', 1e30, 'langevin.step_size must be a finite number > 0 '
     'and <= 100'),
    ('digits_refine', 'sampling.latent_step_size', 1e9, 'sampling.latent_step_size must be'),
    ('digits_synth', 'model.hat_width', 10**6, 'model.hat_width must be an integer >= 1 and <='),
    ('digits_refine', 'model.z_dim', 10**9, 'model.z_dim must be an integer >= 1 and <='),
    ('digits_synth', 'seed', 2**40, 'seed must be an integer >= 0 and <= 2147483647'),
    ('digits_synth', 'data.seed', -1, 'data.seed must be an integer >= 0'),
    ('digits_synth', 'training.num_steps', 10**12, 'training.num_steps must be an integer >= 0'),
    ('digits_synth', 'training.batch_size', 10**8, 'training.batch_size must be an integer >= 1 '
     'and <= 65536'),
    ('digits_synth', 'training.bank_size', 10**10, 'training.bank_size must be'),
    ('digits_synth', 'name', 'a\udc80b', 'name must be printable text'),
    ('digits_synth', 'name', 'a\x1b[2Jb', 'name must be printable text'),
    ('digits_synth', 'name', 'x' * 201, 'name must be printable text of at most 200'),
    ('digits_synth', 'data.data_dir', 'a\nb', 'data.data_dir must be printable text')])
def test_every_choice_and_bound_is_checked_before_anything_is_built(experiment, field, value,
                                                                    message):
  config = tiny(experiment)
  section, _, name = field.rpartition('.')
  (config[section] if section else config)[name] = value
  with pytest.raises(ValueError, match=re.escape(message)) as error:
    trainer_lib.validate(config)
  assert '\n' not in str(error.value)


def test_unknown_fields_are_named_at_build_and_on_load(trained_workdir, tmp_path):
  config = tiny()
  config.training.batchsize = 3  # a config file's typo: would be ignored
  with pytest.raises(ValueError, match='unknown config field training.batchsize'):
    trainer_lib.validate(config)
  shutil.copytree(trained_workdir, tmp_path / 'w')
  path = tmp_path / 'w' / 'config.json'
  edited = json.loads(path.read_text())
  edited['sampling']['stepsize'] = 1.0
  edited['colour'] = 'red'
  path.write_text(json.dumps(edited))
  with pytest.raises(ValueError, match=re.escape(
      f'{path}: unknown config fields colour, sampling.stepsize')):
    trained_run.load_config(str(tmp_path / 'w'))


def test_the_choice_lists_are_defined_once():
  from tf_hat_ebm import data, learning, nets  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.tasks import sngan, synthesis  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import validation  # pylint: disable=g-import-not-at-top
  assert generators.SOURCES is validation.GENERATOR_SOURCES
  assert nets.PRECISIONS is validation.PRECISIONS and nets.INITS is validation.INITS
  assert learning.CLIP_MODES is validation.CLIP_MODES and data.CROPS is validation.CROPS
  assert sngan.LR_DECAYS is validation.LR_DECAYS
  assert synthesis.GENERATOR_UPDATES is validation.GENERATOR_UPDATES


def test_a_retrofit_config_read_back_is_not_filled_in_nor_a_change(tmp_path):
  config = tiny('digits_retrofit', **{'generator.fingerprint': '0123456789abcdef'})  # trained
  kind = registry.for_config(config)
  workdir_lib.write_config(str(tmp_path), config)
  (tmp_path / 'checkpoints').mkdir()
  (tmp_path / 'checkpoints' / 'ckpt-2.index').write_bytes(b'')
  loaded = trained_run.load_config(str(tmp_path))
  assert 'z_dim' not in loaded.model and 'disc_width' not in loaded.model
  workdir_lib.check_config(str(tmp_path), config, str(tmp_path / 'checkpoints'), kind)  # resumes


@pytest.mark.parametrize('section, field, value, message', [
    ('sampling', 'step_size', -5e-4, 'sampling.step_size must be a finite number > 0'),
    ('sampling', 'steps', -2, 'sampling.steps must be an integer >= 0'),
    ('model', 'hat_width', '8', "model.hat_width must be an integer; got '8'"),
    ('training', 'guard', 3, 'training.guard must be a section')])
def test_a_config_json_read_back_is_validated(trained_workdir, tmp_path, section, field, value,
                                              message):
  shutil.copytree(trained_workdir, tmp_path / 'w')
  path = tmp_path / 'w' / 'config.json'
  config = json.loads(path.read_text())
  config[section][field] = value
  path.write_text(json.dumps(config))
  with pytest.raises(ValueError, match=re.escape(f'{path}: config field {message}')):
    trained_run.load_run(str(tmp_path / 'w'))


def test_a_workdir_naming_a_factory_runs_no_code_unless_trusted(tmp_path):
  workdir = tmp_path / 'w'
  workdir.mkdir()
  workdir_lib.write_config(str(workdir), tiny('digits_refine', **{
      'generator.source': 'factory', 'generator.path': 'os:abort', 'generator.latent_shape': (4,)}))
  with pytest.raises(ValueError, match="names the generator factory 'os:abort'.*"
                                       '--trust_workdir_code'):
    trained_run.load_run(str(workdir))


def test_a_workdir_naming_a_module_as_its_kind_imports_nothing_unless_trusted(
    trained_workdir, tmp_path, monkeypatch):
  workdir, marker = tmp_path / 'w', tmp_path / 'ran'
  shutil.copytree(trained_workdir, workdir)
  (tmp_path / 'evil_kind.py').write_text(
      f'open({str(marker)!r}, "w").write("x")\n'
      'from tf_hat_ebm import registry\n'
      'KIND = registry.Kind("evil_kind.x", "tf_hat_ebm.config:synthesis_defaults", "t:T")\n')
  (tmp_path / 'evil_kind').mkdir()
  (tmp_path / 'evil_kind' / '__init__.py').write_text((tmp_path / 'evil_kind.py').read_text())
  monkeypatch.syspath_prepend(str(tmp_path))
  config = json.loads((workdir / 'config.json').read_text())
  config['experiment'] = 'evil_kind.x'
  (workdir / 'config.json').write_text(json.dumps(config))
  for load in (trained_run.load_run, trained_run.load_config, workdir_lib.load_config):
    with pytest.raises(ValueError, match="names the experiment 'evil_kind.x', not a kind of "
                       'tf_hat_ebm.*--trust_workdir_code'):
      load(str(workdir))
  assert not marker.exists() and 'evil_kind' not in sys.modules
  with pytest.raises(ValueError, match='no module evil_kind.x defining KIND'):
    trained_run.load_config(str(workdir), trust_code=True)  # trusted: imported (and it is no kind)
  assert marker.exists()
  sys.modules.pop('evil_kind', None)


def test_a_savedmodel_generator_loads_as_a_graph_running_no_python(tmp_path):
  marker = str(tmp_path / 'ran')
  model = keras.Sequential([keras.layers.Input([4]), keras.layers.Dense(256),
                            keras.layers.Reshape([16, 16, 1])])

  def touch(x):  # Python a Keras loader would unmarshal and run (as any Lambda's)
    open(marker, 'a').close()
    return x
  model.add(keras.layers.Lambda(touch))
  model.save(str(tmp_path / 'g'))
  os.remove(marker)  # saving traced it once
  config = registry.defaults('joint')
  config.generator.update(source='savedmodel', path=str(tmp_path / 'g'), latent_shape=(4,))
  config.data.update(name='digits', image_size=16, channels=1)
  generator, _ = generators.load(config)
  assert generator(tf.zeros([2, 4])).shape == (2, 16, 16, 1)
  assert not os.path.exists(marker)


def test_text_from_a_workdir_stays_inert_in_the_model_card(trained_workdir, tmp_path):
  workdir = tmp_path / 'w'
  shutil.copytree(trained_workdir, workdir)
  config = json.loads((workdir / 'config.json').read_text())
  config['name'] = '## Measured [ok](http://e.vil) <img src=x onerror=alert(1)> | x |'
  (workdir / 'config.json').write_text(json.dumps(config))
  method = 'fid\n## Measured'
  (workdir / 'fid.json').write_text(json.dumps(dict(
      fid_result(**{method: [1.5, 2.5], 'nan': [float('nan'), 1.0]}), step='now', num_samples=7,
      feature_net='<script>x</script>\n\nMeasured (forged):\n- FID 0.01')))
  (workdir / 'ood.json').write_text(json.dumps({'sets': {'a': {'auroc': 'high'}, 'b': 3},
                                                'in_distribution': None}))
  card = export.build_module(trained_run.load_run(str(workdir))).asset_texts['README.md']
  lines = card.splitlines()
  assert [line for line in lines if line.startswith('#')] == [
      lines[0], '## Calling it', '## Limitations', '## License', '## Citation']  # its own only
  assert lines[0].startswith('# Hat EBM: \\#\\# Measured \\[ok\\]\\(http')
  assert [line for line in lines if line.startswith('Measured')] == [
      'Measured (the workdir\'s evaluation files at export):']
  assert '<' not in card.split('## Calling it')[0].replace('\\<', '')  # no live HTML
  assert '- FID fid \\#\\# Measured (\\<script\\>x\\<\\/script\\> Measured' in card
  fids = [line for line in lines if line.startswith('- FID')]
  assert len(fids) == 1 and fids[0].endswith(': 2.00 ± 0.71')  # sets not all finite left out
  assert '- OOD AUROC, a vs None (step None): ?' in card


def test_an_fid_too_large_for_memory_is_refused_before_sampling(monkeypatch):
  from tf_hat_ebm.evaluation import fid  # pylint: disable=g-import-not-at-top
  pages = {'SC_PAGE_SIZE': 4096, 'SC_PHYS_PAGES': 2**20}  # 4 GiB
  monkeypatch.setattr(os, 'sysconf', pages.__getitem__)
  fid.check_memory(50_000)  # 1.6 GB of Inception activations
  with pytest.raises(ValueError, match=r'--num_samples=1000000: the FID activations need about '
                     r'32\.8 GB, more than half'):
    fid.check_memory(10**6)


def test_lock_that_is_a_directory_or_half_written(tmp_path):
  (tmp_path / 'a' / workdir_lib.LOCK_NAME).mkdir(parents=True)
  with pytest.raises(PermissionError, match='train.lock is a directory, not a lock file'):
    with workdir_lib.WorkdirLock(str(tmp_path / 'a'), log=lambda _: None):
      pass
  (tmp_path / 'b').mkdir()
  (tmp_path / 'b' / workdir_lib.LOCK_NAME).write_text('{"pid": 12')  # a killed write
  logged = []
  with workdir_lib.WorkdirLock(str(tmp_path / 'b'), log=logged.append) as lock:
    assert lock.held and 'garbled' in logged[0]


def test_a_lock_naming_a_live_unrelated_pid_is_taken_over(tmp_path):
  sleeper = subprocess.Popen(['sleep', '60'])  # alive, and not the run that wrote the lock
  try:
    for owner in (dict(pid=os.getpid(), start=workdir_lib.process_start(os.getpid()) + 1),
                  dict(pid=sleeper.pid)):  # a reused pid / an older lock of a non-Python pid
      (tmp_path / workdir_lib.LOCK_NAME).write_text(json.dumps(dict(owner, host=os.uname()[1])))
      logged = []
      with workdir_lib.WorkdirLock(str(tmp_path), log=logged.append) as lock:
        assert lock.held and 'no longer running' in logged[0]
  finally:
    sleeper.kill()
    sleeper.wait()
  with workdir_lib.WorkdirLock(str(tmp_path), log=print):  # a live holder still blocks
    with pytest.raises(PermissionError, match='in use by another training run'):
      with workdir_lib.WorkdirLock(str(tmp_path), log=print):
        pass


def test_ctrl_c_at_start_up_and_a_json_config_are_one_line(capsys):
  from tf_hat_ebm import cli  # pylint: disable=g-import-not-at-top
  hook = cli._interrupted_hook  # pylint: disable=protected-access
  assert sys.excepthook is hook
  hook(KeyboardInterrupt, KeyboardInterrupt(), None)
  assert capsys.readouterr().err == 'error: interrupted\n'
  with pytest.raises(SystemExit) as exit_:
    cli.refuse_json_config(['--workdir=W', '--config', 'W/config.json'])
  assert exit_.value.code == 1
  assert capsys.readouterr().err.startswith('error: --config=W/config.json is a JSON file')
  cli.refuse_json_config(['--config=experiments/configs/digits_synth.py'])


def test_ctrl_c_before_any_checkpoint_does_not_promise_a_resume(tmp_path):
  assert trainer_lib.interrupted_message(str(tmp_path)) == (
      f'interrupted before the first checkpoint (nothing saved in {tmp_path}); the same command '
      'starts the run over')
  (tmp_path / 'checkpoints').mkdir()
  (tmp_path / 'checkpoints' / 'ckpt-4.index').write_bytes(b'')
  assert 'last checkpoint: step 4' in trainer_lib.interrupted_message(str(tmp_path))


def test_a_damaged_or_unwritable_feature_cache_is_one_line_before_training(tmp_path, monkeypatch):
  from tf_hat_ebm.evaluation import features  # pylint: disable=g-import-not-at-top
  data_cfg = tiny().data
  directory = tmp_path / 'feature_classifier' / features.cache_key(data_cfg)
  directory.mkdir(parents=True)
  (directory / 'info.json').write_text('')  # a killed write of an older version
  with pytest.raises(ValueError, match=f'cached FID feature classifier {directory} is damaged'):
    features.trained_classifier(data_cfg, str(tmp_path))
  (directory / 'info.json').write_text(json.dumps(dict(num_classes=10, test_accuracy=0.9)))
  with pytest.raises(ValueError, match=f'{directory} is damaged .*remove that directory'):
    features.trained_classifier(data_cfg, str(tmp_path))  # the weights are missing

  def no_training(*args):
    raise AssertionError('trained before the cache was found unwritable')
  monkeypatch.setattr(features, 'labelled_arrays', no_training)
  (tmp_path / 'a_file').write_text('')
  with pytest.raises(PermissionError, match='cannot write the FID feature cache .*a_file.*'
                     '--feature_cache_dir'):
    features.trained_classifier(data_cfg, str(tmp_path / 'a_file'))


def test_a_truncated_statistics_file_is_computed_again(tmp_path):
  from tf_hat_ebm.evaluation import fid  # pylint: disable=g-import-not-at-top

  class Net:
    name = 'mean'

    def __call__(self, images):
      return tf.reduce_mean(images, axis=[1, 2])

  data_cfg = tiny().data
  path = fid.stats_path(str(tmp_path), data_cfg, 'test', Net())
  os.makedirs(os.path.dirname(path))
  with open(path, 'wb') as f:
    f.write(b'PK\x03\x04 truncated')
  acts = fid.data_activations(data_cfg, 'test', Net(), str(tmp_path), verbose=False)
  assert acts.shape[1] == 1 and len(acts) > 100
  np.testing.assert_array_equal(fid.data_activations(data_cfg, 'test', Net(), str(tmp_path),
                                                     verbose=False), acts)  # now cached


@pytest.mark.parametrize('name', ['no-such-tpu', 'local'])
def test_an_unreachable_tpu_is_one_line_saying_what_to_check(monkeypatch, name):
  import urllib.request  # pylint: disable=g-import-not-at-top
  import urllib.error  # pylint: disable=g-import-not-at-top
  import tpu_utils  # pylint: disable=g-import-not-at-top

  def no_network(*args, **kwargs):  # what the metadata lookup meets off GCE, without waiting
    raise urllib.error.URLError(OSError(-2, 'Name or service not known'))
  monkeypatch.setattr(urllib.request, 'urlopen', no_network)
  with pytest.raises(ValueError, match=f'--tpu={name}: the TPU could not be reached .*check the '
                     'TPU name') as error:
    tpu_utils.make_strategy(name)
  assert '\n' not in str(error.value)


def test_every_checkpoint_corrupt_does_not_advise_latest_intact(tmp_path):
  (tmp_path / 'ckpt-2.index').write_bytes(b'x')
  message = str(checkpoints.resume_error(str(tmp_path), 'none restores', none_restores=True))
  assert 'latest_intact' not in message and 'restore the checkpoints from a copy' in message


@pytest.mark.slow
@pytest.mark.parametrize('args, texts', [
    (['--config={t}/raises.py'], ['--config', 'RuntimeError: no such setting', 'line 2']),
    (['--config={t}'], ['--config', 'Is a directory']),
    (['--workdir='], ['--workdir is empty'])])
def test_bad_config_file_or_empty_workdir_is_one_line(tmp_path, args, texts):
  (tmp_path / 'raises.py').write_text('def get_config():\n'
                                      '  raise RuntimeError("no such setting")\n')
  result = script('train_synthesis.py', *[a.format(t=tmp_path) for a in args], *TINY)
  assert_one_line_error(result, *texts)
  assert not os.path.exists('workdir/digits_synth/checkpoints/ckpt-1.index')
