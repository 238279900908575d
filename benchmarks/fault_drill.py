r"""Kill/resume drill: SIGKILL a training run at random moments, restart it, check every resume.

  python benchmarks/fault_drill.py --cycles=20 --workdir=/tmp/drill

Each cycle starts `experiments/train_synthesis.py` on the workdir and, once it has written a new
checkpoint, kills it with SIGKILL after a random delay (sometimes in the middle of the next write),
then checks that the latest checkpoint loads and is not older than the one the cycle started from,
and records how many steps the kill cost (last step reached - step resumed from). A cycle whose
run exits by itself (a refused resume, the stale lock of the killed run not taken over) fails.
Prints cycles survived, steps lost per cycle, and any failure.
"""
import json
import os
import pty
import random
import re
import signal
import subprocess
import sys
import threading
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'experiments', 'train_synthesis.py')

flags.DEFINE_integer('cycles', 10, 'Kill/resume cycles.')
flags.DEFINE_string('workdir', '/tmp/fault_drill', 'Run directory: new, empty, or one an earlier '
                    'drill made (emptied first; any other directory is refused).')
flags.DEFINE_float('min_delay', 0.0, 'Shortest time after a new checkpoint before a kill (s).')
flags.DEFINE_float('max_delay', 20.0, 'Longest time after a new checkpoint before a kill (s).')
flags.DEFINE_integer('seed', 0, 'Seed of the kill times.')
flags.DEFINE_multi_string('arg', [], 'Extra arguments for the training script.')
FLAGS = flags.FLAGS

# 'step 12/100000 (0%), ...': the trainer's progress on a terminal (redrawn every host call).
_STEP = re.compile(r'step (\d+)/\d+ \(')
MARKER = '.fault_drill'  # what marks a directory this drill made (and may empty)


def last_step(output):
  steps = [int(m) for m in _STEP.findall(output)]
  return steps[-1] if steps else None


def checkpoint_step(workdir):
  """Latest checkpoint step, after checking that it loads; raises if it does not."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  latest = tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints'))
  if latest is None:
    return 0
  reader = tf.train.load_checkpoint(latest)
  for name in reader.get_variable_to_shape_map():
    if 'data_iterator' not in name:
      reader.get_tensor(name)  # raises on a truncated or corrupt file
  return int(reader.get_tensor('step/.ATTRIBUTES/VARIABLE_VALUE'))


def run_until(workdir, args, delay, sig, wait_for_checkpoint=True, timeout=600):
  """Starts training; once it has written a new checkpoint (so that each cycle makes progress
  whatever the machine's speed), waits `delay` seconds more and sends `sig`.
  Returns (output, exit code). The run writes to a pseudo-terminal: its progress line is redrawn
  every host call there (in a file it is printed every 10% or minute), so the output holds the
  last step reached."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONUNBUFFERED='1')
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  before = _latest_name(ckpt_dir)
  master, terminal = pty.openpty()
  chunks = []
  reader = threading.Thread(target=_drain, args=(master, chunks), daemon=True)
  try:
    proc = subprocess.Popen([sys.executable, SCRIPT, f'--workdir={workdir}', *args], env=env,
                            stdin=subprocess.DEVNULL, stdout=terminal, stderr=terminal)
  finally:
    os.close(terminal)
  reader.start()
  deadline = time.time() + timeout
  while (wait_for_checkpoint and proc.poll() is None and time.time() < deadline and
         _latest_name(ckpt_dir) == before):
    time.sleep(0.05)
  try:
    proc.wait(timeout=delay)
  except subprocess.TimeoutExpired:
    proc.send_signal(sig)
    proc.wait()
  reader.join(10)
  os.close(master)
  return b''.join(chunks).decode(errors='replace'), proc.returncode


def _drain(fd, chunks):
  """Reads the pseudo-terminal until the run's side closes (EIO), so the run never blocks."""
  while True:
    try:
      chunk = os.read(fd, 65536)
    except OSError:
      return
    if not chunk:
      return
    chunks.append(chunk)


def _latest_name(ckpt_dir):
  path = os.path.join(ckpt_dir, 'checkpoint')
  try:
    with open(path) as f:
      return f.readline()
  except OSError:
    return None


def drill(workdir, cycles, args, min_delay, max_delay, seed=0, on_cycle=None):
  rng = random.Random(seed)
  records, failures = [], []
  for cycle in range(cycles):
    before = checkpoint_step(workdir)
    out, code = run_until(workdir, args, rng.uniform(min_delay, max_delay), signal.SIGKILL)
    reached = last_step(out) or before
    try:
      resumed = checkpoint_step(workdir)
    except Exception as e:  # pylint: disable=broad-except
      failures.append(f'cycle {cycle}: {type(e).__name__}: {e}')
      break
    # A run that exits by itself (a refused resume, a held lock) or loses a checkpoint fails.
    if code not in (-signal.SIGKILL, 0):
      last = out.strip().splitlines()[-1] if out.strip() else ''
      failures.append(f'cycle {cycle}: exit code {code}: {last}')
      break
    if resumed < before:
      failures.append(f'cycle {cycle}: checkpoint lost: step {before} -> {resumed}')
      break
    records.append(dict(cycle=cycle, started_at=before, reached=reached, checkpoint=resumed,
                        steps_lost=max(reached - resumed, 0), exit_code=code))
    if on_cycle:
      on_cycle(records[-1])
  return records, failures


def main(argv):
  del argv
  marker = os.path.join(FLAGS.workdir, MARKER)
  if os.path.isdir(FLAGS.workdir) and os.listdir(FLAGS.workdir):
    if not os.path.exists(marker):  # not the drill's: never deleted
      raise app.UsageError(f'--workdir={FLAGS.workdir} is not empty and not a fault drill\'s '
                           f'(no {MARKER} in it): choose a new directory')
    import shutil  # pylint: disable=g-import-not-at-top
    shutil.rmtree(FLAGS.workdir)
  os.makedirs(FLAGS.workdir, exist_ok=True)
  with open(marker, 'w') as f:
    f.write('made by benchmarks/fault_drill.py; the next drill on this directory empties it\n')
  start = time.time()
  records, failures = drill(FLAGS.workdir, FLAGS.cycles, FLAGS.arg, FLAGS.min_delay,
                            FLAGS.max_delay, FLAGS.seed, on_cycle=lambda r: print(
                                f'cycle {r["cycle"]:2d}: steps {r["started_at"]} -> '
                                f'{r["reached"]}, killed, resumes at {r["checkpoint"]} '
                                f'(lost {r["steps_lost"]})', flush=True))
  lost = [r['steps_lost'] for r in records]
  print(f'cycles survived: {len(records)}/{FLAGS.cycles}; steps lost per cycle: '
        f'mean {sum(lost) / max(len(lost), 1):.1f}, max {max(lost, default=0)}; '
        f'failures: {len(failures)} {failures}; {time.time() - start:.0f} s')
  print(json.dumps(dict(records=records, failures=failures)))


if __name__ == '__main__':
  app.run(main)
