r"""Reproduction drill: kill reproduce.py with SIGTERM and SIGKILL at random moments, rerun it to
the end, and compare its report with an uninterrupted run's.

  python benchmarks/reproduce_drill.py --kills=8 --out=/tmp/reproduce_drill

First an uninterrupted run of the small reproduction (`--size=tiny`, `--parts`, `--seeds`,
`--jobs=1`) in <out>/reference, timed; then per kill a fresh <out>/kill<i>: reproduce.py is started,
sent the signal (to reproduce.py alone, not its process group) after a seeded random fraction of
the reference's time, and rerun with the same command until it exits. A kill fails when a child of
the killed run outlives it (an orphan), when the rerun does not finish (exit != 0: a stale lock, a
half-written stage it cannot resume), or when its report differs from the reference's.

"The same report": the same stages done, each record's scale, size, kind, commands, step reached,
configured steps and result; every command of the rerun exited 0 or was skipped as done; the same
config.json per stage (its output directory's path aside); and report.json equal but for times and
exit states. The numbers (every FID) must be bitwise equal: the project's resume restores the
networks, optimizers, RNG, bank and input position (docs/fault_tolerance.md), a training killed
before its first checkpoint starts over from the same seed, and the FID is of a fixed sample seed,
so an interrupted run computes what the uninterrupted one did (--tolerance loosens this).
Prints a table and exits 1 when any kill failed.
"""
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time

from absl import app
from absl import flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'experiments', 'reproduce.py')
MARKER = '.reproduce_drill'  # what marks a directory this drill made (and may empty)
# Fields of a record or report that differ between two runs of the same stages by design.
VOLATILE = ('seconds', 'finished', 'exits', 'sha256', 'body_sha256', 'files')

flags.DEFINE_integer('kills', 8, 'Kills in all, half SIGTERM and half SIGKILL (seeded order).',
                     lower_bound=1)
flags.DEFINE_integer('seed', 0, 'Seed of the kill moments and signals.')
flags.DEFINE_string('out', '/tmp/reproduce_drill', 'Directory of the runs: new, empty, or one an '
                    'earlier drill made (emptied first; any other directory is refused).')
flags.DEFINE_list('parts', ['synthesis'], 'reproduce.py --parts of the small reproduction.')
flags.DEFINE_list('seeds', ['0'], 'reproduce.py --seeds.')
flags.DEFINE_float('tolerance', 0.0, 'Largest difference of a number allowed (0: bitwise equal).',
                   lower_bound=0.0)
flags.DEFINE_integer('timeout', 3600, 'Seconds a run may take before the drill gives up.',
                     lower_bound=1)
FLAGS = flags.FLAGS


def command(out):
  return [sys.executable, SCRIPT, '--size=tiny', f'--seeds={",".join(FLAGS.seeds)}',
          f'--parts={",".join(FLAGS.parts)}', '--jobs=1', f'--out={out}']


def env():
  return dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=os.pathsep.join(
      [ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))


def run_to_end(out, log):
  """Runs the reproduction in `out` until it exits: (exit code, last stderr line, seconds)."""
  start = time.time()
  with open(log, 'w') as f:
    result = subprocess.run(command(out), stdout=f, stderr=subprocess.PIPE, text=True, env=env(),
                            timeout=FLAGS.timeout, check=False)
  lines = result.stderr.strip().splitlines()
  return result.returncode, lines[-1] if lines else '', time.time() - start


def descendants(pid):
  """Every live descendant of `pid` (Linux /proc; empty elsewhere)."""
  parents = {}
  for name in os.listdir('/proc') if os.path.isdir('/proc') else ():
    if name.isdigit():
      try:
        with open(f'/proc/{name}/stat') as f:
          parents[int(name)] = int(f.read().rsplit(')', 1)[1].split()[1])
      except (OSError, ValueError, IndexError):
        continue
  found, frontier = [], [pid]
  while frontier:
    children = [p for p, parent in parents.items() if parent in frontier]
    found += children
    frontier = children
  return found


def alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  try:  # a zombie is dead (its parent has yet to reap it)
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
  except OSError:
    return True


def kill_at(out, log, sig, delay):
  """Starts the reproduction, sends `sig` to reproduce.py alone after `delay` s; (exit code,
  stages done at the kill, the scripts running then, orphans left 10 s after its exit)."""
  with open(log, 'w') as f:
    proc = subprocess.Popen(command(out), stdout=f, stderr=subprocess.STDOUT, env=env())
    children = []
    deadline = time.time() + delay
    while time.time() < deadline and proc.poll() is None:
      children = sorted(set(children) | set(descendants(proc.pid)))
      time.sleep(0.05)
    done = done_stages(out)
    if proc.poll() is None:
      children = sorted(set(children) | set(descendants(proc.pid)))
      proc.send_signal(sig)
    code = proc.wait(FLAGS.timeout)
  running = running_at_kill(out)
  grace = time.time() + 10
  while time.time() < grace and any(alive(p) for p in children):
    time.sleep(0.1)
  return code, done, running, [p for p in children if alive(p)]


def running_at_kill(out):
  """'train_synthesis' (the script each unfinished stage started last, from its log) or '-'."""
  started = []
  for stage in sorted(os.listdir(out)) if os.path.isdir(out) else []:
    log = os.path.join(out, stage, 'log.txt')
    if os.path.isfile(log) and not os.path.exists(os.path.join(out, stage, 'done.json')):
      with open(log, errors='replace') as f:
        lines = [x.split()[2] for x in f if x.startswith('$ ') and len(x.split()) > 2]
      if lines:
        started.append(os.path.splitext(os.path.basename(lines[-1]))[0])
  return ', '.join(started) or '-'


def done_stages(out):
  return sorted(d for d in os.listdir(out) if os.path.isfile(os.path.join(out, d, 'done.json'))
                ) if os.path.isdir(out) else []


def normalized(value, out):
  """`value` without the fields that differ by design, `out` in strings replaced by OUT."""
  if isinstance(value, dict):
    return {k: normalized(v, out) for k, v in value.items() if k not in VOLATILE}
  if isinstance(value, list):
    return [normalized(v, out) for v in value]
  if isinstance(value, str):
    return value.replace(out, 'OUT')
  return value


def differences(a, b, path=''):
  """Where two normalized JSON values differ (numbers beyond --tolerance): a list of paths."""
  if isinstance(a, dict) and isinstance(b, dict):
    return [d for k in sorted(set(a) | set(b)) for d in (
        differences(a.get(k), b.get(k), f'{path}.{k}') if k in a and k in b else [f'{path}.{k}'])]
  if isinstance(a, list) and isinstance(b, list):
    if len(a) != len(b):
      return [f'{path} (length)']
    return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f'{path}[{i}]')]
  numbers = (int, float)
  if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
    same = (a == b or abs(a - b) <= FLAGS.tolerance
            or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))
    return [] if same else [f'{path} ({a!r} vs {b!r})']
  return [] if a == b else [path or '(top)']


def load(path):
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    return f'unreadable: {e}'


def compare(reference, out):
  """What differs between the reproduction in `out` and the reference's (empty: the same)."""
  found = []
  if done_stages(out) != done_stages(reference):
    found.append(f'stages done {done_stages(out)} vs {done_stages(reference)}')
  for stage in done_stages(reference):
    record = load(os.path.join(out, stage, 'done.json'))
    exits = record.get('exits', []) if isinstance(record, dict) else []
    bad = [e for e in exits if e['exit'] != 0 and not str(e['exit']).startswith('skipped')]
    found += [f'{stage}: {e["command"].split()[1]} exit {e["exit"]}' for e in bad]
    for name in ('done.json', 'config.json'):
      path = os.path.join(stage, name)
      ours = os.path.join(out, path)
      if name == 'config.json' and not os.path.exists(os.path.join(reference, path)):
        continue
      found += [f'{path}{d}' for d in differences(
          normalized(load(os.path.join(reference, path)), reference),
          normalized(load(ours), out))]
  found += [f'report.json{d}' for d in differences(
      normalized(load(os.path.join(reference, 'report.json')), reference),
      normalized(load(os.path.join(out, 'report.json')), out))]
  return found


