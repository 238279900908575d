"""Markdown of the reproduction's tables, with the paper's numbers beside ours (pure Python).

Input: the stages' done records {stage: {'result': {...}, 'failed': bool}} as the pipeline writes
them (stage `<prefix>_s<seed>`; an evaluation's result is a results.EvalResult, FID
first, every other metric it holds in columns beside it). Tables are
numbered as the paper's (paper.TABLES). At the digits scale the paper column holds the paper's
CIFAR-10 / CelebA Inception FID for the sign and relative size of each effect only; at the paper
scale it is the paper's number with its std beside ours with both of ours (over seeds, over FID
runs). Every table is checked to be well formed (as many cells per row as the header).
"""
import math

from tf_hat_ebm import results as result_lib
from tf_hat_ebm.reproduction import departures
from tf_hat_ebm.reproduction import paper
from tf_hat_ebm.reproduction import plateau
from tf_hat_ebm.reproduction import statistics

DASH = '–'
DATA_NAMES = {'cifar10': 'CIFAR-10', 'celeba': 'CelebA'}


# ---- cells and tables --------------------------------------------------------------------------
def number(mean, std=None, digits=2):
  """'mean ± std', 'mean' (std None) or '–' (mean None)."""
  if mean is None:
    return DASH
  return f'{mean:.{digits}f}' + ('' if std is None else f' ± {std:.{digits}f}')


def percent(fraction):
  return DASH if fraction is None else f'{100 * fraction:+.1f}%'


def markdown(headers, rows):
  """Lines of a markdown table; a row with another cell count than the header is an error."""
  for row in rows:
    if len(row) != len(headers):
      raise ValueError(f'table row {row} has {len(row)} cells, the header {len(headers)}')
  return (['| ' + ' | '.join(headers) + ' |', '|' + '---|' * len(headers)]
          + ['| ' + ' | '.join(str(c) for c in row) + ' |' for row in rows])


# ---- records -----------------------------------------------------------------------------------
def stage_name(records, prefix, seed):
  """<prefix>_s<seed>, or `prefix` itself for a stage every seed shares (the published SN-GAN)."""
  name = f'{prefix}_s{seed}'
  return prefix if name not in records and prefix in records else name


def evaluations(records, prefix, seeds):
  """The EvalResult of each stage <prefix>_s<seed> that holds one."""
  found = (result_lib.from_record(records.get(stage_name(records, prefix, seed), {}).get('result'))
           for seed in seeds)
  return [e for e in found if e is not None]


def per_seed(records, prefix, key, seeds, metric='fid'):
  """(values, values of each sample set, failed seeds) of stages <prefix>_s<seed>: an
  evaluation's `metric` of method `key`, or the number result[key] (an OOD AUROC)."""
  values, runs, failed = [], [], []
  for seed in seeds:
    record = records.get(stage_name(records, prefix, seed), {})
    result = record.get('result') or {}
    evaluation = result_lib.from_record(result)
    values.append(evaluation.mean(metric, key) if evaluation else result.get(key))
    runs.append(evaluation.sets(metric, key) if evaluation else [])
    if record.get('failed'):
      failed.append(seed)
  return values, runs, failed


class Measured:
  """One row's numbers: statistics.summary of its per-seed values, its stages and failures, and
  `others`: {metric: (results.Metric, summary)} of every other metric its evaluations hold."""

  def __init__(self, records, prefix, key, seeds, metric='fid'):
    values, runs, self.failed = per_seed(records, prefix, key, seeds, metric)
    self.summary = statistics.summary(values, runs)
    self.prefix, self.key, self.values = prefix, key, values
    self.shared = stage_name(records, prefix, seeds[0]) == prefix if seeds else False
    self.others, self.data, self.data_label = {}, {}, None
    for evaluation in evaluations(records, prefix, seeds):
      for name, value in evaluation.data.items():  # the held-out split scored as the samples
        self.data.setdefault(name, []).append(value)
      if evaluation.data and evaluation.data_split:
        self.data_label = (f'data: {evaluation.data_split} ({evaluation.data_size} images) vs '
                           f'{evaluation.reference or "the reference"}')
      for name, shown in evaluation.metrics.items():
        if name != metric and name not in self.others and evaluation.sets(name, key):
          self.others[name] = (shown, statistics.summary(
              *per_seed(records, prefix, key, seeds, name)[:2]))

  @property
  def mean(self):
    return self.summary['mean']

  def cells(self, digits=2):
    """[ours ± sd over seeds, eval sd]."""
    s = self.summary
    return [number(s['mean'], s['std'], digits), number(s['eval_std'], None, digits)]

  def stages(self):
    return self.pattern() + (
        f' (ran away: seed{"s" if len(self.failed) > 1 else ""} '
        f'{", ".join(map(str, self.failed))}, scored at the last healthy checkpoint)'
        if self.failed else '')

  def pattern(self):
    return self.prefix if self.shared else f'{self.prefix}_s*'

  def json(self, label, paper_value=None):
    others = {name: summary for name, (_, summary) in self.others.items()}
    return dict(label=label, stages=self.pattern(), failed_seeds=self.failed,
                paper=list(paper_value) if paper_value else None, **self.summary,
                **({'others': others} if others else {}))


def _heads(runs, n_seeds, what='FID'):
  spread = f'± sd over {n_seeds} seeds' if n_seeds > 1 else '(1 seed: no sd)'
  return [f'ours: {what} {spread}', f'eval sd ({runs} FID runs)' if runs else 'eval sd']


def _other_metrics(measured):
  """{metric: results.Metric} of the other metrics any of `measured` holds that the report shows
  (results.METRICS' report flag): a column each. The rest stay in report.json."""
  shown = {}
  for m in measured:
    for name, (metric, _) in m.others.items():
      if name in result_lib.metrics_where('report'):
        shown.setdefault(name, metric)
  return shown


def _other_heads(shown):
  return [f'ours: {metric.label} ± sd' for metric in shown.values()]


def _other_cells(m, shown):
  """[mean ± sd over seeds] of each other metric of `shown` ('–' where m has none)."""
  return [number(m.others[name][1]['mean'], m.others[name][1]['std'], metric.digits)
          if name in m.others else DASH for name, metric in shown.items()]


