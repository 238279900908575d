"""Runs the reproduction's stages, resumably: each the user's own scripts in subprocesses.

A stage's record (<out>/<stage>/done.json) is written only when every command exited 0, its
training reached the configured step and its evaluation finished; records.py checks it against
the files on the next run. A training stopped short (SIGTERM, Ctrl-C, a kill) is resumed by the
next run, never scored. A Hat EBM stopped by the runaway guard is recorded as such and scored
at its last healthy checkpoint (the report counts an ablation arm's stop only beside a healthy
reference). Independent stages run `jobs` at a time (scheduler.py).
"""
import datetime
import os
import re
import signal
import subprocess
import sys
import threading
import time

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import interrupts
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.errors import one_line
from tf_hat_ebm.reproduction import children as children_lib
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import records as records_lib
from tf_hat_ebm.reproduction import stages as stages_lib
from tf_hat_ebm.reproduction.records import StageError, config_body_sha256, file_sha256
from tf_hat_ebm.reproduction.report import hms
from tf_hat_ebm.reproduction.scheduler import Scheduler

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The runaway guard's (or the non-finite check's) last line: a stop the ablations may count.
GUARD = re.compile(r'^error: ((runaway|non-finite) .*at step \d+.*)$', re.M)
EXIT_SIGNALLED = (130, 143)  # a training stopped by Ctrl-C / SIGTERM (it saved and said so)
ETA_PRIOR = 1800.0  # seconds of the stage table's pace in the ETA's rescaling


def executable(cmd):
  """A command as run: `python experiments/<script>` is the script of this checkout (or its
  console command, in a wheel), and a shipped config `experiments/configs/...` its file."""
  config = cmd.config
  if config and config.startswith('experiments/configs/'):
    config = os.path.join(config_lib.configs_dir(), config[len('experiments/configs/'):])
  argv = cmd.argv(config)
  script = cmd.console()
  if script is None:
    return [sys.executable] + argv[1:]
  scripts = os.path.join(PACKAGE_ROOT, 'experiments')
  if os.path.isfile(os.path.join(scripts, 'train.py')):
    return [sys.executable, os.path.join(scripts, script)] + argv[2:]
  name = 'train' if script.startswith('train') else plan.CONSOLE[script]
  return [sys.executable, '-c', f'from tf_hat_ebm import cli; cli.main({name!r})'] + argv[2:]


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


def write_json(path, data):
  """The project's atomic JSON write (result_files.write_json), its failures as one-line errors."""
  _written(path, lambda: result_files.write_json(path, data))


def write_text(path, text):
  _written(path, lambda: workdir_lib.write_atomic(path, text))


def _written(path, write):
  try:
    write()
  except OSError as e:
    raise PermissionError(f'cannot write {path}: {e.strerror or e}') from None
  except Exception as e:  # TensorFlow's file errors (tf.errors.OpError), named without importing it
    if type(e).__module__.startswith('tensorflow'):
      raise PermissionError(f'cannot write {path}: {getattr(e, "message", e)}') from None
    raise


