"""Files written whole or not at all (tf_hat_ebm/files.py) and the docs' quoter built on it: a
page is built and checked in memory, and a failure (a report without a quoted row, markers out
of order, a file-size limit) leaves every page byte for byte as it was, with one line."""
import errno
import os
import re
import resource
import shutil
import subprocess
import sys
import time

import pytest

from tf_hat_ebm import errors
from tf_hat_ebm import files
from tf_hat_ebm.reproduction import quote

from conftest import REPO


PAGE = quote.PAGES[0]  # a page that quotes the report's numbers


@pytest.fixture(name='docs_root')
def docs_root_fixture(tmp_path):
  """A copy of the pages the quoter rewrites and the report they quote."""
  for page in quote.ALL_PAGES + (quote.REPORT,):
    os.makedirs(tmp_path / os.path.dirname(page), exist_ok=True)
    shutil.copyfile(os.path.join(REPO, page), tmp_path / page)
  return tmp_path


def pages(root):
  return {page: (root / page).read_bytes() for page in quote.ALL_PAGES}


def run_quote(root, fsize=None):
  def limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
  return subprocess.run([sys.executable, '-m', 'tf_hat_ebm.reproduction.quote'], cwd=root,
                        capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, PYTHONPATH=REPO),
                        preexec_fn=limit if fsize else None)


def listing(root):
  return sorted(os.path.relpath(os.path.join(d, n), root)
                for d, _, names in os.walk(root) for n in names)


def test_quote_rewrites_every_page_atomically(docs_root):
  page = docs_root / PAGE
  lines = page.read_text().splitlines()
  start = lines.index(quote.BEGIN)
  page.write_text('\n'.join(lines[:start + 1] + ['| stale | 0.00 |'] + lines[start + 1:]) + '\n')
  before = listing(docs_root)
  result = run_quote(docs_root)
  assert result.returncode == 0, result.stderr
  assert '| stale | 0.00 |' not in page.read_text()
  assert listing(docs_root) == before  # no temporary file left
  assert pages(docs_root) == {p: open(os.path.join(REPO, p), 'rb').read()
                              for p in quote.ALL_PAGES}


def swap_markers(root):
  text = (root / PAGE).read_text()
  text = text.replace(quote.BEGIN, '@@').replace(quote.END, quote.BEGIN).replace('@@', quote.END)
  (root / PAGE).write_text(text)


def drop_row(root):
  import json  # pylint: disable=g-import-not-at-top
  path = root / quote.REPORT
  report = json.loads(path.read_text())
  report['tables']['refinement'] = [r for r in report['tables']['refinement']
                                    if not r['label'].startswith('DDLS')]  # synthesis-only
  path.write_text(json.dumps(report))


@pytest.mark.parametrize('damage, fsize, message', [
    (drop_row, None, r"^error: docs/reproduction/digits/report.json has no refinement row "
                     r"starting 'DDLS' \(a row the docs quote\); no page written$"),
    (swap_markers, None, rf'^error: {re.escape(PAGE)}: its END marker \(.*\) is above its BEGIN '
                         r'marker: put it back below the block; no page written$'),
    # reproduce.md is larger than the limit: its temporary file is cut, no page is touched
    (None, 20000, r'^error: cannot write .*: File too large; over the file-size limit '
                  r'\(ulimit -f\) or the filesystem\'s: raise it and rerun; every page left '
                  r'as it was$')])
def test_a_failed_quote_leaves_every_page_byte_identical(docs_root, damage, fsize, message):
  if damage:
    damage(docs_root)
  with open(docs_root / PAGE, 'a') as f:  # a page the quoter would rewrite
    f.write('edited\n')
  before, names = pages(docs_root), listing(docs_root)
  result = run_quote(docs_root, fsize)
  assert result.returncode == 1
  assert len(result.stderr.strip().splitlines()) == 1, result.stderr
  assert re.match(message, result.stderr.strip()), result.stderr
  assert pages(docs_root) == before and listing(docs_root) == names


def test_write_all_atomic_writes_all_or_none_and_leaves_no_temporary(tmp_path, monkeypatch):
  (tmp_path / 'a').write_text('old a')
  (tmp_path / 'b').write_text('old b')
  real = os.fsync
  calls = []

  def full_disk(fd):
    calls.append(fd)
    if len(calls) == 2:
      raise OSError(errno.ENOSPC, 'No space left on device')
    real(fd)
  monkeypatch.setattr(os, 'fsync', full_disk)
  with pytest.raises(OSError):
    files.write_all_atomic({str(tmp_path / 'a'): 'new a', str(tmp_path / 'b'): b'new b'})
  assert sorted(os.listdir(tmp_path)) == ['a', 'b']
  assert (tmp_path / 'a').read_text() == 'old a' and (tmp_path / 'b').read_text() == 'old b'
  monkeypatch.setattr(os, 'fsync', real)
  files.write_all_atomic({str(tmp_path / 'a'): 'new a', str(tmp_path / 'b'): b'new b'})
  assert (tmp_path / 'a').read_text() == 'new a' and (tmp_path / 'b').read_bytes() == b'new b'
  assert oct(os.stat(tmp_path / 'a').st_mode & 0o777) == oct(0o666 & ~os.umask(0o022))
  assert sorted(os.listdir(tmp_path)) == ['a', 'b']


def test_a_killed_writes_temporary_is_removed_with_a_line(tmp_path, capsys):
  target = tmp_path / 'stats.npz'
  old, fresh = tmp_path / '.stats.npz.abc123.tmp', tmp_path / '.stats.npz.def456.tmp'
  legacy = tmp_path / 'stats.npz.tmp'
  for path in (old, fresh, legacy):
    path.write_bytes(b'cut')
  hour_ago = time.time() - files.STALE_SECONDS - 10
  os.utime(old, (hour_ago, hour_ago))
  os.utime(legacy, (hour_ago, hour_ago))
  files.write_atomic(str(target), b'whole')
  assert sorted(os.listdir(tmp_path)) == ['.stats.npz.def456.tmp', 'stats.npz']  # a live write's
  assert f'Removed {old}, left by an interrupted write of stats.npz.' in capsys.readouterr().err


@pytest.mark.parametrize('error, line', [
    (OSError(errno.EROFS, 'Read-only file system', '/w/.fid.json.lock'),
     'cannot write /w/.fid.json.lock: Read-only file system; the directory is read-only: make it '
     'writable, or choose another directory'),
    (OSError(errno.EFBIG, 'File too large', '/w/samples.npz'),
     'cannot write /w/samples.npz: File too large; over the file-size limit (ulimit -f) or the '
     "filesystem's: raise it and rerun"),
    (OSError(errno.ENOENT, 'No such file or directory', '/w'), None)])
def test_a_full_or_read_only_disk_is_one_line_naming_the_path(error, line):
  assert errors.disk_line(error) == line
