"""Docs that agree with themselves: every relative link and README section they name exists, the
package's description on the index has absolute links only, one citation everywhere, and the
numbers of the committed reproduction quoted as its report.json has them."""
import glob
import json
import os
import re

import pytest

from conftest import REPO
from tf_hat_ebm.reproduction import quote

LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
FENCE = re.compile(r'```.*?```', re.S)


def _pages():
  return [os.path.join(REPO, 'README.md')] + sorted(glob.glob(os.path.join(REPO, 'docs', '**',
                                                                           '*.md'), recursive=True))


def _text(path, code=False):
  with open(path, encoding='utf-8') as f:
    text = f.read()
  return text if code else FENCE.sub('', text)


def anchors(path):
  """GitHub's anchors of a markdown file's headings."""
  out = set()
  for line in _text(path).splitlines():
    if line.startswith('#'):
      title = line.lstrip('#').strip().lower()
      out.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
  return out


def headings(path):
  return {line.lstrip('#').strip().lower() for line in _text(path).splitlines()
          if line.startswith('#')}


@pytest.mark.parametrize('page', _pages(), ids=lambda p: os.path.relpath(p, REPO))
def test_every_relative_link_points_at_a_file_and_heading_that_exist(page):
  broken = []
  for target in LINK.findall(_text(page)):
    if re.match(r'[a-z]+:', target):  # http:, https:, mailto:
      continue
    path, _, anchor = target.partition('#')
    resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    if not os.path.exists(resolved):
      broken.append(target)
    elif anchor and resolved.endswith('.md') and anchor not in anchors(resolved):
      broken.append(target)
  assert not broken, f'{os.path.relpath(page, REPO)}: {broken}'


def test_every_readme_section_the_docs_name_exists():
  readme = headings(os.path.join(REPO, 'README.md'))
  named = []
  for page in _pages()[1:]:
    text = ' '.join(_text(page).split())
    for match in re.finditer(r'README(?:\'s)?\s*\(?\s*"([^"]+)"', text):
      named.append((page, match.group(1)))
    for match in re.finditer(r'README\'s ([\w ]+?) section', text):
      named.append((page, match.group(1)))
  missing = [(os.path.relpath(p, REPO), name) for p, name in named
             if name.lower() not in readme]
  assert not missing, missing


def test_the_package_description_has_absolute_links_and_the_citation():
  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import export
  tomllib = pytest.importorskip('tomllib')  # Python 3.11
  with open(os.path.join(REPO, 'pyproject.toml'), 'rb') as f:
    project = tomllib.load(f)['project']
  assert project['license'] == 'Apache-2.0' and project['urls']
  description = _text(os.path.join(REPO, project['readme']), code=True)
  links = LINK.findall(description)
  assert links and all(link.startswith('https://') for link in links), links
  for path in (project['readme'], 'README.md'):
    assert export.BIBTEX in _text(os.path.join(REPO, path), code=True), path