class Runner:
  """Runs `stages` of `options` in options.out; `run_command(argv, log, env)` -> exit code
  (default: a subprocess in --out, stopped with the runner)."""

  def __init__(self, stages, options, run_command=None, print_fn=print):
    self.stages, self.o, self.out = stages, options, options.out
    self.run_command = run_command or self._subprocess
    self.print = print_fn
    self.jobs = resolve_jobs(options.jobs, options.scale)
    self.records, self.errors, self.stopping = {}, [], False
    self.disk = records_lib.Disk(self.out, self.records)
    self.redo = {}  # stage -> outputs to write again (a record that no longer holds)
    self.children, self.lock = set(), threading.Lock()
    self.start = time.time()
    self.measured, self.estimated = 0.0, 0.0  # of the stages run now: rescales the ETA
    self.resumed = {}  # stage -> True or 'seconds unknown' when earlier runs began it
    self.scheduler = Scheduler(self.jobs, self.records.__contains__, self.work, self.started,
                               self.finished)

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

  # ---- one stage --------------------------------------------------------------------------------
  def run_stage(self, stage, side_by_side=1):
    """Runs the commands of `stage` that are not done (`side_by_side` stages at once); its
    record, or None when stopped."""
    os.makedirs(self.path(stage.name), exist_ok=True)
    earlier, self.resumed[stage.name] = self.earlier_attempts(stage)
    write_json(self.path(stage.name, 'attempt.json'), dict(start=time.time(), earlier=earlier))
    exits, t0 = [], time.time() - earlier  # the record's seconds count every attempt
    with open(self.path(stage.name, 'log.txt'), 'a') as log:
      for planned, output in zip(stage.commands, stage.outputs):
        cmd = self.disk.with_checkpoint(stage, planned)
        if cmd is None:
          exits.append(dict(command=planned.line(), exit='not run: its run kept too few '
                            'checkpoints before its end'))
          continue
        key, reason = cmd.line(), self.disk.skip_reason(stage, output, cmd,
                                                        self.redo.get(stage.name, ()))
        if reason or self.stopping:
          exits.append(dict(command=key, exit=reason or 'not run: stopped'))
          continue
        if output is not None and self.disk.exists(output):
          cmd = cmd.overwriting()  # its own earlier output, of another step
        exits.append(self.execute(stage, cmd, log, side_by_side))
        if exits[-1]['exit'] != 0:
          if self.guard_stop(stage, exits[-1]) and stage.result.scored:
            # A run the guard stopped is scored at its last healthy checkpoint: the latest one
            # (the guard holds checkpoints back while it counts), and the plateau rule's if kept.
            return self.rescore(stage, exits, log, side_by_side, t0)
          if not stage.keep_going:
            break
        elif output is None and not self.disk.skip_reason(stage, output):
          break  # stopped short of its step (SIGTERM saves and exits 0): nothing to evaluate
        elif stage.kind.tracked:
          write_json(self.path(stage.name, 'progress.json'), dict(
              self.disk.made(stage), **{key: self.disk.making(stage, output)}))
    return self.judge(stage, exits, time.time() - t0)

  def earlier_attempts(self, stage):
    """(seconds, resumed) of the attempts at `stage` that earlier runs did not finish. A killed
    runner writes nothing, so an attempt ends at its log's last write; a stage begun before
    attempts were kept (a log, no attempt.json) is resumed with its earlier seconds unknown."""
    log, attempt = self.path(stage.name, 'log.txt'), self.path(stage.name, 'attempt.json')
    if os.path.exists(self.path(stage.name, 'done.json')) or not os.path.exists(log):
      return 0.0, False  # a first attempt, or a finished stage evaluated again
    if not os.path.exists(attempt):
      return 0.0, 'seconds unknown'
    try:
      last = records_lib.read_json(attempt)
      return float(last['earlier']) + max(0.0, os.path.getmtime(log) - float(last['start'])), True
    except (OSError, ValueError, KeyError, TypeError):
      return 0.0, 'seconds unknown'

  def guard_stop(self, stage, failed):
    """The guard's message when `failed` (an exit) is a guard stop the stage may record."""
    error = failed.get('error') or ''
    guard = GUARD.search(error + '\n') if error else None
    return guard and (stage.reference or stage.guard_stop_is_result) and guard.group(1)

  def rescore(self, stage, exits, log, side_by_side, t0):
    """After a guard stop: the stage's scoring commands on the checkpoints the run kept, then
    its record (failed, with the last healthy checkpoint's result)."""
    for cmd, output in list(zip(stage.commands, stage.outputs))[len(exits):]:
      checkpoint = cmd.checkpoint_path()
      if self.stopping or (checkpoint and not self.disk.exists(checkpoint + '.index')):
        exits.append(dict(command=cmd.line(), exit='not run: the guard stopped the run '
                          'before this checkpoint' if not self.stopping else 'not run: stopped'))
        continue
      cmd = cmd.overwriting() if self.disk.exists(output) else cmd
      exits.append(self.execute(stage, cmd, log, side_by_side))
      if exits[-1]['exit'] != 0:
        break
    return self.judge(stage, exits, time.time() - t0)

  def execute(self, stage, cmd, log, side_by_side):
    """Runs one command of `stage` into its log: its exit ({command, exit, seconds}, and the
    last `error:` line when it failed)."""
    line = cmd.line()
    log.write(f'$ {line}\n')
    log.flush()
    offset, started = log.tell(), time.time()
    code = self.run_command(executable(cmd), log, self.env(side_by_side))
    done = dict(command=line, exit=code, seconds=round(time.time() - started, 1))
    if code != 0:
      done['error'] = self.last_error(stage, offset)
    return done

  def last_error(self, stage, offset):
    with open(self.path(stage.name, 'log.txt'), errors='replace') as f:
      f.seek(offset)
      lines = [x for x in f.read().splitlines() if x.startswith('error: ')]
    return lines[-1] if lines else None

  def new_record(self, stage, exits, seconds):
    """What every record holds: the stage, its commands and their exits, its training's step."""
    record = dict(stage=stage.name, scale=self.o.scale, size=self.o.size, kind=stage.kind.name,
                  commands=stage.command_lines(), exits=exits, seconds=round(seconds, 1),
                  finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec='seconds'))
    if stage.label:
      record['label'] = stage.label
    if self.resumed.get(stage.name):
      record['resumed'] = self.resumed[stage.name]
    if stage.kind.trains:
      step, target = records_lib.training_progress(self.path(stage.workdir))
      config = self.path(stage.workdir, 'config.json')
      record.update(step=step, num_steps=target, precision=self.o.training_precision(),
                    computed_in=records_lib.run_precision(self.path(stage.workdir)),
                    config=dict(path=f'{stage.workdir}/config.json', sha256=file_sha256(config),
                                body_sha256=config_body_sha256(config)))
    if stage.kind.draws_scored:  # the checkpoint each model's figures were drawn from
      record['models'] = {c.workdir: self.records[c.workdir]['step'] for c in stage.commands
                          if isinstance(self.records.get(c.workdir, {}).get('step'), int)}
    return record

  def judge(self, stage, exits, seconds):
    """The stage's record when it finished (or the guard stopped an ablation arm), else an
    error; None when the runner is stopping (the stage resumes on the next run)."""
    record = self.new_record(stage, exits, seconds)
    # exits[i] is the exit of stage.commands[i]: one each, in order, until a failure stops them
    failed = [(c, e) for c, e in zip(stage.commands, exits)
              if not isinstance(e['exit'], str) and e['exit'] != 0]
    if self.stopping:
      return None
    excused = [e for c, e in failed if stage.keep_going and self.disk.of_stopped_model(c)]
    if failed and len(excused) == len(failed):
      record['failed_commands'] = [e['command'] for e in excused]
    elif failed:
      return self.failure(stage, record, [e for _, e in failed if e not in excused][0])
    elif stage.kind.trains and not (record['num_steps'] and record['step'] >= record['num_steps']):
      raise StageError(f'stage {stage.name} stopped at step {record["step"]} of '
                       f'{record["num_steps"]} although its training exited 0 (stopped by a '
                       'signal?): rerun to resume it')
    return self.disk.with_numbers(stage, record)

  def failure(self, stage, record, failed):
    guard = self.guard_stop(stage, failed)
    later = [e for e in record['exits'] if e is not failed and not isinstance(e['exit'], str)
             and e['exit'] != 0]
    if guard and later:  # the rescore after the guard's stop failed: that is the failure
      failed, guard = later[0], None
    code, error = failed['exit'], failed.get('error') or ''
    if code < 0 or code in EXIT_SIGNALLED:
      how = f'signal {-code}' if code < 0 else f'exit {code}'
      raise StageError(f'stage {stage.name} was stopped ({how}) running {failed["command"]}: '
                       'rerun to resume it')
    if not guard:
      raise StageError(f'stage {stage.name} failed (exit {code}) running {failed["command"]}: '
                       f'{error[len("error: "):] or "see the log"} (log: '
                       f'{self.path(stage.name, "log.txt")}); fix the cause and rerun')
    record.update(failed=True, guard=guard)
    if stage.result.scored and self.disk.exists(f'{stage.workdir}/fid.json'):
      self.disk.with_numbers(stage, record)  # its last healthy checkpoint's (rescore)
      record['files'] = {f: sha for f, sha in record['files'].items() if sha}
    return record

  # ---- every stage ------------------------------------------------------------------------------
  def progress(self, i, stage, text):
    with self.lock:
      self.print(f'[{i + 1}/{len(self.stages)}] {stage.name}: {text}', flush=True)

  def eta(self):
    remaining = sum(stages_lib.estimate(s, self.o) for s in self.stages
                    if s.name not in self.records)
    # The stage table's estimate, rescaled by this run's measured pace; the table's own half an
    # hour (at its pace) weighs in, so a few short stages do not swing it.
    ratio = (self.measured + ETA_PRIOR) / (self.estimated + ETA_PRIOR)
    return hms(remaining * ratio / self.jobs)

  def work(self, stage, side_by_side):
    """A stage run in a scheduler's thread: its record, written as done.json (pointing at its
    result files by sha256; the record returned holds their numbers)."""
    record = self.run_stage(stage, side_by_side)
    if record is not None:
      write_json(self.path(stage.name, 'done.json'), records_lib.stored(record))
      outputs.remove(self.path(stage.name, 'attempt.json'))
    return record

  def started(self, i, stage):
    self.progress(i, stage, f'running (elapsed {hms(time.time() - self.start)}, ETA '
                  f'{self.eta()}; log {self.path(stage.name, "log.txt")})')

  def finished(self, i, stage, record, error):
    """A stage's end, in the main thread: whether the plan goes on."""
    if error is not None:
      if not isinstance(error, (StageError, OSError, ValueError)):
        raise error
      self.errors.append(error)
      self.progress(i, stage, f'FAILED: {one_line(error)}')
      return False
    self.records[stage.name] = record
    if not record.get('resumed'):  # a resumed stage ran partly here: its time would skew the ETA
      self.measured += record['seconds']
      self.estimated += stages_lib.estimate(stage, self.o)
    state = 'stopped by the guard (recorded)' if record.get('failed') else 'done'
    self.progress(i, stage, f'{state} in {hms(record["seconds"])}'
                  f'{records_lib.result_line(record)}')
    return True

  def check_records(self):
    """The stages to run ([(index, stage)]): those without a record that still holds."""
    pending = []
    for i, stage in enumerate(self.stages):
      record = records_lib.read_record(self.path(stage.name, 'done.json'), stage, self.o)
      if record is not None:
        redo = self.disk.verify(stage, record, {s.name for _, s in pending})
        if redo is not None:
          self.redo[stage.name] = redo
          self.progress(i, stage, f'evaluated again: {redo.reason}')
          record = None
      if record is None:
        pending.append((i, stage))
        continue
      self.records[stage.name] = record
      self.progress(i, stage, f'done (skipped){records_lib.result_line(record)}')
    return pending

  def run_all(self):
    """Runs every stage not done, a progress line each; returns {stage: record}."""
    pending = self.check_records()
    with interrupts.sigterm_as_interrupt():
      try:
        self.scheduler.run(pending)
      except KeyboardInterrupt:
        self.stop()
        raise
    if pending and not self.errors:
      raise StageError(f'stages {", ".join(s.name for _, s in pending)} wait for stages that '
                       'did not finish')
    if self.errors:
      more = f' (and {len(self.errors) - 1} more)' if len(self.errors) > 1 else ''
      raise StageError(f'{one_line(self.errors[0])}{more}')
    return {s.name: self.records[s.name] for s in self.stages if s.name in self.records}

  def stop(self, grace=120):
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
    self.scheduler.join()
