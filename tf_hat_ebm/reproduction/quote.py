"""The committed reproduction's numbers as the docs quote them: one source, report.json.

docs/results.md and docs/reproduce.md hold a block between BEGIN and END that is
`block(report)` for the committed docs/reproduction/digits/report.json, and
docs/digits_settings.md its expected results and cost (expected_block); tests/test_docs.py fails
when a page's block differs, and `python -m tf_hat_ebm.reproduction.quote` rewrites the blocks
after a new report is committed: every page is built in memory and checked first, and all are
written atomically or none (a failure leaves every page byte for byte as it was). Pure Python.
"""
import json
import os
import sys

from tf_hat_ebm import errors
from tf_hat_ebm import files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import tables

BEGIN = '<!-- numbers of docs/reproduction/digits/report.json (quote.py) -->'
END = '<!-- end of the numbers of report.json -->'
REPORT = os.path.join('docs', 'reproduction', 'digits', 'report.json')
# The README links results.md for the numbers: its first page stays short.
PAGES = (os.path.join('docs', 'results.md'), os.path.join('docs', 'reproduce.md'))

# (row label, report table, row label there, number of digits)
ROWS = (
    ('Table 2, synthesis: Hat EBM X = G(Z) + Y', 'synthesis', 'Hat EBM X = G(Z) + Y', 2),
    ('its generator alone G(Z)', 'synthesis', 'its generator alone G(Z)', 2),
    ('Table 1, refinement: SN-GAN G(Z0)', 'refinement', 'SN-GAN G(Z0)', 2),
    ('DDLS', 'refinement', 'DDLS', 2),
    ('Hat EBM X = G(Z_K) + Y_K', 'refinement', 'Hat EBM X = G(Z_K) + Y_K', 2),
    ('retrofit: decoder of N(0, I)', 'retrofit', 'decoder of Z ~ N(0, I)', 2),
    ('retrofit: Hat EBM', 'retrofit', 'Hat EBM X = G(Z_K) + Y_K', 2),
    ('current samples (= cooperative, no batch norm)', 'ablations', 'current samples', 2),
    ('cooperative learning, batch norm', 'ablations', 'cooperative learning', 2),
    ('refinement without the residual Y', 'ablations', 'refinement without the residual', 2),
    ('Table 3, AUROC: near-OOD (a model of digits 0-4 scoring 5-9)', 'ood', 'other_digits', 3),
)


def _row(report, table, start):
  for row in report['tables'].get(table, ()):
    if row['label'].startswith(start):
      return row
  raise KeyError(f'{REPORT} has no {table} row starting {start!r}')


def _number(value, digits):
  return '–' if value is None else f'{value:.{digits}f}'


def _seeds(row, digits):
  return ' / '.join(_number(v, digits) for v in row['per_seed'])


def _test_split(report):
  """The FID of the whole test split against the train split (every FID stage records it)."""
  found = (result_lib.from_record(r.get('result')) for r in report['stages'].values())
  values = {round(e.data['fid'], 2) for e in found if e is not None and 'fid' in e.data}
  return ', '.join(f'{v:.2f}' for v in sorted(values)) or '–'


def _floor(report):
  """The FID's floor at the report's N as its calibration section has it (or where to find it)."""
  cal = (report.get('calibration') or {}).get('calibration')
  if not cal:
    return 'the floor at N = 1,000 is in the report\'s calibration section'
  floor, n = cal['floor'], cal['num']
  pool = cal['test_size']
  how = {'extrapolated': f'extrapolated from subsamples of the {pool} without replacement, the '
                         'fit\'s standard error',
         'measured': 'drawn without replacement'}
  how = how.get(floor.get('method'), f'drawn with replacement from the {pool}')
  if floor.get('total_std') is not None:
    how += f'; ± {floor["total_std"]:.2f} with the pool\'s own variance (a jackknife of the pool)'
  elif floor.get('method') == 'extrapolated':
    how += ', without the pool\'s own variance'
  return (f'the floor, {n:,} held-out digits, scores {floor["mean"]:.2f} ± {floor["std"]:.2f} '
          f'({how}; the report\'s calibration section)')