def data_row(measured, shown, width):
  """[the row of the held-out split scored against the reference as every sample set is]: what
  data itself scores, to read the other rows by (mean ± sd over the rows' stages and seeds; the
  rest of its `width` cells '–'). Shown beside this version's KID (results.KID); a table of
  results made before renders as it did."""
  if shown.get('kid') != result_lib.KID:
    return []
  data, label = {}, None
  for m in {m.prefix: m for m in measured}.values():
    label = label or m.data_label
    for name, values in m.data.items():
      data.setdefault(name, []).extend(values)
  if not data.get('fid'):
    return []
  digits = {name: metric.digits for name, metric in shown.items()}

  def cell(name, n):
    s = statistics.summary(data.get(name, []))
    return number(s['mean'], s['std'], n)

  row = [label, cell('fid', 2), DASH] + [cell(name, digits[name]) for name in shown]
  return [row + [DASH] * (width - len(row))]


def _runs(rows):
  return min((m.summary['eval_runs'] for _, m, *_ in rows if m.summary['eval_runs']), default=0)


# ---- the paper's tables ------------------------------------------------------------------------
def header(scale, seeds, precision, fid_samples=None, feature_net=None):
  """The report's opening lines: what every number is, the precision the runs trained in."""
  lines = [f'# Hat EBM reproduction ({scale} scale, seeds {", ".join(map(str, seeds))})', '',
           f'Each number: mean ± sample std (ddof 1) over {len(seeds)} training seed(s)'
           + (' (one seed: no std over seeds)' if len(seeds) < 2 else '')
           + '; "eval sd": the std of the FID over independent sample sets of one model, '
           'pooled over seeds. Each effect is the paired difference over seeds with its 95% '
           'Student-t interval; its verdict comes from the interval.',
           f'Precision: {precision} (the paper and the authors\' release trained in float32).']
  if fid_samples or feature_net:
    count = f'{fid_samples:,}' if isinstance(fid_samples, int) else fid_samples or '?'
    lines.append(f'FID: {count} samples per run, features: {feature_net or "?"}.')
  if scale == 'paper':
    lines.append("The paper column: the paper's Inception FID, mean ± std over 3 runs.")
  else:
    lines.append("FID here is the digits classifier's small-data FID, not comparable with the "
                 "paper's Inception FID: the paper column (CIFAR-10 / CelebA) is for the sign "
                 'and relative size of each effect only.')
  return lines + ['']


def _paper_refinement(method, data):
  """(paper cell, paper relative cell) of a Table 1 method: one dataset, or every dataset."""
  datasets = [data] if data else list(paper.REFINEMENT)
  values = [paper.REFINEMENT[d][method] for d in datasets]
  base = [paper.REFINEMENT[d]['generator'][0] for d in datasets]
  where = (lambda d: '') if data else (lambda d: f' ({DATA_NAMES[d]})')
  value = '; '.join(number(*v) + where(d) for v, d in zip(values, datasets))
  rel = DASH if method == 'generator' else '; '.join(
      percent(paper.relative(v[0], b)) + where(d) for v, b, d in zip(values, base, datasets))
  return value, rel


def _scored_alone(suffix, published):
  """The Table 1 row of the SN-GAN scored on its own: (label, stage prefix, key)."""
  if published and not suffix:
    return [('published SN-GAN scored on its own', 'sngan_release', 'generator')]
  return [('retrained SN-GAN scored on its own', f'sngan{suffix}', 'generator')]


# The refinement of the synthesis run's own G (stages: refine_own_s<seed>) and its rows.
OWN_G = 'refine_own'
OWN_G_ROWS = (("synthesis run's G(Z0)", 'generator'),
              ("Hat EBM over the synthesis run's G", 'hat_ebm'))


def refinement_table(records, scale, seeds, published_sngan=False):
  """Table 1: SN-GAN G(Z0), DDLS, Hat EBM from the same Z0 (and the SN-GAN scored alone: the
  release's published one, stage sngan_release, when `published_sngan`)."""
  datasets = (['cifar10'] + [d for d in ('celeba',)
                             if any(k.startswith(f'refinement_{d}_s') for k in records)]
              if scale == 'paper' else [None])
  rows, out, notes = [], [], []
  for data in datasets:
    suffix = f'_{data}' if data and data != 'cifar10' else ''
    where = f', {DATA_NAMES[data]}' if data else ''
    gan = Measured(records, f'refinement{suffix}', 'generator', seeds)
    for label, prefix, key in (('SN-GAN G(Z0)', f'refinement{suffix}', 'generator'),
                               ('DDLS', f'refinement{suffix}', 'ddls'),
                               ('Hat EBM X = G(Z_K) + Y_K', f'refinement{suffix}', 'hat_ebm'),
                               *_scored_alone(suffix, published_sngan)):
      m = Measured(records, prefix, key, seeds)
      rel = (percent(paper.relative(m.mean, gan.mean)) if key != 'generator' and
             None not in (m.mean, gan.mean) else DASH)
      p_value, p_rel = _paper_refinement(key, data)
      rows.append((label + where, m, rel, p_value, p_rel))
      out.append(m.json(label + where, paper.REFINEMENT[data][key] if data else None))
    ddls, hat = (Measured(records, f'refinement{suffix}', k, seeds).mean
                 for k in ('ddls', 'hat_ebm'))
    if None not in (gan.mean, ddls, hat) and gan.mean != hat:
      share = (gan.mean - ddls) / (gan.mean - hat)
      papers = [f'{100 * paper.EFFECTS[d]["ddls_share_of_gain"]:.0f}% on {DATA_NAMES[d]}'
                for d in ([data] if data else paper.REFINEMENT)]
      notes.append(f'DDLS recovers {100 * share:.0f}% of the Hat EBM\'s gain over the SN-GAN'
                   f'{where} (the paper: {", ".join(papers)}).')
  own = Measured(records, OWN_G, 'generator', seeds)
  if own.values and any(v is not None for v in own.values):
    # Beside Table 1: a new hat on a strong generator, the synthesis run's own G (the paper's
    # case is CelebA's strong SN-GAN); its change is against that G, paired in the checks.
    for label, key in OWN_G_ROWS:
      m = Measured(records, OWN_G, key, seeds)
      rel = (percent(paper.relative(m.mean, own.mean)) if key != 'generator' and
             None not in (m.mean, own.mean) else DASH)
      rows.append((label, m, rel, DASH, DASH))
      out.append(m.json(label, None))
    notes.append(f'The last rows refine the synthesis run\'s own G with a new hat (its change '
                 f'is against that G, not the SN-GAN; the paper\'s strong-generator case is '
                 f'CelebA, {percent(paper.EFFECTS["celeba"]["hat_ebm_vs_generator"])}).')
  shown = _other_metrics(m for _, m, *_ in rows)
  headers = [''] + _heads(_runs(rows), len(seeds)) + _other_heads(shown) + [
      'ours vs SN-GAN G(Z0)', 'paper: FID ± sd', 'paper vs SN-GAN', 'stages']
  cells = [[label] + m.cells() + _other_cells(m, shown) + [rel, p_value, p_rel, m.stages()]
           for label, m, rel, p_value, p_rel in rows]
  cells += data_row([m for _, m, *_ in rows], shown, len(headers))
  return _titled(1, markdown(headers, cells) + [''] + notes + ([''] if notes else [])), out


