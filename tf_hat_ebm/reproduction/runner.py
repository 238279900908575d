"""Runs the reproduction's stages, resumably: each the user's own scripts in subprocesses.

A stage is done when its record <out>/<stage>/done.json exists; the record is written only when
every command exited 0, its training reached the configured step (the workdir's checkpoints
against its config.json) and its evaluation finished. A training stopped short (SIGTERM, Ctrl-C,
a kill) is resumed by the next run, never scored. An ablation arm stopped by the runaway guard is
recorded as such (the report counts it only beside a healthy reference). Records of another
scale, size or command line are refused. Independent stages run `jobs` at a time.
"""
import datetime
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import cli
from tf_hat_ebm import run_lib
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.reproduction import children as children_lib
from tf_hat_ebm.reproduction import stages as stages_lib
from tf_hat_ebm.reproduction.report import hms

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The runaway guard's (or the non-finite check's) last line: a stop the ablations may count.
GUARD = re.compile(r'^error: ((runaway|non-finite) .*at step \d+.*)$', re.M)
EXIT_SIGNALLED = (130, 143)  # a training stopped by Ctrl-C / SIGTERM (it saved and said so)


class StageError(ValueError):
  """A stage that failed or cannot be trusted: one line, exit 1."""


def executable(argv):
  """A recorded command as run: `python experiments/<script>` is the script of this checkout (or
  its command, in a wheel), and a shipped config `experiments/configs/...` its file."""
  def resolve(arg):
    key, eq, value = arg.partition('=') if arg.startswith('--') else ('', '', arg)
    if value.startswith('experiments/configs/'):
      value = os.path.join(cli.configs_dir(), value[len('experiments/configs/'):])
    return key + eq + value

  if argv[0] == 'python' and len(argv) > 1 and argv[1].startswith('experiments/'):
    return cli.script_argv(argv[1][len('experiments/'):]) + [resolve(a) for a in argv[2:]]
  return [sys.executable if argv[0] == 'python' else argv[0]] + [resolve(a) for a in argv[1:]]


def resolve_jobs(jobs, scale, cpus=None):
  """--jobs as a number: 'auto' is one at paper scale (one accelerator), else up to 2 per
  machine of 2 cores or more (the digits stages each use about one core well)."""
  cpus = cpus or os.cpu_count() or 1
  if jobs in (None, '', 'auto'):
    return 1 if scale == 'paper' else max(1, min(cpus, 2))
  try:
    value = int(jobs)
  except ValueError:
    value = 0
  if value < 1:
    raise ValueError(f'--jobs={jobs}: give a number >= 1 or auto')
  return value


def training_progress(workdir):
  """(last checkpoint step, configured training.num_steps or None) of a training workdir."""
  steps = checkpoints.list_checkpoints(os.path.join(workdir, 'checkpoints'))
  try:
    with open(os.path.join(workdir, 'config.json')) as f:
      target = json.load(f)['training']['num_steps']
  except (OSError, ValueError, KeyError, TypeError):
    target = None
  return (steps[-1] if steps else 0), target


def run_precision(workdir):
  """The precision the workdir's last training process computed in (run_info.json), or None."""
  try:
    with open(os.path.join(workdir, 'run_info.json')) as f:
      return json.load(f)['runs'][-1].get('precision')
  except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
    return None


def file_sha256(path):
  try:
    with open(path, 'rb') as f:
      return hashlib.sha256(f.read()).hexdigest()
  except OSError:
    return None


def write_json(path, data):
  """The project's atomic JSON write (run_lib.write_json), its failures as one-line errors."""
  _written(path, lambda: run_lib.write_json(path, data))


def write_text(path, text):
  _written(path, lambda: workdir_lib.write_atomic(path, text))


def _written(path, write):
  try:
    write()
  except tf.errors.OpError as e:
    raise PermissionError(f'cannot write {path}: {e.message}') from None
  except OSError as e:
    raise PermissionError(f'cannot write {path}: {e.strerror or e}') from None


def describe(scale, size):
  return f'scale {scale}' + (f', config size {size}' if size else '')


