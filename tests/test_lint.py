"""flake8 over the repository, with the project's style (.flake8: 2-space indent, 100 columns)."""
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_repository_is_lint_free():
  result = subprocess.run([sys.executable, '-m', 'flake8', '--statistics', '.'], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, f'flake8 findings:\n{result.stdout}{result.stderr}'
