"""Docs that agree with themselves: every relative link and README section they name exists, the
package's description on the index has absolute links only, and one citation everywhere."""
import glob
import os
import re

import pytest

from conftest import REPO

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


def test_the_readme_quotes_the_joint_sweep_as_its_one_source_has_it():
  """The README's refinement / retrofit FIDs are the seed-sweep table of docs/speed.md."""
  readme = _text(os.path.join(REPO, 'README.md'))
  speed = _text(os.path.join(REPO, 'docs', 'speed.md'))
  for chain in ('refinement', 'retrofit'):
    row = next(line for line in readme.splitlines() if line.startswith(f'| {chain} |'))
    f32, bf16 = [cell.strip().split(' / ') for cell in row.strip('|').split('|')[2:4]]
    rows = [line for line in speed.splitlines()
            if line.startswith(f'| {chain[:6]}')]
    assert len(rows) == 3, chain
    for seed, line in enumerate(rows):
      cells = [c.strip() for c in line.strip('|').split('|')]
      assert cells[1] == str(seed)
      assert cells[-2].startswith(f'**{f32[seed]} ') and cells[-1].startswith(f'**{bf16[seed]} ')