def test_the_docs_quote_the_committed_report_as_its_json_has_it():
  """results.md and reproduce.md quote docs/reproduction/digits/report.json: their block
  is quote.block(report) (`python -m tf_hat_ebm.reproduction.quote` rewrites it)."""
  with open(os.path.join(REPO, quote.REPORT)) as f:
    report = json.load(f)
  expected = quote.block(report)
  for page in quote.PAGES:
    got = quote.quoted(_text(os.path.join(REPO, page), code=True))
    assert got is not None, f'{page} has no block of the report\'s numbers'
    assert got == expected, f'{page} quotes other numbers than {quote.REPORT}: rerun quote.py'
  synthesis = next(r for r in report['tables']['synthesis'] if r['label'].startswith('Hat EBM'))
  row = next(line for line in expected if line.startswith('| Table 2, synthesis'))
  assert f'{synthesis["mean"]:.2f} ± {synthesis["std"]:.2f}' in row
  # a number edited in the report is a failure of every page
  edited = json.loads(json.dumps(report))
  edited['checks'][5]['verdict'] = 'holds (in 2 of the last 3 runs)'
  assert quote.block(edited) != expected
  # the floor at N as the calibration measured it, and how
  edited['calibration'] = {'calibration': dict(num=1000, test_size=297, floor=dict(
      mean=1.083, std=0.331, runs=120, method='extrapolated', pool=297))}
  assert ('the floor, 1,000 held-out digits, scores 1.08 ± 0.33 (extrapolated from subsamples '
          'of the 297 without replacement' in quote.block(edited)[2])
  # each arm's length and plateau verdict, once the report has the rule's table
  edited['plateau'] = [dict(arm='synthesis: Hat EBM', steps=[9000], checkpoints=5, mid=2.49,
                            end=2.03, difference=-0.46, low=-0.8, high=-0.12, scatter=0.2,
                            eval_sd=0.3, verdict='no: still improving (seeds 0, 2)'),
                       dict(arm='SN-GAN', steps=[], mid=None, end=None, difference=None,
                            scatter=None, eval_sd=None, verdict='not measured')]
  lines = quote.block(edited)
  assert lines[-5:-2] == [
      '|---|---|---|---|---|---|---|',
      '| synthesis: Hat EBM | 9,000 | 5 | 2.49 -> 2.03 | -0.46 [-0.80, -0.12] | 0.20 / 0.30 | '
      'no: still improving (seeds 0, 2) |',
      '| SN-GAN | – | – | – -> – | – | – / – | not measured |']


def _rounded(value):
  """JSON with every float to 12 significant digits."""
  if isinstance(value, dict):
    return {k: _rounded(v) for k, v in value.items()}
  if isinstance(value, list):
    return [_rounded(v) for v in value]
  return float(f'{value:.12g}') if isinstance(value, float) else value


def test_the_committed_report_is_what_todays_tables_make_of_its_records():
  """docs/reproduction/digits/report.md and report.json are report.rebuild of the committed
  report.json (`python -m tf_hat_ebm.reproduction.report` rewrites both): a rule or table changed
  since is a failure until they are rebuilt."""
  from tf_hat_ebm.reproduction import report as report_lib  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, quote.REPORT)) as f:
    data = json.load(f)
  markdown, rebuilt = report_lib.rebuild(data)
  # Equal to the last bits where both Pythons sum alike (3.12's sum() of floats compensates)
  assert _rounded(json.loads(json.dumps(rebuilt))) == _rounded(data), (
      'report.json: rerun tf_hat_ebm.reproduction.report')
  assert markdown == _text(os.path.join(REPO, os.path.dirname(quote.REPORT), 'report.md'),
                           code=True), 'report.md: rerun tf_hat_ebm.reproduction.report'
  edited = json.loads(json.dumps(data))
  edited['stages']['coop_bn_s1']['result']['values']['fid']['hat_ebm'] = [12.0, 12.0]
  assert report_lib.rebuild(edited)[0] != markdown


def test_the_settings_pages_expected_results_are_the_reports():
  """docs/digits_settings.md's expected results and cost: quote.expected_block of report.json."""
  with open(os.path.join(REPO, quote.REPORT)) as f:
    report = json.load(f)
  expected = quote.expected_block(report)
  got = quote.quoted(_text(os.path.join(REPO, quote.SETTINGS_PAGE), code=True),
                     quote.EXPECTED_BEGIN, quote.EXPECTED_END)
  assert got == expected, f'{quote.SETTINGS_PAGE} quotes other numbers: rerun quote.py'
  synth = next(line for line in expected if line.startswith('| `digits_synth.py`'))
  per_seed = next(r for r in report['tables']['synthesis']
                  if r['label'].startswith('Hat EBM'))['per_seed']
  assert f'X = G(Z) + Y {min(per_seed):.2f}-{max(per_seed):.2f};' in synth
  assert synth.endswith(' | 9,000 | 742-773 |')  # steps, and the seeds' stage seconds
  edited = json.loads(json.dumps(report))
  edited['stages']['synthesis_s1']['seconds'] = 99.0
  assert quote.expected_block(edited) != expected