def synthesis_table(records, scale, seeds, configs):
  """Table 2: the Hat EBM's samples X = G(Z) + Y per synthesis config, and its G(Z) alone.

  configs: [(stage prefix, config name)], the first the main synthesis stage."""
  rows, out = [], []
  for prefix, config in configs:
    hat = Measured(records, prefix, 'hat_ebm', seeds)
    gen = Measured(records, prefix, 'generator', seeds)
    published = paper.SYNTHESIS.get(config if scale == 'paper' else 'cifar10_synth')
    where = '' if scale == 'paper' else ' (CIFAR-10)'
    rel = percent(paper.relative(hat.mean, gen.mean)) if None not in (hat.mean, gen.mean) else DASH
    rows.append((f'Hat EBM X = G(Z) + Y, {config}', hat, rel,
                 number(*published) + where if published else DASH))
    rows.append((f'its generator alone G(Z), {config}', gen, DASH, 'not reported'))
    out += [hat.json(rows[-2][0], published), gen.json(rows[-1][0])]
  shown = _other_metrics(m for _, m, *_ in rows)
  headers = ([''] + _heads(_runs(rows), len(seeds)) + _other_heads(shown)
             + ['ours vs G(Z)', 'paper: FID ± sd', 'stages'])
  cells = [[label] + m.cells() + _other_cells(m, shown) + [rel, p, m.stages()]
           for label, m, rel, p in rows]
  cells += data_row([m for _, m, *_ in rows], shown, len(headers))
  peers = '; '.join(f'{config}: ' + ', '.join(f'{k} {v}' for k, v in
                                              paper.SYNTHESIS_PEERS.get(config, {}).items())
                    for _, config in configs if config in paper.SYNTHESIS_PEERS)
  notes = [f"The paper's peers in Table 2: {peers}.", ''] if peers else []
  return _titled(2, markdown(headers, cells) + [''] + notes), out


def retrofit_table(records, scale, seeds):
  """The retrofit (Section 4.2, no table in the paper): decoder of N(0, I) vs the Hat EBM."""
  dec = Measured(records, 'retrofit', 'generator', seeds)
  hat = Measured(records, 'retrofit', 'hat_ebm', seeds)
  where = '' if scale == 'paper' else ' (CIFAR-10)'
  rel = percent(paper.relative(hat.mean, dec.mean)) if None not in (hat.mean, dec.mean) else DASH
  rows = [('decoder of Z ~ N(0, I)', dec, DASH, 'not reported'),
          ('Hat EBM X = G(Z_K) + Y_K', hat, rel, number(*paper.RETROFIT['hat_ebm']) + where)]
  shown = _other_metrics(m for _, m, *_ in rows)
  headers = ([''] + _heads(_runs(rows), len(seeds)) + _other_heads(shown)
             + ['ours vs the decoder', 'paper: FID ± sd', 'stages'])
  cells = [[label] + m.cells() + _other_cells(m, shown) + [r, p, m.stages()]
           for label, m, r, p in rows]
  cells += data_row([m for _, m, *_ in rows], shown, len(headers))
  lines = ['## Retrofit of an autoencoder\'s decoder (the paper\'s Section 4.2; no table there)',
           ''] + markdown(headers, cells) + ['']
  return lines, [dec.json(rows[0][0]), hat.json(rows[1][0], paper.RETROFIT['hat_ebm'])]


# The digits OOD set the paper's nearest one stands beside (a semantic near-OOD split).
DIGITS_OOD_PAPER = {'other_digits': 'cifar100'}


def ood_table(records, scale, seeds, models=(('ood', ''),)):
  """Table 3: AUROC of a synthesis model's energy, test split vs each OOD set.

  models: [(stage prefix, label)] of the OOD stages, e.g. (('ood', ''), ('nearood', 'model of
  digits 0-4')); a label names its model in the rows."""
  rows, out = [], []
  for prefix, model in models:
    sets = sorted({k for s in seeds
                   for k in (records.get(f'{prefix}_s{s}', {}).get('result') or {})})
    for name in sets:
      m = Measured(records, prefix, name, seeds)
      ref = name if scale == 'paper' else DIGITS_OOD_PAPER.get(name)
      published = paper.OOD.get(ref)
      p = DASH
      if published:
        p = number(*published) + ('' if scale == 'paper' else f' ({ref}, CIFAR-10 model)')
      label = f'{name} ({model})' if model else name
      rows.append([label, m.cells(3)[0], p, m.stages()])
      out.append(m.json(label, published))
  spread = f'± sd over {len(seeds)} seeds' if len(seeds) > 1 else '(1 seed)'
  lines = markdown(['OOD set', f'ours: AUROC {spread}', 'paper: AUROC', 'stages'], rows)
  if scale != 'paper':
    lines += ['', "The paper's sets (CIFAR-10 model): "
              + ', '.join(f'{k} {v[0]:.2f}' for k, v in paper.OOD.items()) + '.', '',
              departures.OOD_NOT_COMPARABLE]
  return _titled(3, lines + ['']), out


