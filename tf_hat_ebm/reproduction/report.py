"""The reproduction's report from the stages' records: the paper's tables, checks, calibration,
settings, figures and commands, as markdown and a JSON-able dict.

Pure functions: records (the stages' done.json contents) in, (markdown, data) out. The tables
and their statistics are tables.py's and statistics.py's (mean ± sample std over seeds, the
evaluation std over FID runs, paired 95% intervals); the paper's numbers are paper.py's.
"""
import json
import os
import sys

from tf_hat_ebm import errors
from tf_hat_ebm import files
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import departures
from tf_hat_ebm.reproduction import stages as stages_lib
from tf_hat_ebm.reproduction import tables

# Figures by what they show, in the report's order: (heading, test on the file name).
FIGURE_SECTIONS = (
    ('Training curves of each stage (energies, gradient norms and guard events: a drifting '
     'energy difference or a growing hat gradient is a run not yet at rest, whatever its FID)',
     lambda f: f.endswith('_training_curves.png')),
    ('Baselines beside the Hat EBM, from the same latents Z0 (SN-GAN / decoder of N(0, I), '
     'DDLS, Hat EBM)', lambda f: '_baselines_' in f),
    ('The historical generator update: each arm\'s training grid at one step',
     lambda f: f.startswith('historical_generator_update')),
    ('OOD: the energy H(x) of test digits and of each OOD set',
     lambda f: f.endswith('_ood_energies.png')),
    ('Samples and Langevin paths (the first seed\'s models)', lambda f: True),
)


def hms(seconds):
  seconds = int(max(seconds, 0))
  return f'{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


def fid_flags(options):
  """(samples per FID run, feature network) the scale's FID stages use."""
  sized = stages_lib.EVAL_SIZES.get(options.size, {})
  num = sized.get('fid', stages_lib.SCALES[options.scale].fid).num_samples
  if options.scale == 'paper':
    return num or 50_000, 'Inception pool_3 (TF-GAN)'
  return num or 5_000, "the digits classifier's features (tf_hat_ebm/evaluation/features.py)"


def precision_text(options, records):
  """The training precision asked for, and the one the runs computed in (run_info.json)."""
  asked = options.training_precision()
  said = asked or "each config's own (perf.precision)"
  if asked == 'float32' and not options.precision:
    said += ', pinned for the paper scale'
  computed = sorted({r['computed_in'] for r in records.values() if r.get('computed_in')})
  return said + (f'; the runs computed in {", ".join(computed)}' if computed else '')


def header(options, records):
  num, net = fid_flags(options)
  lines = tables.header(options.scale, list(options.seeds), precision_text(options, records),
                        num, net)
  if options.size:
    lines[0] = lines[0][:-1] + f', config size {options.size})'
  return lines


def near_ood_models(options):
  """Table 3's models: the synthesis model, and the model of some digits (near-OOD)."""
  classes = stages_lib.SCALES[options.scale].near_ood_classes
  near = (('nearood', f'model of digits {classes[0]}-{classes[-1]}'),) if classes else ()
  return (('ood', ''),) + near


def synthesis_configs(options):
  """Table 2's rows: [(stage prefix, config name)], the main synthesis first."""
  scale = stages_lib.SCALES[options.scale]
  return [('synthesis', scale.configs['synthesis'])] + [
      (f'synthesis_{data}', config) for data, config in scale.more_synthesis]


def paper_tables(records, options, previous=()):
  """[(key, (lines, rows))] of the paper's tables, the retrofit, ablations and checks (each
  check's verdict against those of `previous` reports: report.json dicts)."""
  scale, seeds = options.scale, list(options.seeds)
  return [
      ('refinement', tables.refinement_table(records, scale, seeds,
                                             published_sngan=bool(options.release_sngan))),
      ('synthesis', tables.synthesis_table(records, scale, seeds, synthesis_configs(options))),
      ('ood', tables.ood_table(records, scale, seeds, near_ood_models(options))),
      ('retrofit', tables.retrofit_table(records, scale, seeds)),
      ('ablations', tables.ablation_table(records, seeds)),
      ('checks', tables.checks_table(records, seeds, previous)),
      ('plateau', tables.plateau_table(records, seeds))]


# The models the calibration places against the floor: (label, stage prefix, FID row).
PLACED = (('synthesis', 'synthesis', 'hat_ebm'), ('its G(Z)', 'synthesis', 'generator'),
          ('SN-GAN', 'refinement', 'generator'), ('DDLS', 'refinement', 'ddls'),
          ('refinement', 'refinement', 'hat_ebm'), ('retrofit', 'retrofit', 'hat_ebm'),
          ('current', 'current', 'hat_ebm'), ('coop_bn', 'coop_bn', 'hat_ebm'),
          ('noresidual', 'noresidual', 'hat_ebm'),
          ("Hat EBM over the synthesis G", tables.OWN_G, 'hat_ebm'),
          ("synthesis at the paper's time", 'paper_time', 'hat_ebm'))


