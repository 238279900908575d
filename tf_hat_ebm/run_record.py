"""Where a training run's time goes, and the workdir's record of every run (run_info.json).

Each training process appends one entry to <workdir>/run_info.json when its training starts: the
precision the networks compute in and why, the hardware, the start step. When training ends the
entry gets the wall time and the part of it spent in training steps, which is also printed.

Wall time counts from the start of the process (psutil; from the start of `Trainer.train` where
that is unknown). Step time is the time inside the training-loop calls, metrics' host sync
included; the first call also traces and optimises the loop's graph, and that extra time (the first
call minus its steps at the steady per-step time) is counted outside the steps.
"""
import contextlib
import datetime
import json
import os
import time

import tensorflow as tf

from tf_hat_ebm import workdir as workdir_lib
from tpu_utils import hardware

try:
  import psutil  # pylint: disable=g-import-not-at-top
except ImportError:  # pragma: no cover - installed with tensorflow-datasets
  psutil = None

FILENAME = 'run_info.json'


def process_start_time():
  """time.time() at which this process started; None where that is unknown."""
  if psutil is None:
    return None
  try:
    return psutil.Process().create_time()
  except (psutil.Error, OSError):
    return None


def step_split(chunks):
  """(seconds in training steps, seconds of the first call's tracing) of [(seconds, steps)]."""
  if not chunks:
    return 0.0, 0.0
  total = sum(t for t, _ in chunks)
  if len(chunks) == 1:  # no steady call to compare with: all of it counts as steps
    return total, 0.0
  per_step = sum(t for t, _ in chunks[1:]) / sum(n for _, n in chunks[1:])
  tracing = max(chunks[0][0] - chunks[0][1] * per_step, 0.0)
  return total - tracing, tracing


def summary_line(summary):
  s = summary
  since = 'since the process started' if s['wall_from'] == 'process' else 'since training started'
  return (f'wall time {s["wall_s"]:.1f} s ({since}); training steps {s["step_s"]:.1f} s = '
          f'{100 * s["step_fraction"]:.1f}% ({s["steps"]} steps, {s["ms_per_step"]:.1f} ms each); '
          f'outside the steps {s["wall_s"] - s["step_s"]:.1f} s, of which tracing the training '
          f'loop {s["tracing_s"]:.1f} s')


class RunRecord:
  """Clock and record of one training process in a workdir; `write=False` on non-chief workers."""

  def __init__(self, workdir, write=True, log=print):
    self.train_start = time.time()
    self.process_start = process_start_time()
    self.path = os.path.join(workdir, FILENAME)
    self.write, self.log = write, log
    self.chunks = []  # (seconds, steps) of every training-loop call
    self.index = None

  def start(self, task, strategy, step):
    """Prints the precision (for tasks that have one) and appends this run's entry."""
    entry = dict(started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
                 start_step=int(step), **hardware.describe(strategy))
    if task.precision:
      entry.update(precision=task.precision, precision_reason=task.precision_reason)
      self.log(f'precision: {task.precision} ({task.precision_reason})')
    if self.write:
      runs = self._read()
      self.index = len(runs)
      self._write(runs + [entry])

  @contextlib.contextmanager
  def steps(self, num_steps):
    """Times one training-loop call of `num_steps` steps (wrap the host sync of its results too)."""
    start = time.perf_counter()
    yield
    self.chunks.append((time.perf_counter() - start, int(num_steps)))

  def summary(self, now=None):
    now = time.time() if now is None else now
    step_s, tracing_s = step_split(self.chunks)
    steps = sum(n for _, n in self.chunks)
    wall_from = 'process' if self.process_start is not None else 'train'
    wall = now - (self.process_start if self.process_start is not None else self.train_start)
    return dict(steps=steps, wall_s=wall, wall_from=wall_from, train_wall_s=now - self.train_start,
                step_s=step_s, step_fraction=step_s / max(wall, 1e-9), tracing_s=tracing_s,
                ms_per_step=1000 * step_s / max(steps, 1))

  def finish(self, step):
    """Prints the wall time and its part in training steps; completes this run's entry."""
    summary = self.summary()
    self.log(summary_line(summary))
    if self.write and self.index is not None:
      runs = self._read()
      if self.index < len(runs):
        runs[self.index].update(end_step=int(step), **{
            k: (round(v, 3) if isinstance(v, float) else v) for k, v in summary.items()})
        self._write(runs)
    return summary

  def _read(self):
    if not tf.io.gfile.exists(self.path):
      return []
    with tf.io.gfile.GFile(self.path) as f:
      text = f.read()
    try:
      runs = workdir_lib.parse_json(text)['runs']
    except (ValueError, KeyError, TypeError) as e:
      raise ValueError(f'{self.path} is not a run record ({e}); move it out of the workdir') from e
    return list(runs)

  def _write(self, runs):
    workdir_lib.write_atomic(self.path, json.dumps({'runs': runs}, indent=2))