def block(report):
  """The lines the docs quote: each row's mean ± sd over seeds and per seed, and the checks."""
  seeds = ', '.join(map(str, report['seeds']))
  lines = [BEGIN, '', f'Seeds {seeds}; FID of 2 x 1,000 samples per seed (the digits '
           'classifier\'s features), mean ± sample std over seeds. The whole test split (297 '
           f'digits) scores {_test_split(report)} against the train split; {_floor(report)}.',
           '',
           '| | mean ± sd over seeds | per seed |', '|---|---|---|']
  for label, table, start, digits in ROWS:
    row = _row(report, table, start)
    spread = '' if row['std'] is None else f' ± {row["std"]:.{digits}f}'
    lines.append(f'| {label} | {_number(row["mean"], digits)}{spread} | '
                 f'{_seeds(row, digits)} |')
  lines += ['', '| effect the paper reports | difference (worse - better) | 95% interval | '
            'Holm p | relative | verdict |', '|---|---|---|---|---|---|']
  for check in report['checks']:
    holm = check.get('p_holm')
    verdict = check['verdict'] + (f'; {check["bound"]}' if check.get('bound') else '')
    if tables.holds_alone(check):
      verdict += '; not after Holm\'s correction'
    lines.append(f'| {check["check"]} | {_difference(check)} | {_interval(check)} | '
                 f'{_number(holm, 3)} | {check.get("relative", "–")} | {verdict} |')
  return lines + _plateau(report.get('plateau')) + ['', END]


def _difference(check):
  """A check's number: the FID difference, or a stability check's scatter ratio."""
  if check.get('kind') == 'scatter':
    return '–' if check['ratio'] is None else f'{check["ratio"]:.0f}x the scatter'
  return _number(check['mean'], 2)


def _interval(check):
  if check['low'] is None:
    return '–'
  if check.get('kind') == 'scatter':
    return f'[{check["ratio_low"]:.1f}x, {check["ratio_high"]:.0f}x]'
  return f'[{check["low"]:+.2f}, {check["high"]:+.2f}]'


def _plateau(arms):
  """Each arm's steps and the plateau rule's verdict (reports that predate the rule: none)."""
  if not arms:
    return []
  lines = ['', '| arm | steps trained | checkpoints in the last third | FID at 2/3 -> end, means '
           'over seeds | change over the third [95% interval] | scatter / eval sd | converged |',
           '|---|---|---|---|---|---|---|']
  for a in arms:
    change = '–' if a['difference'] is None else f'{a["difference"]:+.2f}'
    if a.get('low') is not None:
      change += f' [{a["low"]:+.2f}, {a["high"]:+.2f}]'
    steps = ', '.join(f'{s:,}' for s in a['steps']) or '–'
    lines.append(f'| {a["arm"]} | {steps} | {a.get("checkpoints", "–")} | '
                 f'{_number(a["mid"], 2)} -> {_number(a["end"], 2)} | {change} | '
                 f'{_number(a.get("scatter"), 2)} / {_number(a.get("eval_sd"), 2)} | '
                 f'{a["verdict"]} |')
  return lines


def quoted(text, begin=BEGIN, end=END):
  """The block in a page's text (its lines from `begin` to `end`), or None."""
  lines = text.splitlines()
  if begin not in lines or end not in lines:
    return None
  return lines[lines.index(begin):lines.index(end) + 1]


def check_markers(text, page, begin=BEGIN, end=END):
  """A page holds `begin` once and `end` once after it, else a ValueError naming the page."""
  lines = text.splitlines()
  counts = {marker: lines.count(marker) for marker in (begin, end)}
  if counts != {begin: 1, end: 1}:
    raise ValueError(f'{page} holds its BEGIN marker {counts[begin]} and its END marker '
                     f'{counts[end]} times, not once each ({begin} ... {end})')
  if lines.index(end) < lines.index(begin):
    raise ValueError(f'{page}: its END marker ({end}) is above its BEGIN marker: put it back '
                     'below the block')


def rewrite(text, report, page='the page'):
  """The page's text with its block replaced by what BLOCKS builds for it (block(report) unless
  named there), checked: its markers in order, and the new text quoting exactly that block."""
  begin, end, build = BLOCKS.get(page, (BEGIN, END, block))
  check_markers(text, page, begin, end)
  lines = text.splitlines()
  start, stop = lines.index(begin), lines.index(end)
  quote = build(report)
  new = '\n'.join(lines[:start] + quote + lines[stop + 1:]) + '\n'
  if quoted(new, begin, end) != quote:  # never a page that does not hold exactly the quote
    raise ValueError(f'{page}: the rewritten page does not hold the quote as built')
  return new


