"""Where a reproduction's time went (reproduction/timing.py): per stage and seed, shares, and the
ETA table's medians from the stages that ran start to end. Pure Python, made-up records."""
import json
import re
import subprocess
import sys

import pytest

from tf_hat_ebm.reproduction import timing


def stage(kind, *commands, resumed=None):
  exits = [dict(command=f'python experiments/{c}', exit=0, seconds=s) for c, s in commands]
  record = dict(kind=kind, exits=exits, seconds=sum(s for _, s in commands))
  return dict(record, resumed=resumed) if resumed else record


STAGES = {
    'synthesis_s0': stage('synthesis', ('train_synthesis.py --workdir=synthesis_s0', 300),
                          ('evaluate_fid.py --workdir=synthesis_s0', 14),
                          ('evaluate_fid.py --workdir=synthesis_s0 --nobaselines', 12)),
    'synthesis_s1': stage('synthesis', ('train_synthesis.py --workdir=synthesis_s1', 340),
                          ('evaluate_fid.py --workdir=synthesis_s1', 16),
                          ('evaluate_fid.py --workdir=synthesis_s1 --nobaselines', 10)),
    'refinement_s0': stage('refinement', ('train_refinement.py', 600), ('evaluate_fid.py', 200),
                           ('evaluate_fid.py --nobaselines', 20)),
    # begun by an earlier invocation: shown, marked, left out of the medians
    'refinement_s1': stage('refinement', ('train_refinement.py', 90), ('evaluate_fid.py', 210),
                           ('evaluate_fid.py --nobaselines', 22), resumed='seconds unknown'),
    'autoencoder_s0': stage('autoencoder', ('train_autoencoder.py', 89)),
    'window_s0': stage('window', ('evaluate_fid.py --nobaselines', 11),
                       ('evaluate_fid.py --nobaselines', 9)),
    'figures': stage('figures', ('sample.py', 60), ('compare_baselines.py', 40)),
    # arms of a kind: their training is not the kind's price, their scorings are 'fid'
    'nearood_s0': stage('synthesis', ('train_synthesis.py --workdir=nearood_s0', 70),
                        ('evaluate_ood.py --workdir=nearood_s0', 4)),
    'refine_own_s0': stage('refinement', ('train_refinement.py', 500), ('evaluate_fid.py', 13)),
}


def test_the_table_gives_each_stage_per_seed_its_share_and_marks_resumed_ones():
  lines = timing.table(STAGES, [0, 1])
  total = sum(r['seconds'] for r in STAGES.values())
  assert lines[2] == f'| synthesis | 300 + 26 | 340 + 26 | {100 * 692 / total:.1f}% |'
  assert lines[3] == f'| refinement | 600 + 220 | 90 + 232 * | {100 * 1142 / total:.1f}% |'
  assert lines[4].startswith('| autoencoder | 89 |  |') and lines[6].startswith('| figures | 100 |')
  assert f'Stages: 9, {total:,} s in all' in lines[-2] and lines[-1].startswith('* begun by')


def test_the_medians_are_etas_keys_from_stages_run_start_to_end():
  assert timing.medians(STAGES) == dict(
      synthesis=320, refinement=600, autoencoder=89, fid_refinement=200, figures=100,
      fid=12)  # 14, 12, 16, 10, 20 (the refinement's plateau FID), 11, 9, 4, 13
  assert timing.group('coop_bn_s2') == 'coop_bn' and timing.group('figures') == 'figures'


def test_the_command_reads_a_report_and_refuses_anything_else(tmp_path):
  path = tmp_path / 'report.json'
  path.write_text(json.dumps(dict(seeds=[0, 1], stages=STAGES)))
  run = [sys.executable, '-m', 'tf_hat_ebm.reproduction.timing']
  out = subprocess.run(run + [str(path)], capture_output=True, text=True, check=True).stdout
  assert '| synthesis | 300 + 26 |' in out and '"fid_refinement": 200' in out
  path.write_text('[1, 2]')
  bad = subprocess.run(run + [str(path)], capture_output=True, text=True)
  assert bad.returncode == 1 and bad.stderr.startswith('error: ') and bad.stderr.count('\n') == 1


def test_an_untimed_exit_leaves_the_others_paired_with_their_commands():
  record = stage('refinement', ('train_refinement.py', 600), ('evaluate_fid.py', 200))
  record['exits'].insert(1, dict(command='python experiments/sample.py', exit='not run'))
  record['exits'].append(dict(command='python experiments/evaluate_fid.py --nobaselines', exit=0,
                              seconds=20))
  assert timing.medians({'refinement_s0': record}) == dict(
      refinement=600, fid_refinement=200, fid=20)


def edited(**changes):
  stages = json.loads(json.dumps(STAGES))
  for field, value in changes.items():
    name, _, key = field.partition('.')
    if key:
      stages[name][key] = value
    else:
      stages[name] = value
  return stages


@pytest.mark.parametrize('report, field', [
    (dict(seeds=[0, 1], stages=list(STAGES.values())), 'field stages is \\[{'),
    (dict(seeds=[0, 1], stages=edited(figures=None)), 'field stages.figures is null, not a stage'),
    (dict(seeds=[0, 1], stages=edited(**{'figures.seconds': '12'})),
     'field stages.figures.seconds is "12", not a number of seconds'),
    (dict(seeds=[0, 1], stages=edited(**{'figures.seconds': float('nan')})),
     'field stages.figures.seconds is nan, not a number of seconds'),
    (dict(seeds=[0, 1], stages=edited(**{'figures.exits': [dict(command='python x.py',
                                                                seconds='3')]})),
     'field stages.figures.exits.0.seconds is "3"'),
    (dict(seeds=0, stages=STAGES), 'field seeds is 0, not a list of seeds'),
    (dict(seeds=[], stages=STAGES), 'field seeds is \\[\\], not a list of seeds'),
    ('[' * 100000 + ']' * 100000, 'nested too deeply to be read')])
def test_a_malformed_report_is_one_line_naming_the_field(tmp_path, report, field):
  path = tmp_path / 'report.json'
  path.write_text(report if isinstance(report, str) else json.dumps(report))
  with pytest.raises(SystemExit) as exit_info:  # a str: exit status 1, printed on stderr
    timing.main(['timing', str(path)])
  line = exit_info.value.code
  assert isinstance(line, str) and '\n' not in line
  assert re.match(f"error: {re.escape(str(path))} is not a reproduction's report.json \\(.*"
                  f"{field}", line), line
