"""The reproduction's report from the stages' records: tables, checks, markdown and JSON.

Pure functions: records (the stages' done.json contents) in, (markdown, JSON-able dict) out.
Numbers are mean ± std over the training seeds; the paper scale puts the paper's beside them.
"""
from tf_hat_ebm.reproduction import stages as stages_lib


def hms(seconds):
  seconds = int(max(seconds, 0))
  return f'{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


def stats(values):
  """('mean ± std', mean, std) of the values that are not None (population std), or '–'."""
  values = [v for v in values if v is not None]
  if not values:
    return '–', None, None
  mean = sum(values) / len(values)
  std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
  return f'{mean:.2f} ± {std:.2f}', mean, std


def stage_names(pattern, seeds):
  """The stages a row reads: `pattern` per seed ('refinement_s{seed}'), or one shared stage."""
  names = [pattern.format(seed=s) for s in seeds]
  return list(dict.fromkeys(names))


def collect(records, pattern, key, seeds):
  return [records.get(name, {}).get('result', {}).get(key) for name in stage_names(pattern, seeds)]


def healthy(record):
  """A stage record that finished (not stopped by the guard)."""
  return bool(record) and not record.get('failed') and 'result' in record


def guard_stops(records, arm, seeds):
  """Seeds whose ablation arm the guard stopped beside a reference arm that finished healthy
  (the paper's instability), and those whose reference did not (not counted)."""
  counted, not_counted = [], []
  for seed in seeds:
    record = records.get(f'{arm}_s{seed}', {})
    if not record.get('failed'):
      continue
    reference = stages_lib.ABLATIONS[arm][0]
    (counted if healthy(records.get(f'{reference}_s{seed}')) else not_counted).append(seed)
  return counted, not_counted