# docs/digits_settings.md's expected results and cost: each config's FIDs over the committed
# report's seeds, and its stage's seconds. (config, [(what, table, row start)], stage prefix)
EXPECTED_BEGIN = '<!-- expected results of docs/reproduction/digits/report.json (quote.py) -->'
EXPECTED_END = '<!-- end of the expected results of report.json -->'
SETTINGS_PAGE = os.path.join('docs', 'digits_settings.md')
EXPECTED = (
    ('digits_synth.py', (('X = G(Z) + Y', 'synthesis', 'Hat EBM'),
                         ('its generator alone G(Z)', 'synthesis', 'its generator')), 'synthesis'),
    ('digits_sngan.py', (('SN-GAN', 'refinement', 'retrained SN-GAN'),), 'sngan'),
    ('digits_refine.py', (('Hat EBM', 'refinement', 'Hat EBM'), ('DDLS', 'refinement', 'DDLS'),
                          ('its SN-GAN G(Z0)', 'refinement', 'SN-GAN G(Z0)')), 'refinement'),
    ('digits_autoencoder.py', (), 'autoencoder'),
    ('digits_retrofit.py', (('Hat EBM', 'retrofit', 'Hat EBM'),
                            ('decoder of N(0, I)', 'retrofit', 'decoder')), 'retrofit'),
)


def _range(values, digits=2):
  values = [v for v in values if v is not None]
  if not values:
    return '–'
  low, high = min(values), max(values)
  return f'{low:,.{digits}f}' if low == high else f'{low:,.{digits}f}-{high:,.{digits}f}'


def expected_block(report):
  """The lines docs/digits_settings.md quotes: per config the range over seeds of each FID row
  and of its stages' steps and seconds (training, its FIDs, every attempt)."""
  seeds = report['seeds']
  stages = report['stages']
  lines = [EXPECTED_BEGIN, '', f'The committed reproduction (seeds {", ".join(map(str, seeds))}, '
           'FID of 2 x 1,000 samples, lowest-highest over the seeds; a stage\'s seconds are its '
           'training and FIDs, two stages at a time on 2 cores):', '',
           '| config | FID over seeds | steps | stage seconds over seeds |', '|---|---|---|---|']
  for config, rows, prefix in EXPECTED:
    fids = '; '.join(f'{what} {_range(_row(report, table, start)["per_seed"])}'
                     for what, table, start in rows) or 'not scored'
    records = [stages.get(f'{prefix}_s{seed}', {}) for seed in seeds]
    steps = _range([r.get('step') for r in records], 0)
    seconds = _range([r.get('seconds') for r in records], 0)
    lines.append(f'| `{config}` | {fids} | {steps} | {seconds} |')
  return lines + ['', EXPECTED_END]


BLOCKS = {SETTINGS_PAGE: (EXPECTED_BEGIN, EXPECTED_END, expected_block)}
ALL_PAGES = PAGES + tuple(BLOCKS)  # every page the quoter rewrites


def read_report(root):
  path = os.path.join(root, REPORT)
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError, RecursionError) as e:
    raise ValueError(f'{REPORT} is unreadable ({errors.one_line(e)})') from None


def build_pages(root='.'):
  """{path: new text} of every page, each built in memory and checked; a ValueError naming the
  page or the report's missing row before anything is written."""
  report = read_report(root)
  pages = {}
  for page in ALL_PAGES:
    path = os.path.join(root, page)
    try:
      with open(path) as f:
        text = f.read()
    except OSError as e:
      raise ValueError(f'cannot read {page}: {e.strerror or e}') from None
    try:
      pages[path] = rewrite(text, report, page)
    except KeyError as e:  # _row's: the report lacks a row the docs quote
      raise ValueError(f'{e.args[0]} (a row the docs quote)') from None
    except (AttributeError, TypeError, ValueError, IndexError) as e:
      if isinstance(e, ValueError) and page in str(e):
        raise
      raise ValueError(f'{REPORT} is not a report the docs can quote ({errors.one_line(e)})'
                       ) from None
  return pages


def main(root='.'):
  """Rewrites every page's block from the committed report.json: all pages or none."""
  try:
    pages = build_pages(root)
    files.write_all_atomic(pages)
  except ValueError as e:
    sys.exit(f'error: {e}; no page written')
  except OSError as e:
    sys.exit(f'error: {files.cannot_write(e.filename or root, e)}; every page left as it was')
  for page in ALL_PAGES:
    print(f'{page}: the numbers of {REPORT}')


if __name__ == '__main__':
  main()
