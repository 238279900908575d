"""docs/tutorial.ipynb runs top to bottom: its code cells in order in one namespace (no Jupyter
needed), matplotlib off screen; each figure and score it makes exists."""
import json
import os

import matplotlib
import numpy as np
import pytest

from conftest import REPO
from tf_hat_ebm import pretrained

NOTEBOOK = os.path.join(REPO, 'docs', 'tutorial.ipynb')


def code_cells(path=NOTEBOOK):
  with open(path) as f:
    notebook = json.load(f)
  assert notebook['nbformat'] == 4
  return [''.join(c['source']) for c in notebook['cells'] if c['cell_type'] == 'code']


@pytest.mark.skipif('digits_synth' not in pretrained.names(), reason='digits_synth not shipped')
def test_the_tutorial_runs_top_to_bottom(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  matplotlib.use('Agg')  # plt.show() draws nothing and returns
  namespace = {'__name__': '__main__'}
  cells = code_cells()
  for i, source in enumerate(cells):
    assert not any(line.lstrip().startswith(('%', '!')) for line in source.splitlines()), i
    code = compile(source, f'tutorial.ipynb cell {i}', 'exec')
    exec(code, namespace)  # pylint: disable=exec-used
  namespace['plt'].close('all')
  out = tmp_path / 'workdir' / 'tutorial'
  for name in ('samples.png', 'langevin_path.png', 'fid.json', 'digits_synth/pretrained.json'):
    assert (out / name).stat().st_size > 0, name
  scores = namespace['scores']
  assert set(scores) == {'fid', 'kid', 'precision', 'recall'}
  assert all(np.isfinite(v) for v in scores.values()) and scores['fid'] > 0
  assert 0 <= scores['precision'] <= 1 and 0 <= scores['recall'] <= 1