def read_record(path, stage, options):
  """The record of a finished stage, or None; refuses one it cannot trust (one line)."""
  if not os.path.lexists(path):
    return None
  try:
    with open(path) as f:
      record = json.load(f)
    if not isinstance(record, dict):
      raise ValueError(f'a JSON {type(record).__name__}, not an object')
  except (OSError, ValueError) as e:
    raise StageError(f'{path} is not a stage record ({cli.one_line(e)}): delete it to rerun '
                     f'the stage') from None
  if (record.get('scale'), record.get('size')) != (options.scale, options.size):
    raise StageError(
        f'{path} holds a result of {describe(record.get("scale"), record.get("size"))}, not '
        f'{describe(options.scale, options.size)}: use another --out (its numbers are never '
        'reported under this one)')
  if record.get('commands') != stage.command_lines():
    raise StageError(f'{path} was made by other commands (another config, seed or flags): use '
                     f'another --out, or delete {os.path.dirname(path)} to rerun the stage')
  return record


class Runner:
  """Runs `stages` of `options` in options.out; `run_command(argv, log, env)` -> exit code
  (default: a subprocess in --out, stopped with the runner)."""

  def __init__(self, stages, options, run_command=None, print_fn=print):
    self.stages, self.o, self.out = stages, options, options.out
    self.run_command = run_command or self._subprocess
    self.print = print_fn
    self.jobs = resolve_jobs(options.jobs, options.scale)
    self.records, self.errors, self.stopping = {}, [], False
    self.children, self.lock = set(), threading.Lock()
    self.start = time.time()
    self.measured, self.estimated = 0.0, 0.0  # of the stages run now: rescales the ETA

  # ---- one stage --------------------------------------------------------------------------------
  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def env(self, side_by_side=1):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [PACKAGE_ROOT] + [p for p in [os.environ.get('PYTHONPATH')] if p]))
    if side_by_side > 1:
      # Stages side by side share the cores: a thread pool each, not several fighting. With a
      # core each, one inter-op thread too: a second ran the digits steps 5% slower.
      threads = max(1, (os.cpu_count() or 1) // side_by_side)
      env.setdefault('TF_NUM_INTRAOP_THREADS', str(threads))
      if threads == 1:
        env.setdefault('TF_NUM_INTEROP_THREADS', '1')
    return env

  def _subprocess(self, argv, log, env):
    with self.lock:  # with stop(): a child starts before it (and is stopped) or not at all
      if self.stopping:
        return -signal.SIGTERM
      # Started and waited for in this thread: it dies with the runner even on a SIGKILL.
      proc = children_lib.Child(argv, cwd=self.out, stdout=log, stderr=subprocess.STDOUT,
                                env=env)
      self.children.add(proc)
    try:
      return proc.wait()
    finally:
      with self.lock:
        self.children.discard(proc)

  def skip_reason(self, stage, output):
    """Why a command need not run: its output exists, or its training is complete."""
    if output is not None:
      return 'skipped: output exists' if os.path.exists(self.path(output)) else None
    step, target = training_progress(self.path(stage.workdir))
    return f'skipped: trained to step {step}' if target and step >= target else None

  def run_stage(self, stage, side_by_side=1):
    """Runs the commands of `stage` that are not done (`side_by_side` stages at once); its
    record, or None when stopped."""
    os.makedirs(self.path(stage.name), exist_ok=True)
    exits, t0 = [], time.time()
    with open(self.path(stage.name, 'log.txt'), 'a') as log:
      for cmd, line, output in zip(stage.commands, stage.command_lines(), stage.outputs):
        reason = self.skip_reason(stage, output)
        if reason or self.stopping:
          exits.append(dict(command=line, exit=reason or 'not run: stopped'))
          continue
        log.write(f'$ {line}\n')
        log.flush()
        offset, started = log.tell(), time.time()
        code = self.run_command(executable(cmd), log, self.env(side_by_side))
        exits.append(dict(command=line, exit=code, seconds=round(time.time() - started, 1)))
        if code != 0:
          exits[-1]['error'] = self.last_error(stage, offset)
          if not stage.keep_going:
            break
        elif output is None and not self.skip_reason(stage, output):
          break  # stopped short of its step (SIGTERM saves and exits 0): nothing to evaluate
    return self.judge(stage, exits, time.time() - t0)

  def last_error(self, stage, offset):
    with open(self.path(stage.name, 'log.txt'), errors='replace') as f:
      f.seek(offset)
      lines = [x for x in f.read().splitlines() if x.startswith('error: ')]
    return lines[-1] if lines else None

  def judge(self, stage, exits, seconds):
    """The stage's record when it finished (or the guard stopped an ablation arm), else an
    error; None when the runner is stopping (the stage resumes on the next run)."""
    record = dict(stage=stage.name, scale=self.o.scale, size=self.o.size, kind=stage.kind,
                  commands=stage.command_lines(), exits=exits, seconds=round(seconds, 1),
                  finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec='seconds'))
    if stage.label:
      record['label'] = stage.label
    if stage.kind in stages_lib.TRAINED:
      step, target = training_progress(self.path(stage.workdir))
      record.update(step=step, num_steps=target, precision=self.o.training_precision(),
                    computed_in=run_precision(self.path(stage.workdir)),
                    config=dict(path=f'{stage.workdir}/config.json',
                                sha256=file_sha256(self.path(stage.workdir, 'config.json'))))
    failed = [e for e in exits if not isinstance(e['exit'], str) and e['exit'] != 0]
    if self.stopping:
      return None
    if failed and stage.keep_going:
      record['failed_commands'] = [e['command'] for e in failed]
    elif failed:
      return self.failure(stage, record, failed[0])
    elif stage.kind in stages_lib.TRAINED and not (record['num_steps']
                                                   and record['step'] >= record['num_steps']):
      raise StageError(f'stage {stage.name} stopped at step {record["step"]} of '
                       f'{record["num_steps"]} although its training exited 0 (stopped by a '
                       'signal?): rerun to resume it')
    record['result'] = self.result(stage)
    return record

  def failure(self, stage, record, failed):
    code, error = failed['exit'], failed.get('error') or ''
    log = self.path(stage.name, 'log.txt')
    if code < 0 or code in EXIT_SIGNALLED:
      how = f'signal {-code}' if code < 0 else f'exit {code}'
      raise StageError(f'stage {stage.name} was stopped ({how}) running {failed["command"]}: '
                       'rerun to resume it')
    guard = GUARD.search(error + '\n') if error else None
    if guard and (stage.reference or stage.guard_stop_is_result):
      record.update(failed=True, guard=guard.group(1))
      return record
    raise StageError(f'stage {stage.name} failed (exit {code}) running {failed["command"]}: '
                     f'{error[len("error: "):] or "see the log"} (log: {log}); fix the cause '
                     'and rerun')

  def result(self, stage):
    """The numbers of a finished stage: FIDs per method (mean and runs), or AUROC per set."""
    if stage.result == 'fid':
      with open(self.path(stage.workdir, 'fid.json')) as f:
        saved = json.load(f)
      out = {}
      for method in ('hat_ebm', 'generator', 'ddls'):
        if method in saved:
          out[method] = sum(saved[method]) / len(saved[method])
          out[method + '_runs'] = saved[method]
      out['data'] = saved.get('data_test_vs_train')
      plateau_path = self.path(stage.workdir, stages_lib.PLATEAU_FID)
      if os.path.exists(plateau_path):  # the plateau rule's checkpoint (plateau.py)
        with open(plateau_path) as f:
          earlier = json.load(f)
        out['plateau'] = dict(step=earlier.get('step'), end_step=saved.get('step'),
                              **{f'{m}_runs': earlier[m] for m in ('hat_ebm', 'generator')
                                 if m in earlier})
      return out
    if stage.result == 'compare':  # compare_baselines.py: {method: [FID, its std]}
      with open(self.path(stage.outputs[-1])) as f:
        return {k: [v['fid'], v.get('fid_std')] for k, v in json.load(f).items()
                if isinstance(v, dict) and 'fid' in v}
    if stage.result == 'json':  # a stage's whole JSON output (the calibration)
      with open(self.path(stage.outputs[-1])) as f:
        return json.load(f)
    if stage.result == 'ood':
      with open(self.path(stage.outputs[-1])) as f:
        return {k: v['auroc'] for k, v in json.load(f)['sets'].items()}
    return {}

  # ---- every stage ------------------------------------------------------------------------------
  def progress(self, i, stage, text):
    with self.lock:
      self.print(f'[{i + 1}/{len(self.stages)}] {stage.name}: {text}', flush=True)

  def eta(self):
    remaining = sum(stages_lib.estimate(s, self.o) for s in self.stages
                    if s.name not in self.records)
    ratio = self.measured / self.estimated if self.estimated else 1.0
    return hms(remaining * ratio / self.jobs)

  def worker(self, i, stage, done, side_by_side):
    try:
      record = self.run_stage(stage, side_by_side)
      if record is not None:
        write_json(self.path(stage.name, 'done.json'), record)
      done.put((i, stage, record, None))
    except Exception as e:  # pylint: disable=broad-except
      done.put((i, stage, None, e))  # raised again in the main thread

  def ready(self, pending, running):
    finished = set(self.records)
    return [(i, s) for i, s in pending
            if all(a in finished for a in s.after) and len(running) < self.jobs]

  def run_all(self):
    """Runs every stage not done, a progress line each; returns {stage: record}."""
    pending = []
    for i, stage in enumerate(self.stages):
      record = read_record(self.path(stage.name, 'done.json'), stage, self.o)
      if record is None:
        pending.append((i, stage))
        continue
      self.records[stage.name] = record
      self.progress(i, stage, f'done (skipped){result_line(record)}')
    running, done = {}, queue.Queue()
    with stop_on_sigterm():
      try:
        self.loop(pending, running, done)
      except KeyboardInterrupt:
        self.stop(running, done)
        raise
    if pending and not self.errors:
      raise StageError(f'stages {", ".join(s.name for _, s in pending)} wait for stages that '
                       'did not finish')
    if self.errors:
      more = f' (and {len(self.errors) - 1} more)' if len(self.errors) > 1 else ''
      raise StageError(f'{cli.one_line(self.errors[0])}{more}')
    return {s.name: self.records[s.name] for s in self.stages if s.name in self.records}

  def loop(self, pending, running, done):
    while pending or running:
      starting = self.ready(pending, running)[:self.jobs - len(running)] if not self.errors else []
      side_by_side = len(running) + len(starting)
      for i, stage in starting:
        pending.remove((i, stage))
        self.progress(i, stage, f'running (elapsed {hms(time.time() - self.start)}, ETA '
                      f'{self.eta()}; log {self.path(stage.name, "log.txt")})')
        running[stage.name] = threading.Thread(target=self.worker, daemon=True,
                                               args=(i, stage, done, side_by_side))
        running[stage.name].start()
      if not running:
        break  # the rest waits for a stage that failed
      self.collect(running, done)

  def collect(self, running, done):
    while True:
      try:
        i, stage, record, error = done.get(timeout=0.2)  # short: signals reach the main thread
        break
      except queue.Empty:
        continue
    running.pop(stage.name).join()
    if error is not None:
      if not isinstance(error, (StageError, OSError, ValueError)):
        raise error
      self.errors.append(error)
      self.progress(i, stage, f'FAILED: {cli.one_line(error)}')
      return
    self.records[stage.name] = record
    self.measured += record['seconds']
    self.estimated += stages_lib.estimate(stage, self.o)
    state = 'stopped by the guard (recorded)' if record.get('failed') else 'done'
    self.progress(i, stage, f'{state} in {hms(record["seconds"])}{result_line(record)}')

  def stop(self, running, done, grace=120):
    """Ctrl-C / SIGTERM: every child gets SIGTERM (a training saves and exits), then SIGKILL."""
    with self.lock:
      self.stopping = True
      children = list(self.children)
    for proc in children:
      proc.send_signal(signal.SIGTERM)
    deadline = time.time() + grace
    for proc in children:
      try:
        proc.wait(max(deadline - time.time(), 0.1))
      except subprocess.TimeoutExpired:
        proc.kill()
    for thread in running.values():
      thread.join()


class stop_on_sigterm:  # pylint: disable=invalid-name
  """SIGTERM is handled as Ctrl-C (KeyboardInterrupt) in the main thread while inside."""

  def __enter__(self):
    self.previous = None
    if threading.current_thread() is threading.main_thread():
      self.previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    return self

  def __exit__(self, *exc):
    if self.previous is not None:
      signal.signal(signal.SIGTERM, self.previous)
    return False


def _raise_interrupt(signum, frame):
  del signum, frame
  raise KeyboardInterrupt


def result_line(record):
  """'; hat_ebm 11.29, generator 26.24' of a record's numbers (not the per-run lists or the
  data's own FID), the guard's stop, or ''."""
  if record.get('failed'):
    return f'; {record.get("guard", "failed")}'
  numbers = [f'{k} {v:.2f}' for k, v in (record.get('result') or {}).items()
             if isinstance(v, (int, float)) and k != 'data']
  return f'; {", ".join(numbers)}' if numbers else ''