CURRENT = 'current samples = cooperative learning without batch norm'  # one run: COOP_NOTE
# (row label, stage prefix, the paper's claims of the arm: keys of paper.ABLATIONS)
ABLATIONS = (('historical bank (the paper)', 'synthesis', ()),
             (CURRENT, 'current', ('current', 'coop')),
             ('cooperative learning (batch-norm generator)', 'coop_bn', ('coop_bn',)),
             ('refinement with the residual Y (the paper)', 'refinement', ()),
             ('refinement without the residual, U(z) = H(G(z))', 'noresidual', ('noresidual',)))


# Arms a scale adds (stages.Scale.more_arms), shown when they ran: (label, prefix, what it tests).
MORE_ABLATIONS = (("synthesis at the paper's Langevin time", 'paper_time',
                   "the paper's own time (K eps^2 / 2); the digits config runs 0.4x of it"),)
COLLAPSE_FID = plateau.COLLAPSE_FID  # a seed's FID above it is a collapse


def per_seed_cell(values, seeds, ran_away=None):
  """'s0 11.8, s1 173.1 (collapsed), s2 31.9 (ran away; step 3,500)': each seed's value, a
  collapse (COLLAPSE_FID) named, a run the guard stopped with its scored step ({seed: step})."""
  cells, ran_away = [], ran_away or {}
  for seed, v in zip(seeds, values):
    stopped = (f' (ran away; its last healthy checkpoint, step {ran_away[seed]:,})'
               if isinstance(ran_away.get(seed), int) else
               ' (ran away)' if seed in ran_away else '')
    if v is None:
      cells.append(f's{seed} {DASH}{stopped}')
    else:
      cells.append(f's{seed} {v:.1f}' + (' (collapsed)' if v > COLLAPSE_FID else '') + stopped)
  return ', '.join(cells)


def ran_away_steps(records, prefix, seeds):
  """{seed: the step its result was scored at (None: not scored)} of the seeds the guard
  stopped."""
  out = {}
  for seed in seeds:
    record = records.get(stage_name(records, prefix, seed), {})
    if record.get('failed'):
      evaluation = result_lib.from_record(record.get('result'))
      out[seed] = evaluation.step if evaluation else None
  return out


def ablation_table(records, seeds):
  """FID of the Hat EBM samples of each ablation arm beside its reference arm, with each seed's
  value (a collapse labelled)."""
  rows, out = [], []
  arms = [(label, prefix, '; '.join(paper.ABLATIONS[c] for c in claims) or 'the reference arm')
          for label, prefix, claims in ABLATIONS]
  arms += [arm for arm in MORE_ABLATIONS
           if any(stage_name(records, arm[1], s) in records for s in seeds)]
  for label, prefix, claim in arms:
    m = Measured(records, prefix, 'hat_ebm', seeds)
    rows.append((label, m, claim))
    collapsed = [s for s, v in zip(seeds, m.values) if v is not None and v > COLLAPSE_FID]
    out.append(dict(m.json(label), collapsed_seeds=collapsed))
  shown = _other_metrics(m for _, m, *_ in rows)
  headers = ([''] + _heads(_runs(rows), len(seeds)) + _other_heads(shown)
             + ['per seed', 'paper', 'stages'])
  cells = [[label] + m.cells() + _other_cells(m, shown)
           + [per_seed_cell(m.values, seeds, ran_away_steps(records, m.prefix, seeds)), claim,
              m.stages()] for label, m, claim in rows]
  cells += data_row([m for _, m, *_ in rows], shown, len(headers))
  note = (f'A seed whose FID is above {COLLAPSE_FID:.0f} is marked collapsed (held-out digits '
          'missing a whole class score 13-16 at N = 1,000): its spread is a failure, not noise.')
  return (['## Ablations (FID of the Hat EBM samples)', ''] + markdown(headers, cells)
          + ['', COOP_NOTE, '', note, ''], out)


# Why one row stands for two of the paper's arms.
COOP_NOTE = ("Cooperative learning without batch norm is the update of 'current samples': the "
             'chain of Y from 0 over G(Z0) is the image-space chain from G(Z0), and G is fitted to '
             'its samples at Z0 (no inferred Z). One run stands for both (two runs of it gave the '
             'same FID up to run-to-run noise); the batch-norm generator is the other arm.')


# (claim, better (prefix, key), worse (prefix, key), the paper's effect)
def _paper_effect(name):
  return ', '.join(f'{percent(e[name])} on {DATA_NAMES[d]}' for d, e in paper.EFFECTS.items())


CHECKS = (
    ('Hat EBM beats its SN-GAN (Table 1)', ('refinement', 'hat_ebm'), ('refinement', 'generator'),
     _paper_effect('hat_ebm_vs_generator')),
    ('Hat EBM beats DDLS (Table 1)', ('refinement', 'hat_ebm'), ('refinement', 'ddls'),
     _paper_effect('hat_ebm_vs_ddls')),
    ('DDLS beats its SN-GAN (Table 1)', ('refinement', 'ddls'), ('refinement', 'generator'),
     _paper_effect('ddls_vs_generator')),
    ('retrofit beats the decoder fed N(0, I) (Section 4.2)', ('retrofit', 'hat_ebm'),
     ('retrofit', 'generator'),
     f'a "solid FID" of {paper.RETROFIT["hat_ebm"][0]}; the decoder is not scored'),
    ('historical bank beats current samples', ('synthesis', 'hat_ebm'), ('current', 'hat_ebm'),
     paper.ABLATIONS['current'] + '; cooperative learning ' + paper.ABLATIONS['coop']),
    ('historical bank beats cooperative learning with batch norm', ('synthesis', 'hat_ebm'),
     ('coop_bn', 'hat_ebm'), paper.ABLATIONS['coop_bn']),
    ('the residual Y keeps refinement stable', ('refinement', 'hat_ebm'), ('noresidual', 'hat_ebm'),
     paper.ABLATIONS['noresidual']),
    ("a new hat improves the synthesis run's own G (beside Table 1)", (OWN_G, 'hat_ebm'),
     (OWN_G, 'generator'), percent(paper.EFFECTS['celeba']['hat_ebm_vs_generator'])
     + ' on CelebA (its strong SN-GAN)'),
    ("synthesis at the paper's Langevin time beats the digits' 0.4x", ('paper_time', 'hat_ebm'),
     ('synthesis', 'hat_ebm'), "the paper runs at its own time; the digits' departure, measured"),
)