def test_the_run_time_of_the_default_is_the_same_on_every_page():
  """The README's quick start and the package's description give the default's time alike."""
  said = re.compile(r'(\d+) to (\d+) minutes on 2 idle cores')
  readme = said.findall(_text(os.path.join(REPO, 'README.md')))
  package = said.findall(_text(os.path.join(REPO, 'docs', 'package.md'), code=True))
  assert readme and package and package[0] == readme[0], (readme, package)


def test_rebuilding_a_report_that_is_not_one_is_a_line_and_writes_nothing(tmp_path):
  from tf_hat_ebm.reproduction import report as report_lib  # pylint: disable=g-import-not-at-top
  (tmp_path / 'report.json').write_text('{"scale": "digits"}')
  with pytest.raises(SystemExit, match='not a report.json this version can rebuild.*nothing'):
    report_lib.main(str(tmp_path))
  assert sorted(os.listdir(tmp_path)) == ['report.json']
  with pytest.raises(SystemExit, match='cannot read'):
    report_lib.main(str(tmp_path / 'missing'))


def test_withdrawn_numbers_are_gone_from_the_user_pages():
  for page in quote.PAGES:
    text = _text(os.path.join(REPO, page), code=True)
    for withdrawn in ('36.1 / 40.0 / 36.0', '8.68 / 14.97 / 14.07', '34.72', '31.44',
                      '3.49 ± 0.21', 'in 2 of the last 3 runs', '15.84 / 14.27 / 11.84'):
      assert withdrawn not in text, (page, withdrawn)


def test_the_readme_is_a_first_page_read_in_two_minutes():
  # Install, the main command and one figure first; the rest is a link to docs/.
  with open(os.path.join(REPO, 'README.md')) as f:
    text = f.read()
  assert len(text.splitlines()) <= 150
  first_table = text.index('\n|')
  for first in ('pip install -r requirements.txt', 'python experiments/train_synthesis.py',
                '![', 'python -m pytest'):
    assert first in text, first
  assert text.index('![') < text.index('python experiments/train_synthesis.py') < first_table


def test_the_sngan_settings_quote_their_committed_runs():
  """departures.json's and digits_settings.md's SN-GAN numbers are docs/sweeps/
  sngan_small_data.json's: the means over seeds 0-2 per step, and the paired weight-average
  interval."""
  import statistics  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import departures  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.reproduction import statistics as stats  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, 'docs', 'sweeps', 'sngan_small_data.json')) as f:
    runs = json.load(f)['variants']

  def fid(variant, seed, step):
    return statistics.mean(runs[variant]['seeds'][seed][step]['generator']['fid'])

  seeds = ('0', '1', '2')
  means = [f'{statistics.mean(fid("diffaugment_as_trained", s, step) for s in seeds):.2f} at '
           f'{int(step):,}' for step in ('2400', '4000', '4400', '4800')]
  assert ', '.join(means) in departures.reason('digits_sngan', 'training.num_steps', 4800)
  ema = [fid('diffaugment_ema', s, '4800') - fid('diffaugment_as_trained', s, '4800')
         for s in seeds]
  mean, low, high = stats.t_interval(ema)
  settings = _text(os.path.join(REPO, 'docs', 'digits_settings.md'))
  said = f'paired {mean:+.2f}, 95% interval [{low:+.2f}, {high:+.2f}]'
  assert said in settings, said


def test_the_reproduce_pages_reading_of_the_run_quotes_the_committed_report():
  """reproduce.md's hand-written reading of the committed run: each FID (two decimals) and
  relative change it names is one the committed report.md prints."""
  page = _text(os.path.join(REPO, 'docs', 'reproduce.md'))
  section = page[page.index('**What this run says.**'):page.index("**DDLS's grid on this GAN.**")]
  said = re.findall(r'(?<![\d.])\d+\.\d\d(?!\d)|-\d+\.\d%', section)
  report = _text(os.path.join(REPO, 'docs', 'reproduction', 'digits', 'report.md'), code=True)
  assert len(said) >= 6 and [n for n in said if n not in report] == []