def claim(out):
  marker = os.path.join(out, MARKER)
  if os.path.isdir(out) and os.listdir(out):
    if not os.path.exists(marker):  # not the drill's: never deleted
      raise app.UsageError(f'--out={out} is not empty and not a reproduction drill\'s (no '
                           f'{MARKER} in it): choose a new directory')
    shutil.rmtree(out)
  os.makedirs(out)
  with open(marker, 'w') as f:
    f.write('made by benchmarks/reproduce_drill.py; the next drill on this directory empties it\n')


def main(argv):
  del argv
  out = os.path.abspath(FLAGS.out)
  claim(out)
  start = time.time()
  reference = os.path.join(out, 'reference')
  code, last, seconds = run_to_end(reference, os.path.join(out, 'reference.log'))
  if code != 0:
    raise app.UsageError(f'the uninterrupted reproduction failed (exit {code}): {last}')
  print(f'reference: {len(done_stages(reference))} stages in {seconds:.0f} s', flush=True)
  rng = random.Random(FLAGS.seed)
  signals = ([signal.SIGTERM, signal.SIGKILL] * FLAGS.kills)[:FLAGS.kills]
  rng.shuffle(signals)
  rows, failed = [], 0
  for i, sig in enumerate(signals):
    run = os.path.join(out, f'kill{i}')
    delay = rng.uniform(0.0, seconds)
    code, done, running, orphans = kill_at(run, os.path.join(out, f'kill{i}.log'), sig, delay)
    rerun, last, rerun_seconds = run_to_end(run, os.path.join(out, f'kill{i}.rerun.log'))
    diff = compare(reference, run) if rerun == 0 else []
    ok = rerun == 0 and not orphans and not diff
    failed += not ok
    rows.append(dict(kill=i, signal=signal.Signals(sig).name, at=round(delay, 1), exit=code,
                     done_at_kill=len(done), running=running, orphans=len(orphans),
                     rerun_exit=rerun, rerun_seconds=round(rerun_seconds),
                     same_report=rerun == 0 and not diff,
                     problems=([f'rerun: {last}'] if rerun else []) + (
                         [f'orphans {orphans}'] if orphans else []) + diff[:5]))
    r = rows[-1]
    print(f'kill {i}: {r["signal"]} at {r["at"]} s (exit {code}, {len(done)} stages done, '
          f'running {running}, {len(orphans)} orphans); rerun exit {rerun} in '
          f'{r["rerun_seconds"]} s; same report: {r["same_report"]}'
          f'{"; " + "; ".join(r["problems"]) if r["problems"] else ""}', flush=True)
  print('\n| kill | signal | at (s) | exit | stages done at kill | running at kill | orphans | '
        'rerun exit | rerun (s) | same report |')
  print('|---|---|---|---|---|---|---|---|---|---|')
  for r in rows:
    print(f'| {r["kill"]} | {r["signal"]} | {r["at"]} | {r["exit"]} | {r["done_at_kill"]} | '
          f'{r["running"]} | '
          f'{r["orphans"]} | {r["rerun_exit"]} | {r["rerun_seconds"]} | '
          f'{"yes" if r["same_report"] else "NO"} |')
  print(f'\nkills survived: {len(rows) - failed}/{len(rows)} (reference {seconds:.0f} s; '
        f'{time.time() - start:.0f} s in all)')
  print(json.dumps(dict(rows=rows)))
  if failed:
    sys.exit(1)


if __name__ == '__main__':
  app.run(main)