# Ablations whose claim is about stability, and the verdict when no ablated run broke.
STABILITY_CLAIMS = ('noresidual',)
NOT_SHOWN = 'not shown at this scale'


def _checks(records):
  """CHECKS, with Table 1's three repeated on CelebA when its refinement stages ran."""
  if not any(k.startswith('refinement_celeba_s') for k in records):
    return CHECKS
  out = []
  for claim, (bp, bk), (wp, wk), published in CHECKS:
    if (bp, wp) != ('refinement', 'refinement'):
      out.append((claim, (bp, bk), (wp, wk), published))
      continue
    name = TABLE1_EFFECTS[(bk, wk)]
    for data, prefix in (('cifar10', 'refinement'), ('celeba', 'refinement_celeba')):
      out.append((claim.replace('(Table 1)', f'(Table 1, {DATA_NAMES[data]})'),
                  (prefix, bk), (prefix, wk), percent(paper.EFFECTS[data][name])))
  return out


BORDERLINE = 'borderline'


def _kind_of(verdict):
  """A verdict without its seed count: 'not resolved at 3 seeds' -> 'not resolved'."""
  return statistics.UNRESOLVED if verdict.startswith(statistics.UNRESOLVED) else verdict


def rerun_verdict(claim, verdict, previous):
  """(verdict, note): BORDERLINE with a note when `claim`'s verdict in an earlier report
  (previous: report.json dicts with their 'path') differs from `verdict`, else (verdict, '')."""
  earlier = [(p.get('path', '?'), c['verdict']) for p in previous for c in p.get('checks', ())
             if c.get('check') == claim]
  differ = [(path, v) for path, v in earlier if _kind_of(v) != _kind_of(verdict)]
  if not differ:
    return verdict, ''
  return BORDERLINE, (f'{BORDERLINE}: {verdict} in this run, but '
                      + '; '.join(f'{v} in {path}' for path, v in differ)
                      + f' ({len(differ)} of {len(earlier)} earlier runs differ)')


# The paper's Table 1 effect of each pair of refinement rows (paper.EFFECTS' names).
TABLE1_EFFECTS = {('hat_ebm', 'generator'): 'hat_ebm_vs_generator',
                  ('hat_ebm', 'ddls'): 'hat_ebm_vs_ddls',
                  ('ddls', 'generator'): 'ddls_vs_generator'}

# The paper's generator-update claims are about stability: the bank's runs against each arm's, on
# the scatter of their checkpoints' FID about its trend over the last third (plateau.py).
# (claim, reference prefix, ablated prefix, the paper's claim)
STABILITY_CHECKS = (
    ('historical bank trains stabler than current samples (checkpoint scatter)', 'synthesis',
     'current', paper.ABLATIONS['current']),
    ('historical bank trains stabler than cooperative learning with batch norm (checkpoint '
     'scatter)', 'synthesis', 'coop_bn', paper.ABLATIONS['coop_bn']),
)
# The metrics beside FID whose paired change each FID check names.
NAMED_METRICS = ('precision', 'recall')


def paper_gains(records, better, worse):
  """{dataset name: the paper's relative gain} of a Table 1 check ((prefix, key) each), {} for
  the other checks: at digits scale every dataset's, at paper scale the check's own."""
  effect = TABLE1_EFFECTS.get((better[1], worse[1]))
  if effect is None or not better[0].startswith('refinement'):
    return {}
  if better[0] == 'refinement_celeba':
    datasets = ['celeba']
  elif any(k.startswith('refinement_celeba_s') for k in records):
    datasets = ['cifar10']
  else:
    datasets = list(paper.EFFECTS)
  return {DATA_NAMES[d]: -paper.EFFECTS[d][effect] for d in datasets}


def bound_text(effect, reference, gains):
  """What the interval says of the paper's relative gains: 'gain at most 4.5% of its FID (95%):
  the paper's 21.5% on CIFAR-10 ruled out; its 1.1% on CelebA inside'. '' without gains."""
  mean, low, high = statistics.relative_gain(effect, reference)
  if not gains or low is None:
    return ''
  bounds = (f'gain at most {100 * high:.1f}%' if low <= 0 else
            f'gain at least {100 * low:.1f}% and at most {100 * high:.1f}%')

  def named(found):
    return ' and '.join(
        f'{100 * g:.1f}% on {d}'
        + ('' if low <= g <= high else f' (ours {"larger" if g < low else "smaller"})')
        for d, g in found)
  out = [g for g in gains.items() if not low <= g[1] <= high]
  inside = [g for g in gains.items() if low <= g[1] <= high]
  said = ([f'rules out the paper\'s {named(out)}'] if out else []) + (
      [f'the paper\'s {named(inside)} inside it'] if inside else [])
  return f'{bounds} of the worse arm\'s FID (95% interval): ' + '; '.join(said)


def metric_changes(better, worse, seeds):
  """'precision 0.523 vs 0.658, lower on every seed; recall ...': each NAMED_METRICS' means of
  the two arms and on how many seeds `better`'s is lower or higher (paired)."""
  out = []
  for name in NAMED_METRICS:
    if name not in better.others or name not in worse.others:
      continue
    b, w = better.others[name][1], worse.others[name][1]
    pairs = [(x, y) for x, y in zip(b['per_seed'], w['per_seed']) if None not in (x, y)]
    if not pairs or None in (b['mean'], w['mean']):
      continue
    lower = sum(x < y for x, y in pairs)
    higher = sum(x > y for x, y in pairs)
    side = ('lower' if lower >= higher else 'higher')
    count = max(lower, higher)
    where = 'on every seed' if count == len(pairs) else f'on {count} of {len(pairs)} seeds'
    out.append(f'{name} {b["mean"]:.3f} vs {w["mean"]:.3f}, {side} {where}')
  return '; '.join(out)