class _Report:
  """Accumulates the markdown lines, the tables and the checks of one report."""

  def __init__(self, records, options):
    self.records, self.o, self.paper = records, options, options.scale == 'paper'
    self.seeds = list(options.seeds)
    self.lines, self.tables, self.checks = [], {}, []

  def table(self, title, key, rows, headers):
    self.lines.extend([f'## {title}', '', '| ' + ' | '.join(headers) + ' |',
                       '|' + '---|' * len(headers)])
    self.tables[key] = []
    for row in rows:
      assert len(row['cells']) == len(headers), (title, row['cells'])
      self.lines.append('| ' + ' | '.join(str(c) for c in row['cells']) + ' |')
      self.tables[key].append(row['json'])
    self.lines.append('')

  def fid_row(self, label, pattern, method, paper_value=None, paper_column=None):
    """A table row of FIDs: label, mean ± std, the stages (and the paper's number)."""
    per_seed = collect(self.records, pattern, method, self.seeds)
    text, mean, std = stats(per_seed)
    stages = pattern.format(seed='*')
    with_paper = self.paper if paper_column is None else paper_column
    cells = [label, text, stages] + ([paper_value or '–'] if with_paper else [])
    return dict(cells=cells, json=dict(label=label, mean=mean, std=std, stages=stages,
                                       per_seed=per_seed, paper=paper_value))

  def headers(self, first='', value='FID'):
    return [first, value, 'stages'] + (['paper'] if self.paper else [])

  def refinement(self):
    rows, scale = [], stages_lib.SCALES[self.o.scale]
    datasets = [('cifar10' if self.paper else 'digits', '')] + [
        (d, f'_{d}') for d, _, _ in scale.more_refinement]
    for data, suffix in datasets:
      pr = stages_lib.PAPER_REFINEMENT.get(data, {}) if self.paper else {}
      where = f', {data}' if self.paper else ''
      release = not suffix and self.o.release_sngan
      gan = 'sngan_release' if release else f'sngan{suffix}_s{{seed}}'
      which = 'published SN-GAN' if release else 'retrained SN-GAN'
      refine = f'refinement{suffix}_s{{seed}}'
      rows += [
          self.fid_row(f'SN-GAN G(Z0){where}', refine, 'generator', pr.get('generator')),
          self.fid_row(f'DDLS{where}', refine, 'ddls', pr.get('ddls')),
          self.fid_row(f'Hat EBM X = G(Z_K) + Y_K{where}', refine, 'hat_ebm', pr.get('hat_ebm')),
          self.fid_row(f'{which} scored on its own{where}', gan, 'generator', pr.get('generator'))]
    self.table('Table 1: refinement of an SN-GAN', 'refinement', rows, self.headers())

  def synthesis(self):
    scale = stages_lib.SCALES[self.o.scale]
    config = scale.configs['synthesis']
    data = 'cifar10' if self.paper else 'digits'
    rows = [self.fid_row('Hat EBM X = G(Z) + Y', 'synthesis_s{seed}', 'hat_ebm',
                         stages_lib.PAPER_SYNTHESIS.get(data) if self.paper else None),
            self.fid_row('its generator alone G(Z)', 'synthesis_s{seed}', 'generator')]
    for data, more in scale.more_synthesis:
      rows.append(self.fid_row(f'Hat EBM X = G(Z) + Y, {more}', f'synthesis_{data}_s{{seed}}',
                               'hat_ebm', stages_lib.PAPER_SYNTHESIS[data]))
    self.table(f'Table 2: synthesis ({config})', 'synthesis', rows, self.headers())

  def retrofit_and_ood(self):
    self.table('Retrofit of an autoencoder\'s decoder', 'retrofit', [
        self.fid_row('decoder of Z ~ N(0, I)', 'retrofit_s{seed}', 'generator'),
        self.fid_row('Hat EBM X = G(Z_K) + Y_K', 'retrofit_s{seed}', 'hat_ebm',
                     stages_lib.PAPER_RETROFIT['hat_ebm'])], self.headers())
    sets = sorted({k for s in self.seeds
                   for k in self.records.get(f'ood_s{s}', {}).get('result', {})})
    rows = []
    for name in sets:
      paper = stages_lib.PAPER_OOD.get(name) if self.paper else None
      row = self.fid_row(name, 'ood_s{seed}', name, paper)
      rows.append(row)
    self.table('Table 3: OOD detection by the synthesis model\'s energy (AUROC)', 'ood', rows,
               self.headers('OOD set', 'AUROC'))

  def ablations(self):
    rows = []
    for label, arm in (('historical bank (the paper)', 'synthesis'),
                       ('current samples', 'current'),
                       ('cooperative learning (no batch norm)', 'coop'),
                       ('cooperative learning (batch-norm generator)', 'coop_bn'),
                       ('refinement with the residual Y (the paper)', 'refinement'),
                       ('refinement without the residual, U(z) = H(G(z))', 'noresidual')):
      row = self.fid_row(label, f'{arm}_s{{seed}}', 'hat_ebm', paper_column=False)
      counted, not_counted = (guard_stops(self.records, arm, self.seeds)
                              if arm in stages_lib.ABLATIONS else ([], []))
      if counted:
        row['cells'][2] += f' (stopped by the guard: seeds {counted})'
      if not_counted:
        row['cells'][2] += f' (stopped, reference not healthy: seeds {not_counted})'
      row['json'].update(failed_seeds=counted, not_counted_seeds=not_counted)
      rows.append(row)
    self.table('Ablations (FID of the Hat EBM samples)', 'ablations', rows, ['', 'FID', 'stages'])

  def row(self, key, label):
    return next(r for r in self.tables[key] if r['label'].startswith(label))

  def check(self, text, better, worse, stopped=()):
    """Does `better` have the lower mean (seed by seed too)? A guard stop of the worse arm
    beside a healthy reference counts as the paper's effect."""
    better, worse = self.row(*better), self.row(*worse)
    if stopped:
      holds, verdict = True, f'yes: the ablation was stopped by the guard for seeds {stopped}'
    elif better['mean'] is None or worse['mean'] is None:
      holds, verdict = None, 'not measured'
    else:
      holds = better['mean'] < worse['mean']
      pairs = [(b, w) for b, w in zip(better['per_seed'], worse['per_seed'])
               if b is not None and w is not None]
      wins = sum(b < w for b, w in pairs)
      spread = max(better['std'] or 0.0, worse['std'] or 0.0)
      within = len(pairs) > 1 and abs(better['mean'] - worse['mean']) < spread
      verdict = (f'{"yes" if holds else "NO"} ({better["mean"]:.2f} vs {worse["mean"]:.2f}; '
                 f'on {wins} of {len(pairs)} seeds'
                 + ('; the gap is within one std over seeds' if within else '') + ')')
    self.checks.append(dict(check=text, holds=holds, verdict=verdict))

  def all_checks(self):
    def stopped(arm):
      return guard_stops(self.records, arm, self.seeds)[0]

    self.check('Hat EBM beats its SN-GAN', ('refinement', 'Hat EBM'), ('refinement', 'SN-GAN G'))
    self.check('Hat EBM beats DDLS', ('refinement', 'Hat EBM'), ('refinement', 'DDLS'))
    self.check('retrofit beats the decoder fed N(0, I)', ('retrofit', 'Hat EBM'),
               ('retrofit', 'decoder'))
    self.check('historical bank beats current samples', ('ablations', 'historical'),
               ('ablations', 'current'), stopped('current'))
    for arm, label, text in (
        ('coop', 'cooperative learning (no', 'cooperative learning'),
        ('coop_bn', 'cooperative learning (batch', 'cooperative learning with batch norm')):
      self.check(f'historical bank beats {text}', ('ablations', 'historical'),
                 ('ablations', label), stopped(arm))
    self.check('the residual helps refinement (the paper: long refinement runs without it become '
               'unstable, its appendix "Importance of Residual Image for Stability")',
               ('ablations', 'refinement with the'), ('ablations', 'refinement without'),
               stopped('noresidual'))
    self.lines.extend(['## Does each effect have the paper\'s sign?', ''])
    self.lines.extend(f'- {c["check"]}: {c["verdict"]}' for c in self.checks)
    self.lines.append('')

  def header(self):
    o = self.o
    precision = o.training_precision()
    said = precision or 'each config\'s own (perf.precision)'
    self.lines.extend([
        f'# Hat EBM reproduction ({o.scale} scale'
        + (f', config size {o.size}' if o.size else '')
        + f', seeds {", ".join(map(str, self.seeds))})', '',
        'FID: lower is better'
        + ('' if self.paper else ' (digits scale: small-data FID with the digits classifier, '
           'not comparable with the paper\'s Inception FID)')
        + '; AUROC: higher is better. Each number is '
        f'mean ± std over {len(self.seeds)} seed(s); its stages list the commands (below).', '',
        f'Training precision: {said}'
        + (' (pinned for the paper scale, as the paper and the release trained)'
           if precision == 'float32' and not o.precision else '') + '.', ''])

  def commands(self, figures):
    self.lines.extend(['## Figures', ''] + [f'![{f}](figures/{f})' for f in figures] + [''])
    self.lines.extend(['## Commands (run in the output directory; `experiments/` is the '
                       'project\'s)', ''])
    for name, rec in self.records.items():
      state = ', stopped by the guard' if rec.get('failed') else ''
      self.lines.append(f'- `{name}` ({hms(rec.get("seconds", 0))}{state}):')
      self.lines.extend(f'  - `{c}`' for c in rec['commands'])
    self.lines.append('')


def build_report(records, options, figures=()):
  """(markdown, JSON-able dict) of the records {stage: done record} of `options` (Options);
  `figures`: the file names in the report's figures/ directory."""
  report = _Report(records, options)
  report.header()
  report.refinement()
  report.synthesis()
  report.retrofit_and_ood()
  report.ablations()
  report.all_checks()
  report.commands(figures)
  data = dict(scale=options.scale, size=options.size, seeds=list(options.seeds),
              precision=options.training_precision() or 'config',
              sngan=('published' if options.release_sngan else 'retrained'),
              tables=report.tables, checks=report.checks, figures=list(figures), stages=records)
  return '\n'.join(report.lines), data
