"""Progress that reads in a file (plain lines, no backspace or carriage return) and on a terminal
(one redrawn bar), and the end of a training run: its outputs and the next commands."""
import io
import os

import pytest

from tf_hat_ebm import progress


class _Clock:
  def __init__(self):
    self.now = 0.0

  def __call__(self):
    return self.now


def test_a_file_gets_one_plain_line_per_tenth_with_step_eta_and_metrics():
  stream, clock = io.StringIO(), _Clock()
  bar = progress.Progress(100, unit='step', stream=stream, clock=clock)
  for step in range(1, 101):
    clock.now = step * 0.5
    bar.update(step, {'energy_diff': 0.0123456, 'steps/s': 2.0})
  text = stream.getvalue()
  assert '\b' not in text and '\r' not in text
  lines = text.splitlines()
  assert len(lines) == 11  # the first update, every 10 steps after it, the last
  assert lines[0] == ('step 1/100 (1%), 0s elapsed, ETA 50s: energy_diff 0.01235, steps/s 2')
  assert lines[5].startswith('step 51/100 (51%), 26s elapsed, ETA 24s: ')
  assert lines[-1] == 'step 100/100 (100%), 50s elapsed, done: energy_diff 0.01235, steps/s 2'


def test_a_resumed_run_counts_its_eta_from_where_it_resumed_and_prints_after_a_minute():
  stream, clock = io.StringIO(), _Clock()
  bar = progress.Progress(1000, start=900, stream=stream, clock=clock)
  clock.now = 10.0
  bar.update(901)  # 1 step in 10 s: 99 more take 990 s
  clock.now = 75.0
  bar.update(902)  # not a tenth further, but a minute later
  lines = stream.getvalue().splitlines()
  assert lines[0] == 'step 901/1000 (90%), 10s elapsed, ETA 16:30'
  assert lines[1].startswith('step 902/1000 (90%), 1:15 elapsed')


def test_a_terminal_gets_one_bar_redrawn_in_place():
  stream = io.StringIO()
  bar = progress.Progress(4, stream=stream, tty=True)
  for step in range(1, 5):
    bar.update(step, {'loss': 1.0})
  text = stream.getvalue()
  assert text.count('\r') == 4 and text.endswith('\n') and text.count('\n') == 1
  assert '[' + '=' * progress.BAR_WIDTH + ']' in text


def test_a_training_run_logged_to_a_file_has_plain_lines_and_ends_with_its_outputs(
    tmp_path, capsys, tiny):
  # pylint: disable=g-import-not-at-top
  import tensorflow as tf
  from tf_hat_ebm.tasks.synthesis import SynthesisTask
  from tf_hat_ebm.trainer import Trainer
  config = tiny(**{'training.figures': True})  # the log names every output
  config.training.steps_per_loop = 1
  strategy = tf.distribute.get_strategy()
  workdir = str(tmp_path / 'run')
  Trainer(SynthesisTask(config, strategy), config, workdir, strategy, verbose=True).train(3)
  out = capsys.readouterr().out  # pytest's capture is not a terminal: as a file
  assert '\b' not in out and '\r' not in out
  steps = [line for line in out.splitlines() if line.startswith('step ')]
  assert [s.split(',')[0] for s in steps] == ['step 1/3 (33%)', 'step 2/3 (66%)',
                                              'step 3/3 (100%)']
  assert all('ETA' in s or 'done' in s for s in steps)
  assert all('energy_diff' in s and 'gen_loss' in s for s in steps)
  assert f'Outputs in {workdir}:' in out
  assert os.path.join(workdir, 'training_curves.png') in out
  assert f'tensorboard --logdir={workdir}' in out
  assert f'python experiments/evaluate_fid.py --workdir={workdir}' in out


@pytest.mark.parametrize('seconds, text', [(5, '5s'), (187, '3:07'), (3723, '1:02:03')])
def test_durations_read_as_clock_times(seconds, text):
  assert progress.duration(seconds) == text