def scatter_check(records, seeds, better, worse):
  """The paired effect of log checkpoint scatter (plateau.py's, about the trend) of run prefixes
  `better` (the bank) and `worse` (an ablated arm), with its text as a ratio."""
  scatter = {p: [r['scatter'] for r in seed_rules(records, p, 'hat_ebm', seeds)[0]]
             for p in (better, worse)}
  logs = {p: [math.log(v) if v else None for v in scatter[p]] for p in scatter}
  e = statistics.paired_effect(logs[better], logs[worse], seeds=seeds)
  if e['mean'] is None:
    return e
  per_seed = ', '.join(f's{s} {w:.2f} vs {b:.2f}' for s, b, w in zip(
      seeds, scatter[better], scatter[worse]) if None not in (b, w))
  interval = ('' if e['low'] is None else
              f', 95% interval [{math.exp(e["low"]):.1f}x, {math.exp(e["high"]):.0f}x]')
  e['text'] = (f'{e["verdict"]}: checkpoint scatter {math.exp(e["mean"]):.0f}x the bank\'s'
               f'{interval} over {e["n"]} paired seeds ({per_seed})')
  return e


def holds_alone(check):
  """Holds at 95% alone but not after Holm's correction over the family."""
  return (check['verdict'].startswith(statistics.HOLDS) and check.get('p_holm') is not None
          and check['p_holm'] > 1 - statistics.CONFIDENCE)


def holm_notes(out):
  """Holm's correction over the family of checks (those with a p-value): each check's adjusted
  p in out[i]['p_holm']; a line naming the family and the verdicts that do not survive it."""
  adjusted = statistics.holm([c.get('p') for c in out])
  family = [c for c, p in zip(out, adjusted) if p is not None]
  for c, p in zip(out, adjusted):
    c['p_holm'] = p
  lost = [c['check'] for c in family if holds_alone(c)]
  return [f'Multiplicity: the family is the {len(family)} checks above with an interval; Holm\'s '
          'step-down over their two-sided paired-t p-values keeps the chance of any false '
          f'"holds" among them at {100 * (1 - statistics.CONFIDENCE):.0f}%. '
          + ('Every "holds" survives it.' if not lost else
             'Holds at 95% alone but not after Holm: ' + '; '.join(lost) + '.')]


def checks_table(records, seeds, previous=()):
  """Each effect the paper reports: the paired difference over seeds, its interval, verdict
  (borderline where an earlier run's report, `previous`, gave another verdict), the bound it
  puts on the paper's relative gain, the paired change of precision and recall, and the
  generator-update arms' stability; Holm's correction over the family."""
  rows, out = [], []
  for claim, (bp, bk), (wp, wk), published in _checks(records):
    if not all(any(stage_name(records, p, s) in records for s in seeds) for p in (bp, wp)):
      continue  # an arm this run did not train (a part left out, or dropped at its scale)
    better, worse = Measured(records, bp, bk, seeds), Measured(records, wp, wk, seeds)
    e = statistics.paired_effect(better.values, worse.values, failed_seeds=worse.failed,
                                 seeds=seeds)
    if wp in STABILITY_CLAIMS and not worse.failed and e['n']:
      # The claim is that the ablated run becomes unstable; an FID gap between two healthy runs
      # neither shows nor refutes it (the training curves are the evidence).
      e['verdict'], e['p'] = NOT_SHOWN, None  # not a verdict of the interval: not in the family
      e['text'] = f'{NOT_SHOWN}: no run without it became unstable; FID {e["text"]}'
    bound = bound_text(e, worse.mean, paper_gains(records, (bp, bk), (wp, wk)))
    e['text'] += f'; {bound}' if bound else ''
    e['verdict'], note = rerun_verdict(claim, e['verdict'], previous)
    if note:
      e['text'] = f'{note}. This run: {e["text"]}'
    rel = (percent(paper.relative(better.mean, worse.mean))
           if None not in (better.mean, worse.mean) else DASH)
    interval = (f'[{e["low"]:+.2f}, {e["high"]:+.2f}]' if e['low'] is not None else
                'none (one seed)' if e['n'] == 1 else DASH)
    changes = metric_changes(better, worse, seeds)
    rows.append([claim, number(e['mean']), interval, str(e['n']), rel, changes or DASH,
                 published, e['text']])
    out.append(dict(check=claim, paper=published, relative=rel, bound=bound or None,
                    metrics=changes or None, kind='fid', **e))
  for claim, bp, wp, published in STABILITY_CHECKS:
    if not any(stage_name(records, wp, s) in records for s in seeds):
      continue
    e = scatter_check(records, seeds, bp, wp)
    e['verdict'], note = rerun_verdict(claim, e['verdict'], previous)
    if note:
      e['text'] = f'{note}. This run: {e["text"]}'
    ratio = DASH if e['mean'] is None else f'{math.exp(e["mean"]):.0f}x (scatter ratio)'
    interval = (DASH if e['low'] is None else
                f'[{math.exp(e["low"]):.1f}x, {math.exp(e["high"]):.0f}x]')
    rows.append([claim, ratio, interval, str(e['n']), DASH, DASH, published, e['text']])
    out.append(dict(check=claim, paper=published, relative=DASH, bound=None, metrics=None,
                    kind='scatter', ratio=None if e['mean'] is None else math.exp(e['mean']),
                    ratio_low=None if e['low'] is None else math.exp(e['low']),
                    ratio_high=None if e['high'] is None else math.exp(e['high']), **e))
  notes = holm_notes(out)
  for row, c in zip(rows, out):
    row.insert(4, DASH if c['p_holm'] is None else f'{c["p_holm"]:.3f}')
    if holds_alone(c):
      c['text'] = row[-1] = f'{c["text"]}; not after Holm\'s correction (p {c["p_holm"]:.3f})'

  headers = ['effect', 'ours: FID difference (worse - better)', '95% interval', 'paired seeds',
             'Holm p', 'ours: relative', 'precision, recall: better vs worse', 'paper',
             'verdict']
  return (["## Does each effect the paper reports hold?", ''] + markdown(headers, rows)
          + [''] + notes + [''], out)


# The arms the plateau rule is applied to: (label, stage prefix, the FID row it reads).
PLATEAU_ARMS = (('synthesis: Hat EBM', 'synthesis', 'hat_ebm'),
                ('SN-GAN (the refinement\'s generator)', 'sngan', 'generator'),
                ('refinement: Hat EBM', 'refinement', 'hat_ebm'),
                ('retrofit: Hat EBM', 'retrofit', 'hat_ebm'),
                ('current samples', 'current', 'hat_ebm'),
                ('cooperative, batch norm', 'coop_bn', 'hat_ebm'),
                ('refinement without Y', 'noresidual', 'hat_ebm'),
                ("refinement of the synthesis run's G: Hat EBM", OWN_G, 'hat_ebm'),
                ("synthesis at the paper's Langevin time", 'paper_time', 'hat_ebm'))


