"""Inputs checked before the work: sample counts a metric cannot use are refused at the flags,
and every reader of a results or record file names the file and field of a malformed value."""
import json
import re
import shutil

import numpy as np
import pytest

from tf_hat_ebm import results as result_lib
from tf_hat_ebm import validation
from tf_hat_ebm.evaluation import metrics

from conftest import run_command


def test_the_least_sample_count_is_the_k_nn_manifolds():
  assert validation.MIN_METRIC_SAMPLES == metrics.K_NEAREST + 1


@pytest.fixture(name='evaluated')
def evaluated_fixture(trained_workdir, tmp_path):
  """A copy of the tiny trained run with a fid.json as evaluate_fid.py writes it."""
  workdir = tmp_path / 'run'
  shutil.copytree(trained_workdir, workdir)
  result = result_lib.EvalResult(
      methods={'hat_ebm': 'Hat EBM'}, metrics={'fid': result_lib.FID},
      values={'fid': {'hat_ebm': [11.0, 12.0]}}, step=2, runs=2, num_samples=4)
  (workdir / 'fid.json').write_text(json.dumps(result.to_json()))
  return workdir


def edit_fid(workdir, edit):
  saved = json.loads((workdir / 'fid.json').read_text())
  edit(saved)
  (workdir / 'fid.json').write_text(json.dumps(saved))


@pytest.mark.parametrize('edit, reason', [
    (lambda s: s.update(schema=3), 'an evaluation result of schema 3'),
    (lambda s: s.pop('metrics'), 'field metrics is null, not an object'),
    (lambda s: s['metrics']['fid'].update(digits=True),
     'field metrics.fid.digits is true, not a whole number of decimals 0-10'),
    (lambda s: s['values'].update(fid={}), 'it holds no finite score')])
def test_an_unreadable_fid_json_is_named_in_the_model_card_never_none_recorded(
    evaluated, capsys, edit, reason):
  from tf_hat_ebm import export  # pylint: disable=g-import-not-at-top
  assert export._measured(str(evaluated))[0].startswith('- FID')  # as written: read
  edit_fid(evaluated, edit)
  lines = [line.replace('\\', '') for line in export._measured(str(evaluated))]  # markdown
  assert len(lines) == 1 and lines[0].startswith(f'- fid.json: not read ({reason}'), lines
  assert f'warning: {evaluated}/fid.json is not read into the model card ({reason}' in (
      capsys.readouterr().err)


def test_an_export_over_a_fid_json_of_another_schema_says_so(evaluated, tmp_path):
  edit_fid(evaluated, lambda s: s.update(schema=3))
  output = tmp_path / 'export'
  result = run_command('export.py', f'--workdir={evaluated}', f'--output={output}')
  assert result.returncode == 0, result.stderr
  card = (output / 'assets' / 'README.md').read_text()
  assert 'none recorded' not in card
  assert '- fid.json: not read (an evaluation result of schema 3' in card
  assert 'fid.json is not read into the model card' in result.stderr


def test_digits_true_in_a_result_is_one_line_naming_the_field(evaluated):
  edit_fid(evaluated, lambda s: s['metrics']['fid'].update(digits=True))
  with pytest.raises(ValueError, match='field metrics.fid.digits is true'):
    result_lib.read(str(evaluated / 'fid.json'))


@pytest.mark.parametrize('arrays, message', [
    (dict(samples=np.zeros([2, 8, 8, 1])), r'has no images array \[N, H, W, C\] \(its arrays '
                                           r'are samples\)'),
    (dict(images=np.zeros([8, 8])),
     r'has no images array .* \(its images are of shape \[8, 8\]\)')])
def test_calibrate_refuses_a_samples_file_without_images_before_the_calibration(
    trained_workdir, tmp_path, monkeypatch, arrays, message):
  from tf_hat_ebm.evaluation import calibration  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(calibration, 'calibrate', lambda *a, **k: pytest.fail('calibrated first'))
  np.savez(tmp_path / 'x.npz', **arrays)
  result = run_command('calibrate_fid.py', f'--workdir={trained_workdir}',
                       f'--samples=mine={tmp_path / "x.npz"}', f'--output={tmp_path / "c.json"}')
  assert result.returncode == 1 and result.stderr.count('\n') == 1, result.stderr
  assert re.search(f'^error: --samples mine={tmp_path}/x.npz {message}', result.stderr)
  assert not (tmp_path / 'c.json').exists()


def test_a_state_file_of_bytes_is_named(trained_workdir, tmp_path):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import checkpoints  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / 'run'
  shutil.copytree(trained_workdir, workdir)
  state = workdir / 'checkpoints' / 'checkpoint'
  state.write_bytes(b'\x8c\xff\x00 not text')
  result = run_command('sample.py', f'--workdir={workdir}', f'--output={tmp_path / "s"}')
  assert result.returncode == 1 and result.stderr.count('\n') == 1, result.stderr
  assert f'the state file {state} is missing or unreadable, but ckpt-2 exist' in result.stderr
  with pytest.raises(ValueError, match=f'{state}, the checkpoints\' state file, is not text .*'
                     'ckpt-2'):  # training's managers read it too
    checkpoints.checkpoint_managers(str(workdir / 'checkpoints'), tf.Variable(0, dtype=tf.int64),
                                    {}, {}, 3)
