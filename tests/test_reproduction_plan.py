"""The reproduction's plan as typed values: commands render their argv, kinds answer the runner's
questions, and a record is checked against its files without TensorFlow."""
import ast
import os
import subprocess
import sys

from conftest import REPO
from test_layout import package_files
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import stages as stages_lib

# Checks a finished stage's record against its files in a process that must not load TensorFlow:
# the record agrees, then a hand-edited fid.json is refused.
CHECK_WITHOUT_TENSORFLOW = r'''
import json, os, sys
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import plan, records, scheduler, stages
out = sys.argv[1]
o = stages.Options(out=out, seeds=(0,), parts=('synthesis',), size='tiny')
stage, = stages.build(o)
stage.commands, stage.outputs = stage.commands[:2], stage.outputs[:2]  # its end's FID alone
work = os.path.join(out, 'synthesis_s0')
os.makedirs(os.path.join(work, 'checkpoints'))
open(os.path.join(work, 'checkpoints', 'ckpt-2.index'), 'w').close()
with open(os.path.join(work, 'config.json'), 'w') as f:
  json.dump(dict(training=dict(num_steps=2)), f)
evaluation = result_lib.EvalResult(methods={'hat_ebm': 'Hat EBM'}, metrics={'fid': result_lib.FID},
                                   values={'fid': {'hat_ebm': [11.0]}}, data={}, step=2, runs=1)
with open(os.path.join(work, 'fid.json'), 'w') as f:
  json.dump(evaluation.to_json(), f)
disk = records.Disk(out, {})
config = os.path.join(work, 'config.json')
record = disk.with_numbers(stage, dict(step=2, config=dict(
    sha256=records.file_sha256(config), body_sha256=records.config_body_sha256(config))))
assert disk.verify(stage, dict(record), set()) is None
with open(os.path.join(work, 'fid.json'), 'w') as f:
  json.dump(dict(evaluation.to_json(), values={'fid': {'hat_ebm': [1.0]}}), f)
try:
  disk.verify(stage, dict(record), set())
  raise AssertionError('an edited fid.json was accepted')
except records.StageError as e:
  assert 'fid.json changed since' in str(e), e
assert 'tensorflow' not in sys.modules, 'the record checks loaded TensorFlow'
print('checked')
'''


def test_records_are_checked_against_their_files_without_tensorflow(tmp_path):
  result = subprocess.run([sys.executable, '-c', CHECK_WITHOUT_TENSORFLOW, str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.strip() == 'checked'


def test_a_command_renders_its_argv_and_keeps_its_facts_typed():
  cmd = plan.Invocation('experiments/evaluate_fid.py', 'synthesis_s0', ('--runs=2',),
                        checkpoint=6000, checkpoints='checkpoints/archive',
                        output='synthesis_s0/fid_plateau.json', baselines=False)
  assert cmd.argv() == ['python', 'experiments/evaluate_fid.py', '--workdir=synthesis_s0',
                        '--runs=2', '--checkpoint=synthesis_s0/checkpoints/archive/ckpt-6000',
                        '--output=synthesis_s0/fid_plateau.json', '--nobaselines']
  moved = cmd.at(5500)
  assert moved.checkpoint == 5500 and moved.argv()[4].endswith('/checkpoints/archive/ckpt-5500')
  assert cmd.overwriting().argv()[-1] == '--overwrite'
  drawn = plan.Invocation('experiments/sample.py', 'synthesis_s0', ('--overwrite',)).at(9000)
  assert drawn.argv()[-1] == '--checkpoint=9000' and drawn.checkpoint_path() is None
  assert drawn.overwriting() is drawn  # it overwrites already
  assert drawn.console() == 'sample.py' and plan.Invocation('-c').console() is None


def test_each_stage_of_the_digits_plan_is_typed_and_estimated():
  built = stages_lib.build(stages_lib.Options(out='/tmp/plan'))
  assert all(isinstance(s.kind, plan.StageKind) and isinstance(s.result, plan.Result)
             and all(isinstance(c, plan.Invocation) for c in s.commands) for s in built)
  kinds = {s.name: s.kind for s in built}
  assert kinds['synthesis_s0'].trains and kinds['synthesis_s0'].hat_ebm
  assert kinds['sngan_s0'].plateau_baselines and not kinds['sngan_s0'].hat_ebm
  assert kinds['window_s0'].slots and kinds['figures'].draws_scored
  assert kinds['calibration'].tracked and not kinds['calibration'].trains
  # a scored stage's estimate: training, its FID with the baselines' chains, the plateau's FID
  seconds = stages_lib.SCALES['digits'].seconds
  refinement = next(s for s in built if s.name == 'refinement_s0')
  assert stages_lib.estimate(refinement, stages_lib.Options(out='/tmp/plan')) == (
      seconds['refinement'] + seconds['fid_refinement'] + seconds['fid'])


def test_the_console_commands_are_the_command_lines():
  from tf_hat_ebm import cli  # pylint: disable=g-import-not-at-top
  scripts = {c.script: name for name, c in cli.COMMANDS.items()}
  assert {s: scripts[s] for s in plan.CONSOLE} == plan.CONSOLE


def test_no_stage_kind_or_result_is_compared_with_a_name():
  # What a kind does is a field of its type: `stage.kind == 'figures'` elsewhere is a switch.
  def of_a_stage(side):  # stage.kind, stage.result, or their .name; a record's kind in a name
    if isinstance(side, ast.Attribute) and side.attr == 'name':
      side = side.value
    return (isinstance(side, ast.Attribute) and side.attr in ('kind', 'result')) or (
        in_reproduction and isinstance(side, ast.Name) and side.id == 'kind')

  def named(side):  # a string, or a tuple of them
    return isinstance(side, ast.Tuple) or (
        isinstance(side, ast.Constant) and isinstance(side.value, str))
  found = []
  for module, path in package_files().items():
    in_reproduction = module.startswith('reproduction.') and module != 'reproduction.plan'
    with open(path) as f:
      tree = ast.parse(f.read())
    for node in ast.walk(tree):
      sides = [node.left] + node.comparators if isinstance(node, ast.Compare) else []
      if any(map(of_a_stage, sides)) and any(map(named, sides)):
        found.append(f'{module}:{node.lineno}')
  assert not found
  with open(os.path.join(REPO, 'tf_hat_ebm', 'reproduction', 'runner.py')) as f:
    assert 'flag_of' not in f.read()
