"""Where a reproduction's time went, from its report.json: the seconds of each stage (its training
and its evaluations) per seed, each stage's share of the total, and the per-kind medians that the
ETA table (eta.json) holds.

  python -m tf_hat_ebm.reproduction.timing docs/reproduction/digits/report.json

A stage that an earlier invocation began is marked: its seconds add up its attempts (runner.py),
or are only the last run's ('seconds unknown'); such stages are left out of the medians, as the
runner leaves them out of its pace. A report is checked whole before anything is computed: a
malformed field is one line naming it. Pure Python.
"""
import json
import math
import statistics
import sys

from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import report as report_lib

TRAINED = ('synthesis', 'sngan', 'refinement', 'autoencoder', 'retrofit')
# An evaluation with the baselines' chains (DDLS, the decoder) is priced on its own (stages.py).
PRICED_ALONE = ('refinement', 'retrofit')


def group(name):
  """A stage's row: its name without the seed ('refinement_s1' -> 'refinement')."""
  base, _, seed = name.rpartition('_s')
  return base if base and seed.isdigit() else name


def _script(command):
  return command.split()[1].rsplit('/', 1)[-1] if len(command.split()) > 1 else ''


def split(record):
  """(the training's exit or None, [the other exits]) of a stage's record, timed exits only."""
  exits = [e for e in record.get('exits', ()) if isinstance(e.get('seconds'), (int, float))]
  if record.get('kind') in TRAINED and exits and _script(exits[0]['command']).startswith('train_'):
    return exits[0], exits[1:]
  return None, exits


def medians(stages):
  """{eta.json key: median seconds} over the stages that ran start to end in one invocation:
  each trained kind's training, 'fid' (any scoring run without the baselines' chains),
  'fid_refinement' / 'fid_retrofit' (their stage's first scoring, with them), and the seconds
  of the other stages (ood, figures, calibration, release) whole. A kind's price is its own
  stages' (synthesis_s0), not its arms' (nearood_s0 is shorter, refine_own_s0 has no DDLS)."""
  found = {}
  for name, record in stages.items():
    if record.get('resumed'):
      continue
    kind = record.get('kind')
    train, evals = split(record)
    own = group(name) == kind
    if train is not None:
      if own:
        found.setdefault(kind, []).append(train['seconds'])
      for e in evals:
        priced = (own and kind in PRICED_ALONE and '--nobaselines' not in e['command']
                  and _script(e['command']) == 'evaluate_fid.py')
        found.setdefault(f'fid_{kind}' if priced else 'fid', []).append(e['seconds'])
    elif kind in plan.KINDS and plan.KINDS[kind].slots:  # scorings of a run's kept checkpoints
      found.setdefault('fid', []).extend(e['seconds'] for e in evals)
    elif kind:
      found.setdefault(kind, []).append(record.get('seconds', sum(e['seconds'] for e in evals)))
  return {k: round(statistics.median(v)) for k, v in sorted(found.items()) if v}


def table(stages, seeds):
  """Markdown lines: one row per stage (its seeds' 'training + evaluation' seconds) and its share
  of the stages' total; resumed stages marked."""
  rows, total = {}, sum(r.get('seconds', 0) for r in stages.values())
  for name, record in stages.items():
    rows.setdefault(group(name), {})[name] = record
  lines = ['| stage | ' + ' | '.join(f'seed {s}' for s in seeds) + ' | share of the total |',
           '|---|' + '---|' * len(seeds) + '---|']
  marked = False
  for row, records in rows.items():
    cells = []
    for seed in seeds:
      record = records.get(f'{row}_s{seed}') or (records.get(row) if seed == seeds[0] else None)
      if record is None:
        cells.append('')
        continue
      train, evals = split(record)
      spent = sum(e['seconds'] for e in evals)
      cell = (f'{train["seconds"]:.0f}' + (f' + {spent:.0f}' if evals else '') if train
              else f'{record.get("seconds", spent):.0f}')
      if record.get('resumed'):
        cell, marked = cell + ' *', True
      cells.append(cell)
    share = sum(r.get('seconds', 0) for r in records.values()) / total if total else 0
    lines.append(f'| {row} | ' + ' | '.join(cells) + f' | {100 * share:.1f}% |')
  lines += ['', f'Stages: {len(stages)}, {total:,.0f} s in all ({report_lib.hms(total)}).']
  if marked:
    lines.append('* begun by an earlier invocation: the seconds add up its attempts, an '
                 'interrupted one ending at its log\'s last write ("seconds unknown" in its '
                 'record: the last run\'s only).')
  return lines


def _shown(value):
  text = json.dumps(value) if not isinstance(value, float) else repr(value)
  return text if len(text) <= 40 else text[:37] + '...'


def _check_seconds(record, where):
  """A record's `seconds`: absent or null (untimed), else a finite number >= 0."""
  value = record.get('seconds')
  if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                            or not math.isfinite(value) or value < 0):
    raise ValueError(f'field {where}.seconds is {_shown(value)}, not a number of seconds')


def check(report):
  """The report's (stages, seeds), each field that timing reads checked; a ValueError naming the
  first malformed one."""
  if not isinstance(report, dict):
    raise ValueError(f'it is {_shown(report)}, not a JSON object')
  stages, seeds = report.get('stages'), report.get('seeds')
  if not isinstance(stages, dict):
    raise ValueError(f'field stages is {_shown(stages)}, not an object of stage records')
  if not (isinstance(seeds, list) and seeds and all(
      isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
    raise ValueError(f'field seeds is {_shown(seeds)}, not a list of seeds')
  for name, record in stages.items():
    where = f'stages.{name}'
    if not isinstance(record, dict):
      raise ValueError(f'field {where} is {_shown(record)}, not a stage record')
    _check_seconds(record, where)
    if not isinstance(record.get('kind', ''), (str, type(None))):
      raise ValueError(f'field {where}.kind is {_shown(record["kind"])}, not a stage kind')
    exits = record.get('exits', [])
    if not isinstance(exits, list):
      raise ValueError(f'field {where}.exits is {_shown(exits)}, not a list of commands')
    for i, e in enumerate(exits):
      if not isinstance(e, dict) or not isinstance(e.get('command'), str):
        raise ValueError(f'field {where}.exits.{i} is {_shown(e)}, not a command\'s exit')
      _check_seconds(e, f'{where}.exits.{i}')
  return stages, seeds


def main(argv):
  if len(argv) != 2:
    sys.exit('usage: python -m tf_hat_ebm.reproduction.timing <report.json>')
  try:
    with open(argv[1]) as f:
      stages, seeds = check(json.load(f))
  except RecursionError:
    sys.exit(f'error: {argv[1]} is not a reproduction\'s report.json (nested too deeply to be '
             'read)')
  except (OSError, ValueError) as e:
    sys.exit(f'error: {argv[1]} is not a reproduction\'s report.json ({e})')
  print('\n'.join(table(stages, seeds)))
  print('\nMedians of the stages run start to end (eta.json\'s keys):')
  print(json.dumps(medians(stages)))


if __name__ == '__main__':
  main(sys.argv)