def end_window(records, seed, name, key):
  """[(step, sample sets' FIDs of `key`)] of run `name`'s end window before its end: the
  window_s<seed> stage's results (stages.window_steps), oldest first."""
  window = (records.get(f'window_s{seed}') or {}).get('result') or {}
  found = [result_lib.from_record(r) for o, r in window.items()
           if o.rsplit('/', 1)[-1].rsplit('_', 1)[0] == name]
  return sorted((r.step, r.sets('fid', key)) for r in found if r and r.step is not None)


def change_cell(summary):
  """'-0.22 [-0.93, +0.49]': the change with its interval ('–' where not measured)."""
  if summary['difference'] is None:
    return DASH
  interval = ('' if summary.get('low') is None else
              f' [{summary["low"]:+.2f}, {summary["high"]:+.2f}]')
  return f'{summary["difference"]:+.2f}{interval}'


def seed_rules(records, prefix, key, seeds):
  """(the plateau rule of each seed's run <prefix>_s<seed> on its FID row `key`, each with its
  'seed'; the steps the runs trained)."""
  per_seed, steps = [], set()
  for seed in seeds:
    name = stage_name(records, prefix, seed)
    record = records.get(name, {})
    end, earlier = (result_lib.from_record(record.get(k)) for k in ('result', 'plateau'))
    end_step = end.step if end and end.step is not None else record.get('step')
    steps.add(record.get('step'))
    per_seed.append(dict(plateau.rule(
        earlier and earlier.sets('fid', key), end and end.sets('fid', key),
        earlier and earlier.step, end_step, ran_away=bool(record.get('failed')),
        num_steps=record.get('num_steps'), window=end_window(records, seed, name, key)),
        seed=seed))
  return per_seed, steps


def plateau_table(records, seeds):
  """Per arm: the steps trained, the plateau rule's numbers over its seeds and whether it
  converged (plateau.py); arms without a stage are left out."""
  rows, out = [], []
  for label, prefix, key in PLATEAU_ARMS:
    if not any(stage_name(records, prefix, s) in records for s in seeds):
      continue
    per_seed, steps = seed_rules(records, prefix, key, seeds)
    summary = plateau.arm(per_seed)
    trained = ', '.join(f'{s:,}' for s in sorted(s for s in steps if s is not None)) or DASH
    mids = sorted({r['mid_step'] for r in per_seed if r['mid_step'] is not None})
    rows.append([label, trained, ', '.join(f'{s:,}' for s in mids) or DASH,
                 str(summary['checkpoints']), number(summary['mid']), number(summary['end']),
                 change_cell(summary), number(summary['scatter']), number(summary['eval_sd']),
                 summary['verdict']])
    out.append(dict(arm=label, stages=f'{prefix}_s*', steps=sorted(s for s in steps if s),
                    seeds=per_seed, **summary))
  lines = ['## Trained to a plateau?', '',
           f'Rule, per seed: {plateau.RULE}. Per arm: a seed that collapsed, swung (unstable) or '
           'ran away keeps the arm from "yes" and is named; otherwise the arm\'s change is the '
           'mean of its seeds\' changes, its interval from theirs, read against the same band. '
           'A run the runaway guard stopped is scored at its last healthy checkpoint, labelled. '
           'Means over the seeds the rule scored; "scatter": about the trend, "eval sd": of one '
           'sample set\'s FID.', '']
  lines += markdown(['arm', 'steps trained', 'checkpoint at 2/3', 'checkpoints in the last third',
                     'FID at 2/3', 'FID at the end', 'change over the third [95% interval]',
                     'scatter', 'eval sd', 'converged'], rows) if rows else [
                         'No training stage ran.']
  if rows and all(r[2] == DASH for r in rows):
    lines += ['', 'No run scored its checkpoint at 2/3 of training (the reproduction that made '
              'these records predates the rule): whether any arm converged is not measured.']
  return lines + [''], out


def _titled(number_, lines):
  t = paper.TABLES[number_]
  return [f'## Table {number_}: {t["title"]}', ''] + lines


# ---- settings against the appendix -------------------------------------------------------------
def _get(config, path):
  for key in path.split('.'):
    if config is None or key not in config:
      return None
    config = config[key]
  return config


def _has(config, path):
  for key in path.split('.'):
    if not hasattr(config, 'keys') or key not in config:
      return False
    config = config[key]
  return True


def _same(a, b):
  if isinstance(a, (int, float)) and isinstance(b, (int, float)):
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1.0)
  return a == b


def _setting(value):
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return f'{value}'
  return f'{value:,}' if isinstance(value, int) else f'{value:g}'


def settings_table(configs, scale):
  """Every appendix setting of each run's config beside the appendix's value; at the digits
  scale also the release's where the appendix is silent (paper.RELEASE_SETTINGS), and each
  departure with its measured reason (departures.REASONS).

  configs: {config name: its resolved config (dict or ConfigDict)}."""
  rows, out = [], []
  digits = scale != 'paper'
  for name, config in configs.items():
    column, settings = paper.appendix_settings(name, release=digits)
    for field, published in settings.items():
      if not _has(config, field):
        continue  # a report's run that predates the field (its record has no row of it)
      ours = _get(config, field)
      same = _same(ours, published)
      why = departures.reason(name, field, ours) if digits and not same else None
      note = '' if same else why or ('differs: no measured reason recorded' if digits
                                     else 'DIFFERS')
      rows.append([name, f'{column}', paper.SETTING_NAMES[field], f'`{field}`',
                   _setting(published), _setting(ours), note])
      out.append(dict(config=name, appendix=column, field=field, paper=published, ours=ours,
                      same=same, reason=why))
  lines = ['## Settings against the paper\'s appendix', '']
  if digits:
    lines += ['The appendix\'s settings, and where it is silent the release\'s (Mimicry\'s for '
              'the SN-GAN, the paper configs\' DDLS), beside each digits config; every '
              'departure with the measurement behind it.', '']
  lines += markdown(['config', 'paper column', 'setting', 'field', 'paper', 'ours',
                     'why it differs' if digits else ''], rows) + ['']
  return lines, out