def calibration_lines(records, seeds=()):
  """The calibration stage's section, or a line saying it did not run."""
  result = (records.get('calibration') or {}).get('result')
  if not result:
    return ['## How far this FID can go', '', 'The calibration stage did not run (it runs with '
            'the figures at digits scale).', ''], None
  fids = []
  for label, prefix, key in PLACED:
    m = tables.Measured(records, prefix, key, list(seeds))
    fids.append((label, m.mean, m.summary['eval_std']))
  lines = tables.calibration_section(result['calibration'], result.get('coverage'), fids)
  if result.get('missing'):
    lines += [f'No samples to check of: {", ".join(result["missing"])}.', '']
  return lines, result


def figure_lines(figures):
  """The figures under headings by what they show; each file once."""
  lines, left = ['## Figures', ''], list(figures)
  for heading, shows in FIGURE_SECTIONS:
    chosen = [f for f in left if shows(f)]
    left = [f for f in left if f not in chosen]
    if chosen:
      lines += [f'### {heading}', ''] + [f'![{f}](figures/{f})' for f in chosen] + ['']
  return lines if figures else lines + ['No figures (the figures part did not run).', '']


def command_lines(records):
  lines = ['## Commands (run in the output directory; `experiments/` is the project\'s)', '']
  for name, rec in records.items():
    state = ', stopped by the guard' if rec.get('failed') else ''
    if rec.get('resumed') == 'seconds unknown':
      state += ', resumed: the last run\'s seconds only'
    lines.append(f'- `{name}` ({hms(rec.get("seconds", 0))}{state}):')
    lines.extend(f'  - `{c}`' for c in rec.get('commands', ()))
  return lines + ['']


def build_report(records, options, figures=(), configs=None, previous=()):
  """(markdown, JSON-able dict) of the records {stage: done record} of `options` (Options).

  figures: the file names in the report's figures/ directory; configs: {config name: resolved
  config} of the runs, for the settings table against the paper's appendix; previous: earlier
  report.json dicts (with their 'path'), whose verdicts make a flipping check borderline."""
  result_lib.check_comparable(
      (stage, e) for stage, e in ((s, result_lib.from_record((r or {}).get('result')))
                                  for s, r in records.items()) if e is not None)
  lines = header(options, records)
  data = dict(scale=options.scale, size=options.size, seeds=list(options.seeds),
              precision=options.training_precision() or 'config',
              sngan='published' if options.release_sngan else 'retrained', tables={})
  for key, (table, rows) in paper_tables(records, options, previous):
    lines += table
    if key == 'checks' and options.scale != 'paper':
      lines += departures.effect_lines(rows)
    if key in ('checks', 'plateau'):
      data[key] = rows
    else:
      data['tables'][key] = rows
  calibration, data['calibration'] = calibration_lines(records, options.seeds)
  settings, data['settings'] = tables.settings_table(configs or {}, options.scale)
  scale = stages_lib.SCALES[options.scale]
  dropped = scale.dropped if 'ablations' in options.parts else ()
  scope = (departures.scope_lines(records, scale.shortened, dropped)
           if options.scale != 'paper' else [])
  data['not_tested'] = list(departures.NOT_TESTED) if scope else []
  lines += calibration + scope + (settings if configs else []) + figure_lines(figures)
  lines += command_lines(records)
  data.update(figures=list(figures), stages=records)
  return '\n'.join(lines), data


def rebuild(data, previous=()):
  """(markdown, data) of a report.json rebuilt by today's tables and rules from what it recorded:
  its stages' records, its figures, and its runs' settings (the settings table's 'ours')."""
  options = stages_lib.Options(
      out='.', scale=data['scale'], seeds=tuple(data['seeds']), size=data.get('size'),
      precision=None if data.get('precision') == 'config' else data.get('precision'),
      release_sngan='published' if data.get('sngan') == 'published' else None)
  configs = {}
  for row in data.get('settings', ()):
    node = configs.setdefault(row['config'], {})
    *parents, leaf = row['field'].split('.')
    for key in parents:
      node = node.setdefault(key, {})
    node[leaf] = tuple(row['ours']) if isinstance(row['ours'], list) else row['ours']
  return build_report(data['stages'], options, data.get('figures', ()), configs, previous)


def main(directory=os.path.join('docs', 'reproduction', 'digits')):
  """Rewrites <directory>/report.md and report.json from its report.json (rebuild): both or
  neither."""
  path = os.path.join(directory, 'report.json')
  try:
    with open(path) as f:
      markdown, rebuilt = rebuild(json.load(f))
  except OSError as e:
    sys.exit(f'error: cannot read {path}: {e.strerror or e}')
  except (ValueError, KeyError, TypeError, AttributeError) as e:
    sys.exit(f'error: {path} is not a report.json this version can rebuild '
             f'({errors.one_line(e)}); nothing written')
  try:
    files.write_all_atomic({os.path.join(directory, 'report.md'): markdown,
                            path: json.dumps(rebuilt, indent=2, allow_nan=False)})
  except OSError as e:
    sys.exit(f'error: {files.cannot_write(e.filename or path, e)}; both files left as they were')
  print(f'{directory}: report.md and report.json rebuilt from its report.json')


if __name__ == '__main__':
  main(*sys.argv[1:2])
