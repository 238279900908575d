"""Why each digits setting departs from the paper, with the measurement behind it, and what the
digits scale cannot test: the report's settings table and scope section read these.

The text and its measured numbers are data (departures.json beside this file, shipped with the
package): REASONS, (config, field) -> the reason, for every digits setting that differs from the
paper's appendix (the release, Mimicry or DDLS's paper where the appendix is silent; paper.py).
The runs behind each are in docs/experiments.md; docs/digits_settings.md is the same table for
readers.
"""
import json
import os

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'departures.json')
with open(DATA_FILE, encoding='utf-8') as _f:
  _DATA = json.load(_f)
REASONS = {(config, field): text for config, fields in _DATA['reasons'].items()
           for field, text in fields.items()}
# What the digits scale does not test (the report's scope section).
NOT_TESTED = tuple(_DATA['not_tested'])
OOD_NOT_COMPARABLE = _DATA['ood_not_comparable']
# Why the scale runs an arm shorter than its config (stages.Scale.shortened), by the arm's stem.
SHORTENED = _DATA['shortened']
# Why the scale does not run an ablation arm (stages.Scale.dropped), by the arm's stem.
DROPPED = _DATA['dropped']
# Why a digits effect's size differs from the paper's, one line per check (the checks' claims).
EFFECT_REASONS = _DATA['effect_reasons']


def effect_lines(checks):
  """Why each checked effect's size differs from the paper's (the digits scale)."""
  lines = [f'- {c["check"]}: {EFFECT_REASONS[c["check"]]}.' for c in checks
           if c['check'] in EFFECT_REASONS]
  return ['Why an effect\'s size differs from the paper\'s:', ''] + lines + [''] if lines else []


def reason(config, field, value=None):
  """The measured reason a digits setting departs from the paper's, or None. A reason given per
  value (a report of an earlier config is rebuilt with its own run's reason) is looked up by
  `value`: a text as itself, anything else as its JSON."""
  why = REASONS.get((config, field))
  if isinstance(why, dict):
    key = value if isinstance(value, str) else json.dumps(
        list(value) if isinstance(value, tuple) else value)
    return why.get(key)
  return why


def scope_lines(records=None, shortened=None, dropped=()):
  """The report's section on what the digits scale cannot test, which of its runs (stage
  records: name -> record) the scale trained shorter than their config (`shortened`: the scale's
  arm stem -> overrides), and which arms it does not run (`dropped`, absent from the records),
  with why."""
  short = {}
  for name, record in (records or {}).items():
    stem, steps = name.rsplit('_s', 1)[0], (record or {}).get('num_steps')
    planned = (shortened or {}).get(stem, {}).get('training.num_steps')
    if planned and steps == planned and stem in SHORTENED:
      short[stem] = steps
  lines = ['## What this scale does not test', ''] + [f'- {item}.' for item in NOT_TESTED]
  lines += [f'- {stem} runs {steps:,} steps, shorter than its config: {SHORTENED[stem]}.'
            for stem, steps in sorted(short.items())]
  stems = {name.rsplit('_s', 1)[0] for name in records or {}}
  lines += [f'- {stem} is not run: {DROPPED[stem]}.' for stem in dropped if stem not in stems]
  return lines + ['']