# ---- calibration -------------------------------------------------------------------------------
def _reference_row(label, entry, replaced=False):
  """A calibration row; `replaced`: a record without a method (before the fit) that drew with
  replacement."""
  pool = entry.get('pool', '?')
  how = {'extrapolated': f' (extrapolated from {pool} images, fit a + b/n)', 'measured': '',
         'with replacement': f' (drawn with replacement from {pool}, as a copier repeats)'}
  how = how.get(entry.get('method'), ' (drawn with replacement)' if replaced else '')
  draws = 'fit' if entry.get('method') == 'extrapolated' else entry['runs']
  total = entry.get('total_std')
  pools = '' if total is None else (f'; ± {total:.2f} with the pool\'s own variance '
                                    f'(a jackknife over {entry["pool_spread"]["replicates"]} '
                                    f'subsets of {entry["pool_spread"]["keep"]})')
  return [label + how, number(entry['mean'], entry['std']) + pools, draws]


def gap_lines(cal, fids=()):
  """What a gap means, computed from the calibration and the models' FIDs.

  fids: [(label, mean FID over seeds, its eval sd)] of the models to place."""
  n, floor, bound, dropped = cal['num'], cal['floor'], cal['memorisation'], cal['dropped_class']
  f, e = floor['mean'], floor['std'] or 0.0
  # The floor's real uncertainty: the pool's own variance with the fit's (calibration.py); a
  # fit's error alone, conditional on its one pool, places no model at the floor.
  total = floor.get('total_std', None if floor.get('method') == 'extrapolated' else e)
  text = [f'What a gap means, from the numbers above. {n:,} held-out digits score {f:.2f} '
          f'± {e:.2f}' + ('' if total is None or total == e else
                          f' (± {total:.2f} with their pool\'s own variance)')]
  fit = floor.get('fit')
  if fit:
    bias = fit['b'] / n
    text.append(f' (FID(n) = {fit["a"]:.2f} + {fit["b"]:.0f} / n: {bias:.2f} of it, '
                f'{100 * bias / f:.0f}%, is the bias of {n:,} samples; with unlimited samples '
                f'held-out digits would score {fit["a"]:.2f} ± {fit["a_std"]:.2f})')
  text.append(f'; {n:,} training digits score {bound["mean"]:.2f} (a generator that copied its '
              f'data would score that) and held-out digits without class {dropped["label"]} '
              f'{dropped["mean"]:.2f}, {dropped["mean"] - f:.2f} above the floor.')
  placed, below, at_floor = [], [], []
  for label, mean, eval_sd in fids:
    if mean is None:
      continue
    margin = 2 * ((total or 0.0) ** 2 + (eval_sd or 0.0) ** 2) ** 0.5
    gap = mean - f
    share = gap / (dropped['mean'] - f) if dropped['mean'] != f else float('nan')
    placed.append(f'{label} {mean:.2f} ({gap:+.2f}, {share:.2f} of a missing class)')
    if gap < -margin:
      below.append(label)
    elif abs(gap) <= margin:
      at_floor.append(label)
  if placed:
    text.append(' Each model above the floor, in units of that missing-class gap: '
                + '; '.join(placed) + '.')
  if total is None:
    text.append(' No model is placed at the floor: its ± is the fit\'s error on one pool of '
                f'{floor.get("pool", "?")} images, without the pool\'s own variance (this record '
                'predates its jackknife), so how close to the data a model is cannot be read '
                'from it.')
    at_floor, below = [], []
  if at_floor:
    text.append(' Within twice the combined sd (the floor\'s with its pool\'s variance, and '
                'the model\'s eval sd) of the floor, as close to the data as this FID can tell '
                f'at this N, which tells no model within about ±{2 * total:.2f} of the floor '
                'from held-out digits: ' + ', '.join(at_floor) + '.')
  if below:
    text.append(' Below the floor by more than that (closer to the training statistics than '
                'held-out digits; check the nearest-training-image column for copies): '
                + ', '.join(below) + '.')
  text.append(' A difference between two models is read from their paired interval over seeds '
              '(the checks above), not from a fixed margin.')
  return [''.join(text)]


def calibration_section(cal, models=None, fids=()):
  """The metric's floor and memorisation bound at the report's N, the class coverage and the
  nearest-training-image distance of each model's samples, and what the gaps mean (gap_lines).

  cal: evaluation.calibration.calibrate(...); models: {label: calibration.coverage(...)};
  fids: [(label, mean FID, eval sd)] of the models to place against the floor."""
  n, dropped = cal['num'], cal['dropped_class']
  replaced = cal.get('replacement', False)
  rows = [_reference_row(f'{n:,} held-out test digits: the floor', cal['floor'], replaced),
          _reference_row(f'{n:,} training digits: a generator that copied its data',
                         cal['memorisation']),
          _reference_row(f'{n:,} test digits without class {dropped["label"]}: a missing mode',
                         dropped, replaced)]
  lines = [f'## How far this FID can go: its calibration at N = {n:,}', '']
  lines += markdown(['images scored against the train split', 'FID ± sd (over draws, or the '
                     "fit's standard error)", 'draws'], rows) + ['']
  test = cal['test']

  def coverage_row(label, c, closer):
    return [label, f'{100 * c["rarest_share"]:.1f}% (class {c["rarest_class"]})',
            ' '.join(map(str, c['counts'])), number(c['nn_mean'], None, 3), closer]

  rows = [coverage_row('test digits (the reference)', test, '5.0% (by definition)')]
  rows += [coverage_row(label, c, f'{100 * c["share_closer_than_test_p5"]:.1f}%')
           for label, c in (models or {}).items()]
  lines += markdown(['samples (the first seed\'s models)', 'rarest class (share)',
                     'class histogram', 'mean distance to the nearest training image',
                     "closer to a training image than 95% of the test digits"], rows) + ['']
  lines.append('The class shares describe the first seed\'s samples only; no rule for a missing '
               'mode is applied to them.')
  return lines + [''] + gap_lines(cal, fids) + ['']
