"""Hostile or damaged input is one line naming the file or field, never a traceback; bounds a user
can wait for (docs/reliability.md, rows 80 on)."""
import json
import math
import os
import shutil

import ml_collections
import pytest

from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.reproduction import runner as runner_lib

from conftest import run_command
from test_reliability import assert_one_line_error
from test_reproduction import FakeScripts, options, run

DEEP = '{"a": ' * 100_000 + '1' + '}' * 100_000


def copy_of(workdir, tmp_path, name='w'):
  target = tmp_path / name
  shutil.copytree(workdir, target)
  return target


@pytest.mark.parametrize('depth', [100_000, 900])
def test_a_config_json_nested_deep_is_one_line_naming_it(trained_workdir, tmp_path, depth):
  w = copy_of(trained_workdir, tmp_path)
  (w / 'config.json').write_text('{"a": ' * depth + '1' + '}' * depth)
  result = run_command('sample.py', f'--workdir={w}', f'--output={tmp_path}/s')
  assert_one_line_error(result, f'{w}/config.json')


def test_every_json_reader_turns_deep_nesting_into_a_value_error():
  with pytest.raises(ValueError, match='nested too deeply'):
    workdir_lib.parse_json(DEEP)
  assert workdir_lib.parse_json('{"a": [1]}') == {'a': [1]}


@pytest.mark.parametrize('output_range', [[-math.inf, math.inf], [0, math.nan], [-1e30, 1e30],
                                          [True, 2], [1, 1]])
def test_generator_output_range_must_be_finite_and_ordered(output_range):
  config = ml_collections.ConfigDict(
      {'generator': {'source': 'savedmodel', 'output_range': output_range}})
  with pytest.raises(validation.ConfigError, match='generator.output_range must be two finite'):
    validation.check_generator(config, source='W/config.json')


@pytest.mark.parametrize('edit, message', [
    (dict(result='0.01'), 'its result is a JSON str, not an object'),
    ('deep', 'nested too deeply'),
])
def test_a_stage_record_of_wrong_shape_is_one_line(tmp_path, edit, message):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  run(o, FakeScripts(str(tmp_path)))
  path = tmp_path / 'synthesis_s0' / 'done.json'
  record = json.loads(path.read_text())
  path.write_text(DEEP if edit == 'deep' else json.dumps(dict(record, **edit)))
  with pytest.raises(runner_lib.StageError, match=f'{path} is not a stage record .*{message}'):
    run(o, FakeScripts(str(tmp_path)))


def test_an_export_with_truncated_variables_is_one_line_naming_them(trained_workdir, tmp_path):
  exported = tmp_path / 'export'
  result = run_command('export.py', f'--workdir={trained_workdir}', f'--output={exported}')
  assert result.returncode == 0, result.stderr[-2000:]
  data, = [p for p in (exported / 'variables').iterdir() if '.data-' in p.name]
  with open(data, 'r+b') as f:
    f.truncate(os.path.getsize(data) // 2)
  result = run_command('sample.py', f'--saved_model={exported}', f'--output={tmp_path}/s')
  assert_one_line_error(result, f'--saved_model={exported}', f'{exported}/variables',
                        'unreadable SavedModel')
  assert not (tmp_path / 's').exists()
