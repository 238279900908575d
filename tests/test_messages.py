"""Hostile or damaged input is one line naming the file or field, never a traceback; bounds a user
can wait for (docs/reliability.md, rows 80 on)."""
import json
import math
import os
import shutil

import ml_collections
import pytest
import tensorflow as tf

from tf_hat_ebm import export
from tf_hat_ebm import outputs
from tf_hat_ebm import samples as samples_lib
from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.reproduction import pipeline
from tf_hat_ebm.reproduction import runner as runner_lib
from tf_hat_ebm.reproduction import stages as stages_lib

from conftest import run_command
from test_reliability import assert_one_line_error, owned
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


def test_an_export_with_truncated_variables_is_one_line_naming_them(exported_workdir, tmp_path):
  exported = tmp_path / 'export'
  shutil.copytree(exported_workdir[0], exported)
  data, = [p for p in (exported / 'variables').iterdir() if '.data-' in p.name]
  with open(data, 'r+b') as f:
    f.truncate(os.path.getsize(data) // 2)
  result = run_command('sample.py', f'--saved_model={exported}', f'--output={tmp_path}/s')
  assert_one_line_error(result, f'--saved_model={exported}', f'{exported}/variables',
                        'unreadable SavedModel')
  assert not (tmp_path / 's').exists()


# ---- bounds a user can wait for, with progress ------------------------------------------------
def test_chain_steps_are_bounded_to_minutes_not_hours():
  for steps, ok in ((validation.MAX_CHAIN_STEPS, True), (validation.MAX_CHAIN_STEPS + 1, False)):
    config = ml_collections.ConfigDict({'sampling': {'steps': steps}})
    if ok:
      validation.check_chains(config)
    else:
      with pytest.raises(validation.ConfigError, match='sampling.steps must be an integer'):
        validation.check_chains(config)
  assert validation.MAX_CHAIN_STEPS <= 10_000


@pytest.mark.parametrize('flag, name', [('--path_chains=101', '--path_chains'),
                                        ('--path_steps=' + ','.join(map(str, range(51))),
                                         '--path_steps')])
def test_path_figure_size_is_bounded_before_any_work(trained_workdir, tmp_path, flag, name):
  result = run_command('sample.py', f'--workdir={trained_workdir}', f'--output={tmp_path}/s', flag)
  assert_one_line_error(result, name)
  assert not (tmp_path / 's').exists()


def test_sample_says_what_its_chains_are_before_they_run(trained_workdir, tmp_path):
  result = run_command('sample.py', f'--workdir={trained_workdir}', f'--output={tmp_path}/s',
                       '--num_samples=3', '--batch_size=2', '--path_chains=2')
  assert result.returncode == 0, result.stderr[-2000:]
  lines = result.stdout.splitlines()
  first = lines.index('drawing 3 samples: 2 batches of up to 2 chains of 2 Langevin steps '
                      '(sampling.steps); a line per batch')
  path = [i for i, line in enumerate(lines)
          if line.startswith('the Langevin path figure: 2 more chains of 2 steps')]
  assert path and first < path[0], lines


# ---- messages that say what to do -------------------------------------------------------------
@pytest.mark.parametrize('kill_at', range(6))  # the journal's, 2 renames aside, 3 in
def test_ctrl_c_amid_the_swap_puts_the_old_output_back_at_once_and_says_so(
    tmp_path, monkeypatch, kill_at):
  owned(tmp_path, ['a.png', 'tensorboard/'], 'old')
  real, calls = os.replace, []

  def once(path, *args):
    calls.append(path)
    if len(calls) == kill_at + 1:
      raise KeyboardInterrupt
    real(path, *args)

  monkeypatch.setattr(os, 'replace', once)
  with pytest.raises(KeyboardInterrupt, match=f'into --output={tmp_path}; it is as it was before '
                     'this run'):
    owned(tmp_path, ['a.png', 'b.png', 'tensorboard/'], 'new')
  assert sorted(os.listdir(tmp_path)) == ['.sample.manifest.json', 'a.png', 'tensorboard']
  assert (tmp_path / 'a.png').read_text() == 'old'


def test_ctrl_c_amid_the_swap_that_cannot_roll_back_says_where_the_old_output_is(
    tmp_path, monkeypatch):
  owned(tmp_path, ['a.png'], 'old')
  real = os.replace

  def dead(path, *args):
    if str(args[0]).endswith('.commit.json'):  # the journal is written
      return real(path, *args)
    if '-old-' in str(args[0]):  # a.png moved aside, then every rename fails
      real(path, *args)
      monkeypatch.setattr(os, 'replace', lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    raise KeyboardInterrupt

  monkeypatch.setattr(os, 'replace', dead)
  with pytest.raises(KeyboardInterrupt) as info:
    owned(tmp_path, ['a.png'], 'new')
  aside, = [n for n in os.listdir(tmp_path) if n.startswith('.sample-old-')]
  assert f'the earlier output waits in {tmp_path / aside}' in str(info.value)
  assert 'the same command with --overwrite puts it back' in str(info.value)
  monkeypatch.setattr(os, 'replace', real)
  with outputs.OwnedOutput(str(tmp_path), 'sample', True, 'output'):
    pass  # what the message promises: --overwrite puts it back
  assert (tmp_path / 'a.png').read_text() == 'old'


def test_an_export_interrupted_mid_swap_says_so_instead_of_missing(tmp_path):
  (tmp_path / '.export.commit.json').write_text('{}')
  with pytest.raises(ValueError, match='interrupted while it replaced the SavedModel.*--overwrite '
                     'puts the earlier one back'):
    export.load_saved_model(str(tmp_path), 'saved_model')


def test_a_dangling_symlink_as_output_is_called_one(tmp_path):
  os.symlink(tmp_path / 'gone', tmp_path / 'out')
  with pytest.raises(ValueError, match=f'--out={tmp_path}/out is a dangling symlink'):
    outputs.check_output_dir(str(tmp_path / 'out'), True, 'out')
  with pytest.raises(ValueError, match=f'--out={tmp_path}/out is a dangling symlink'):
    pipeline.claim(str(tmp_path / 'out'), [], True)


def test_nan_in_a_record_names_the_stage_and_field_and_writes_no_report(tmp_path):
  o = options(tmp_path, seeds=(0,), parts=('synthesis',), jobs='1')
  records = run(o, FakeScripts(str(tmp_path)))
  before = {n: (tmp_path / n).read_bytes() for n in ('report.md', 'report.json')
            if (tmp_path / n).exists()}
  # A NaN read from a result file (json reads one; the project's scripts never write it).
  nan = json.loads(json.dumps(records))
  nan['synthesis_s0']['result']['values']['fid']['hat_ebm'][0] = float('nan')
  with pytest.raises(ValueError, match=(
      f'stage synthesis_s0: field result.values.fid.hat_ebm.0 of its result '
      f'\\({tmp_path}/synthesis_s0/fid.json, {tmp_path}/synthesis_s0/fid_plateau.json\\) is not '
      'a finite number; delete that file to evaluate the stage again')):
    pipeline.write_report(nan, o, stages_lib.build(o))
  # One edited into a record.
  path = tmp_path / 'synthesis_s0' / 'done.json'
  nan = json.loads(json.dumps(records))
  nan['synthesis_s0']['seconds'] = float('nan')
  with pytest.raises(ValueError, match=f'{path}: field seconds is not a finite number; delete '
                     'that file to evaluate stage synthesis_s0 again'):
    pipeline.write_report(nan, o, stages_lib.build(o))
  assert {n: (tmp_path / n).read_bytes() for n in before} == before


def test_out_of_memory_names_the_flags_that_lower_it(trained_workdir, tmp_path, monkeypatch):
  def oom(*args, **kwargs):
    raise tf.errors.ResourceExhaustedError(None, None, 'OOM when allocating tensor [250,3]')
  monkeypatch.setattr(samples_lib, 'write_samples', oom)
  result = run_command('sample.py', f'--workdir={trained_workdir}', f'--output={tmp_path}/s')
  line = assert_one_line_error(result, 'out of memory: lower --batch_size or --num_samples')
  assert 'free some' not in line


def test_a_wrong_shape_in_config_json_is_blamed_on_config_json(trained_workdir, tmp_path):
  w = copy_of(trained_workdir, tmp_path)
  config = json.loads((w / 'config.json').read_text())
  config['model']['hat_width'] *= 2
  (w / 'config.json').write_text(json.dumps(config))
  result = run_command('sample.py', f'--workdir={w}', f'--output={tmp_path}/s')
  line = assert_one_line_error(result, f'The networks {w}/config.json describes have other shapes')
  assert '--checkpoint' not in line and 'truncated' not in line
