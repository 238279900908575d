"""Runs the reproduction's stages, resumably: each the user's own scripts in subprocesses.

A stage is done when its record <out>/<stage>/done.json exists and agrees with its workdir; the
record is written only when every command exited 0, its training reached the configured step (the
workdir's checkpoints against its config.json) and its evaluation finished. It holds the step, the
sha256 of config.json and of every file its numbers were read from (fid.json, ...) or that it
read from other stages (the calibration's samples); the numbers reported are read again from
those files. A record that disagrees with its workdir is re-evaluated when the workdir is only
further on (trained on: scored again at its new step, and the figures drawn again from that
checkpoint) or its result file is missing, and refused in one line otherwise. A training stopped
short (SIGTERM, Ctrl-C, a kill) is resumed by the next run, never scored. An ablation arm
stopped by the runaway guard is recorded as such (the report counts it only beside a healthy
reference). Records of another scale, size or command line are refused. Independent stages run
`jobs` at a time.
"""
import datetime
import hashlib
import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import cli
from tf_hat_ebm import interrupts
from tf_hat_ebm import outputs
from tf_hat_ebm import result_files
from tf_hat_ebm.evaluation import result as result_lib
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
      target = workdir_lib.parse_json(f.read())['training']['num_steps']
  except (OSError, ValueError, KeyError, TypeError):
    target = None
  return (steps[-1] if steps else 0), target


def run_precision(workdir):
  """The precision the workdir's last training process computed in (run_info.json), or None."""
  try:
    with open(os.path.join(workdir, 'run_info.json')) as f:
      return workdir_lib.parse_json(f.read())['runs'][-1].get('precision')
  except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
    return None


def file_sha256(path):
  try:
    with open(path, 'rb') as f:
      return hashlib.sha256(f.read()).hexdigest()
  except OSError:
    return None


def config_body_sha256(path):
  """sha256 of a config.json without training.num_steps: equal for a run trained on further."""
  try:
    with open(path) as f:
      config = workdir_lib.parse_json(f.read())
    config.get('training', {}).pop('num_steps', None)
  except (OSError, ValueError, AttributeError):
    return None
  return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def result_step(path):
  """The checkpoint step a result file (fid.json, ood.json) was computed at, or None."""
  try:
    with open(path) as f:
      step = workdir_lib.parse_json(f.read()).get('step')
    return step if isinstance(step, int) else None
  except (OSError, ValueError, AttributeError):
    return None


def flag_of(cmd, name):
  """The value of --name=... in a command, or None."""
  prefix = f'--{name}='
  return next((a[len(prefix):] for a in cmd if a.startswith(prefix)), None)


def write_json(path, data):
  """The project's atomic JSON write (result_files.write_json), its failures as one-line errors."""
  _written(path, lambda: result_files.write_json(path, data))


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
      record = workdir_lib.parse_json(f.read())
    if not isinstance(record, dict):
      raise ValueError(f'a JSON {type(record).__name__}, not an object')
    if not isinstance(record.get('result', {}), dict):
      raise ValueError(f'its result is a JSON {type(record["result"]).__name__}, not an object')
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
    self.redo = {}  # stage -> outputs to write again (a record that no longer holds)
    self.children, self.lock = set(), threading.Lock()
    self.start = time.time()
    self.measured, self.estimated = 0.0, 0.0  # of the stages run now: rescales the ETA
    self.resumed = {}  # stage -> True or 'seconds unknown' when earlier runs began it

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

  # Stages that read other stages' models or files: an output they made counts as done only when
  # this very command (the checkpoint it drew from) and inputs made it (<stage>/progress.json);
  # a figure or calibration lying there from an earlier pipeline is drawn again.
  TRACKED = ('figures', 'calibration')
  ETA_PRIOR = 1800.0  # seconds of the stage table's pace in the ETA's rescaling

  def skip_reason(self, stage, output, cmd=()):
    """Why a command need not run: its output exists (a result of its workdir's latest step, or
    made by this very command), or its training is complete."""
    if output is not None:
      if output in self.redo.get(stage.name, ()) or not os.path.exists(self.path(output)):
        return None
      if stage.kind in self.TRACKED and self.made(stage).get(shlex.join(cmd)) != self.making(
          stage, output):
        return None
      step = result_step(self.path(output)) if output.endswith('.json') else None
      wanted = self.scored_step(cmd)
      if step is not None and wanted is not None and step != wanted:
        return None  # scored at another step than its command's: scored again
      return 'skipped: output exists'
    step, target = training_progress(self.path(stage.workdir))
    return f'skipped: trained to step {step}' if target and step >= target else None

  def scored_step(self, cmd):
    """The step a command scores: its --checkpoint's (ckpt-N; the plateau rule's), else its
    workdir's latest; None without a workdir."""
    checkpoint = re.search(r'ckpt-(\d+)$', flag_of(cmd, 'checkpoint') or '')
    if checkpoint:
      return int(checkpoint.group(1))
    workdir = flag_of(cmd, 'workdir')
    return training_progress(self.path(workdir))[0] if workdir else None

  def made(self, stage):
    """{command line: making()} of the stage's commands that finished (progress.json)."""
    try:
      with open(self.path(stage.name, 'progress.json')) as f:
        made = workdir_lib.parse_json(f.read())
      return made if isinstance(made, dict) else {}
    except (OSError, ValueError):
      return {}

  def making(self, stage, output):
    return dict(output=output, inputs={f: file_sha256(self.path(f)) for f in stage.inputs})

  def with_checkpoint(self, stage, cmd):
    """A figure is drawn from the checkpoint its model's record was scored at; an end-window
    command scores its slot's checkpoint (window_checkpoint)."""
    cmd = list(cmd)
    model = self.records.get(flag_of(cmd, 'workdir') or '')
    if stage.kind == 'figures' and model and isinstance(model.get('step'), int):
      cmd.append(f'--checkpoint={model["step"]}')
    if stage.kind == 'window':
      return self.window_checkpoint(stage, cmd)
    return cmd

  def window_checkpoint(self, stage, cmd):
    """The command of an end-window slot, scoring the checkpoint the stage planned; when the run
    no longer keeps it (an interrupted run's own save pruned it), the slot's counterpart among
    the newest checkpoints it kept before its end and past its 2/3 one. None: too few kept."""
    planned, run = flag_of(cmd, 'checkpoint'), flag_of(cmd, 'workdir')
    if os.path.exists(self.path(planned + '.index')):
      return cmd
    slots = [flag_of(c, 'checkpoint') for c in stage.commands if flag_of(c, 'workdir') == run]
    end = training_progress(self.path(run))[0]
    mid = result_lib.from_record((self.records.get(run) or {}).get('plateau'))
    kept = [k for k in checkpoints.list_checkpoints(self.path(run, 'checkpoints'))
            if k < end and (mid is None or mid.step is None or k > mid.step)][-len(slots):]
    slot = slots.index(planned) - (len(slots) - len(kept))
    if slot < 0:
      return None
    return [a if not a.startswith('--checkpoint=') else
            f'--checkpoint={os.path.dirname(planned)}/ckpt-{kept[slot]}' for a in cmd]

  def run_stage(self, stage, side_by_side=1):
    """Runs the commands of `stage` that are not done (`side_by_side` stages at once); its
    record, or None when stopped."""
    os.makedirs(self.path(stage.name), exist_ok=True)
    earlier, self.resumed[stage.name] = self.earlier_attempts(stage)
    write_json(self.path(stage.name, 'attempt.json'), dict(start=time.time(), earlier=earlier))
    exits, t0 = [], time.time() - earlier  # the record's seconds count every attempt
    with open(self.path(stage.name, 'log.txt'), 'a') as log:
      for planned, output in zip(stage.commands, stage.outputs):
        cmd = self.with_checkpoint(stage, planned)
        if cmd is None:
          exits.append(dict(command=shlex.join(planned), exit='not run: its run kept too few '
                            'checkpoints before its end'))
          continue
        key, reason = shlex.join(cmd), self.skip_reason(stage, output, cmd)
        if reason or self.stopping:
          exits.append(dict(command=key, exit=reason or 'not run: stopped'))
          continue
        if output is not None and os.path.exists(self.path(output)) and '--overwrite' not in cmd:
          cmd.append('--overwrite')  # its own earlier output, of another step
        exits.append(self.execute(stage, cmd, log, side_by_side))
        if exits[-1]['exit'] != 0:
          if self.guard_stop(stage, exits[-1]) and stage.result == 'fid':
            # A run the guard stopped is scored at its last healthy checkpoint: the latest one
            # (the guard holds checkpoints back while it counts), and the plateau rule's if kept.
            return self.rescore(stage, exits, log, side_by_side, t0)
          if not stage.keep_going:
            break
        elif output is None and not self.skip_reason(stage, output):
          break  # stopped short of its step (SIGTERM saves and exits 0): nothing to evaluate
        elif stage.kind in self.TRACKED:
          write_json(self.path(stage.name, 'progress.json'),
                     dict(self.made(stage), **{key: self.making(stage, output)}))
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
      with open(attempt) as f:
        last = json.load(f)
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
      checkpoint = flag_of(cmd, 'checkpoint')
      if self.stopping or (checkpoint and not os.path.exists(self.path(checkpoint + '.index'))):
        exits.append(dict(command=shlex.join(cmd), exit='not run: the guard stopped the run '
                          'before this checkpoint' if not self.stopping else 'not run: stopped'))
        continue
      cmd = cmd + (['--overwrite'] if os.path.exists(self.path(output)) else [])
      exits.append(self.execute(stage, cmd, log, side_by_side))
      if exits[-1]['exit'] != 0:
        break
    return self.judge(stage, exits, time.time() - t0)

  def execute(self, stage, cmd, log, side_by_side):
    """Runs one command of `stage` into its log: its exit ({command, exit, seconds}, and the
    last `error:` line when it failed)."""
    line = shlex.join(cmd)
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

  def judge(self, stage, exits, seconds):
    """The stage's record when it finished (or the guard stopped an ablation arm), else an
    error; None when the runner is stopping (the stage resumes on the next run)."""
    record = dict(stage=stage.name, scale=self.o.scale, size=self.o.size, kind=stage.kind,
                  commands=stage.command_lines(), exits=exits, seconds=round(seconds, 1),
                  finished=datetime.datetime.now(datetime.timezone.utc).isoformat(
                      timespec='seconds'))
    if stage.label:
      record['label'] = stage.label
    if self.resumed.get(stage.name):
      record['resumed'] = self.resumed[stage.name]
    if stage.kind in stages_lib.TRAINED:
      step, target = training_progress(self.path(stage.workdir))
      config = self.path(stage.workdir, 'config.json')
      record.update(step=step, num_steps=target, precision=self.o.training_precision(),
                    computed_in=run_precision(self.path(stage.workdir)),
                    config=dict(path=f'{stage.workdir}/config.json', sha256=file_sha256(config),
                                body_sha256=config_body_sha256(config)))
    if stage.kind == 'figures':  # the checkpoint each model's figures were drawn from
      record['models'] = {m: self.records[m]['step'] for m in map(
          lambda c: flag_of(c, 'workdir'), stage.commands)
          if isinstance(self.records.get(m, {}).get('step'), int)}
    failed = [e for e in exits if not isinstance(e['exit'], str) and e['exit'] != 0]
    if self.stopping:
      return None
    excused = [e for e in failed if stage.keep_going and self.of_stopped_model(e['command'])]
    if failed and stage.keep_going and len(excused) == len(failed):
      record['failed_commands'] = [e['command'] for e in failed]
    elif failed:
      return self.failure(stage, record, [e for e in failed if e not in excused][0])
    elif stage.kind in stages_lib.TRAINED and not (record['num_steps']
                                                   and record['step'] >= record['num_steps']):
      raise StageError(f'stage {stage.name} stopped at step {record["step"]} of '
                       f'{record["num_steps"]} although its training exited 0 (stopped by a '
                       'signal?): rerun to resume it')
    record['result'] = self.result(stage)
    earlier = self.plateau(stage)
    if earlier is not None:
      record['plateau'] = earlier
    record['files'] = self.record_files(stage)
    return record

  def of_stopped_model(self, line):
    """A figure (or end-window) command of a model the runaway guard stopped (recorded): its
    failure is no failure of the figures (window) stage."""
    model = self.records.get(flag_of(shlex.split(line), 'workdir') or '')
    return bool(model and model.get('failed'))

  def result_files(self, stage):
    """The files (relative to --out) the record's numbers are read from."""
    if stage.result == 'fid':
      return [f'{stage.workdir}/fid.json'] + [
          o for o in stage.outputs if o == f'{stage.workdir}/{stages_lib.PLATEAU_FID}']
    if stage.result == 'window':  # those of runs the guard stopped may be missing
      return [o for o in stage.outputs if os.path.exists(self.path(o))]
    return [stage.outputs[-1]] if stage.result in ('compare', 'json', 'ood') else []

  def record_files(self, stage):
    """{file: sha256} of what the record rests on: config.json, its result files, its inputs."""
    files = self.result_files(stage) + list(stage.inputs)
    if stage.workdir and stage.kind in stages_lib.TRAINED + ('release',):
      files.insert(0, f'{stage.workdir}/config.json')
    return {f: file_sha256(self.path(f)) for f in files}

  def failure(self, stage, record, failed):
    guard = self.guard_stop(stage, failed)
    later = [e for e in record['exits'] if e is not failed and not isinstance(e['exit'], str)
             and e['exit'] != 0]
    if guard and later:  # the rescore after the guard's stop failed: that is the failure
      failed, guard = later[0], None
    code, error = failed['exit'], failed.get('error') or ''
    log = self.path(stage.name, 'log.txt')
    if code < 0 or code in EXIT_SIGNALLED:
      how = f'signal {-code}' if code < 0 else f'exit {code}'
      raise StageError(f'stage {stage.name} was stopped ({how}) running {failed["command"]}: '
                       'rerun to resume it')
    if guard:
      record.update(failed=True, guard=guard)
      if os.path.exists(self.path(stage.workdir or '', 'fid.json')) and stage.result == 'fid':
        record['result'] = self.result(stage)  # its last healthy checkpoint's (rescore)
        earlier = self.plateau(stage)
        if earlier is not None:
          record['plateau'] = earlier
        record['files'] = {f: sha for f, sha in self.record_files(stage).items() if sha}
      return record
    raise StageError(f'stage {stage.name} failed (exit {code}) running {failed["command"]}: '
                     f'{error[len("error: "):] or "see the log"} (log: {log}); fix the cause '
                     'and rerun')

  def result(self, stage):
    """The numbers of a finished stage: an evaluation's result (evaluation.result.EvalResult),
    or AUROC per set."""
    if stage.result in ('fid', 'compare'):  # evaluate_fid.py's fid.json, compare's scores.json
      return result_lib.read(self.path(stage.workdir, 'fid.json') if stage.result == 'fid'
                             else self.path(stage.outputs[-1])).to_json()
    if stage.result == 'json':  # a stage's whole JSON output (the calibration)
      with open(self.path(stage.outputs[-1])) as f:
        return workdir_lib.parse_json(f.read())
    if stage.result == 'window':  # {output: its result} of the plateau rule's end window
      return {o: result_lib.read(self.path(o)).to_json() for o in self.result_files(stage)}
    if stage.result == 'ood':
      with open(self.path(stage.outputs[-1])) as f:
        return {k: v['auroc'] for k, v in workdir_lib.parse_json(f.read())['sets'].items()}
    return {}

  def plateau(self, stage):
    """The result of the plateau rule's checkpoint (stages.PLATEAU_FID, plateau.py), or None."""
    path = f'{stage.workdir}/{stages_lib.PLATEAU_FID}'
    if stage.result != 'fid' or path not in stage.outputs or not os.path.exists(self.path(path)):
      return None
    return result_lib.read(self.path(path)).to_json()

  # ---- a record against its workdir -------------------------------------------------------------
  def verify(self, stage, record, pending):
    """None when `record` agrees with what is on disk (its numbers then read again from their
    files); else the outputs to write again (a Redo: the workdir trained on, a result file
    missing, a stage this one read from running again); a StageError when neither holds."""
    where = self.path(stage.name, 'done.json')
    if record.get('failed'):  # stopped by the guard: its training, and its rescore's files
      redo = self.verify_training(stage, record, where)
      if redo is None and record.get('files'):
        for name, sha in sorted(record['files'].items()):
          if file_sha256(self.path(name)) != sha:
            raise StageError(f'stage {stage.name}: {self.path(name)} is not the file {where} '
                             f'rests on (changed or deleted): delete {self.path(stage.name)} to '
                             'rerun the stage')
        return self.reread(stage, record, where)
      return redo
    if stage.kind == 'window' and set(stage.after) & pending:  # the runs scored again
      again = set(stage.after) & pending
      return Redo([o for o, c in zip(stage.outputs, stage.commands) if flag_of(c, 'workdir')
                   in again], f'{", ".join(sorted(again))} runs again')
    if stage.kind in self.TRACKED and set(stage.after) & pending:
      # Judged again after them: what their new outputs change runs again (progress.json).
      return Redo((), f'{", ".join(sorted(set(stage.after) & pending))} runs again')
    redo = self.verify_training(stage, record, where)
    if redo is not None:
      return redo
    files = record.get('files')
    if not isinstance(files, dict) or not all(isinstance(k, str) for k in files):
      # An older record: judged again from what is on disk (nothing valid is recomputed).
      return Redo((), 'its record lists no files to check it against')
    for name, sha in sorted(files.items()):
      now = file_sha256(self.path(name))
      if now == sha:
        continue
      if name in stage.inputs:
        return Redo(stage.outputs, f'{name} changed since it was read')
      if now is None and name.endswith('/config.json'):
        raise StageError(f'stage {stage.name}: {self.path(name)} is gone, but {where} rests on '
                         f'it: delete {self.path(stage.name)} to rerun the stage')
      if now is None:
        return Redo([o for o in stage.outputs if o == name] or stage.outputs,
                    f'{name} is missing')
      raise StageError(f'stage {stage.name}: {self.path(name)} changed since {where} was '
                       f'written (sha256 {str(sha)[:12]}..., now {now[:12]}...): delete '
                       f'{self.path(name)} to compute it again, or {self.path(stage.name)} to '
                       'rerun the stage')
    missing = [o for o, c in zip(stage.outputs, stage.commands) if o is not None
               and not os.path.exists(self.path(o)) and self.with_checkpoint(stage, c) is not None]
    for cmd, output in zip(stage.commands, stage.outputs):  # a score of its command's step
      cmd = self.with_checkpoint(stage, cmd) if stage.kind == 'window' else cmd
      if cmd is None:
        continue  # a window slot its run kept no checkpoint for
      step = result_step(self.path(output)) if output and output.endswith('.json') else None
      wanted = self.scored_step(cmd)
      if step is not None and wanted and step != wanted:
        return Redo([output], f'{output} is of step {step}, its model now of step {wanted}')
    if stage.kind == 'figures':
      drawn = {m: self.records[m].get('step') for m in record.get('models') or {}
               if m in self.records}
      if drawn != (record.get('models') or {}):
        return Redo(stage.outputs, 'a model it drew was scored again at another step')
    if missing:
      return Redo(missing, f'{", ".join(missing)} is missing')
    return self.reread(stage, record, where)

  def verify_training(self, stage, record, where):
    """A training stage's step and config.json against its workdir (see verify)."""
    if stage.kind not in stages_lib.TRAINED:
      return None
    step, _ = training_progress(self.path(stage.workdir))
    config = record.get('config') or {}
    path = self.path(stage.workdir, 'config.json')
    if file_sha256(path) is None or step == 0:
      raise StageError(f'stage {stage.name}: {where} records step {record.get("step")}, but '
                       f'{self.path(stage.workdir)} holds '
                       f'{"no config.json" if file_sha256(path) is None else "no checkpoint"} '
                       f'(deleted?): delete {self.path(stage.name)} to rerun the stage')
    same = file_sha256(path) == config.get('sha256')
    if not same and (config_body_sha256(path) != config.get('body_sha256')
                     or step == record.get('step')):
      raise StageError(f'stage {stage.name}: {path} changed since {where} was written (another '
                       f'config): delete {self.path(stage.name)} to rerun the stage')
    if not isinstance(record.get('step'), int) or step < record['step']:
      raise StageError(f'stage {stage.name}: {where} records step {record.get("step")}, but the '
                       f'latest checkpoint of {self.path(stage.workdir)} is step {step} (deleted?):'
                       f' delete {self.path(stage.name)} to rerun the stage')
    if step > record['step'] and not record.get('failed'):
      return Redo([o for c, o in zip(stage.commands, stage.outputs) if o is not None
                   and not re.search(r'ckpt-\d+$', flag_of(c, 'checkpoint') or '')],
                  f'trained on from step {record["step"]} to {step}: scored again')
    return None

  def reread(self, stage, record, where):
    """The record's numbers are those its files hold now (a hand-edited record is refused)."""
    try:
      result, earlier = self.result(stage), self.plateau(stage)
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError, AttributeError) as e:
      raise StageError(f'stage {stage.name}: cannot read its result again '
                       f'({cli.one_line(e)}): delete {self.path(stage.name)} to rerun the '
                       'stage') from None
    if not (same_result(stage, record.get('result'), result)
            and same_plateau(record.get('plateau'), earlier)):
      raise StageError(f'stage {stage.name}: the result in {where} is not what its files hold '
                       f'({", ".join(self.result_files(stage))}; edited?): delete {where} to '
                       'read the stage again')
    record['result'] = result  # as its files hold it: an older record's numbers, typed
    if earlier is not None:
      record['plateau'] = earlier
    return None

  # ---- every stage ------------------------------------------------------------------------------
  def progress(self, i, stage, text):
    with self.lock:
      self.print(f'[{i + 1}/{len(self.stages)}] {stage.name}: {text}', flush=True)

  def eta(self):
    remaining = sum(stages_lib.estimate(s, self.o) for s in self.stages
                    if s.name not in self.records)
    # The stage table's estimate, rescaled by this run's measured pace; the table's own half an
    # hour (at its pace) weighs in, so a few short stages do not swing it.
    ratio = (self.measured + self.ETA_PRIOR) / (self.estimated + self.ETA_PRIOR)
    return hms(remaining * ratio / self.jobs)

  def worker(self, i, stage, done, side_by_side):
    try:
      record = self.run_stage(stage, side_by_side)
      if record is not None:
        write_json(self.path(stage.name, 'done.json'), record)
        outputs.remove(self.path(stage.name, 'attempt.json'))
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
      if record is not None:
        redo = self.verify(stage, record, {s.name for _, s in pending})
        if redo is not None:
          self.redo[stage.name] = redo
          self.progress(i, stage, f'evaluated again: {redo.reason}')
          record = None
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
    if not record.get('resumed'):  # a resumed stage ran partly here: its time would skew the ETA
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


class Redo(set):
  """The outputs of a stage to write again, and why (a progress line)."""

  def __init__(self, outputs, reason):
    super().__init__(o for o in outputs if o is not None)
    self.reason = reason


# SIGTERM is handled as Ctrl-C (KeyboardInterrupt) in the main thread while inside.
stop_on_sigterm = interrupts.sigterm_as_interrupt


def same_result(stage, recorded, read):
  """Whether a record's result is the one its files hold: an evaluation's as typed results (their
  canonical JSON; a record of version 1 held only the values), any other as JSON."""
  if stage.result not in ('fid', 'compare'):
    return json.dumps(recorded, sort_keys=True) == json.dumps(read, sort_keys=True)
  try:
    theirs = result_lib.from_record(recorded)
  except ValueError:
    return False
  ours = result_lib.EvalResult.from_json(read)
  if theirs is None:
    return False
  if 'schema' not in recorded:
    theirs, ours = ({'values': r.values, 'data': r.data} for r in (theirs, ours))
  else:
    theirs, ours = theirs.to_json(), ours.to_json()
  return json.dumps(theirs, sort_keys=True) == json.dumps(ours, sort_keys=True)


def same_plateau(recorded, read):
  """Whether a record's plateau checkpoint result is the one its fid_plateau.json holds (a
  record from before the rule has none: it is read from the file)."""
  if recorded is None:
    return True
  try:
    theirs = result_lib.EvalResult.from_json(recorded).to_json()
  except ValueError:
    return False
  return read is not None and (
      json.dumps(theirs, sort_keys=True) == json.dumps(read, sort_keys=True))


def result_line(record):
  """'; hat_ebm 11.29, generator 26.24' of a record's numbers (an evaluation's first metric, the
  FID, per method), the guard's stop, or ''."""
  if record.get('failed'):
    return f'; {record.get("guard", "failed")}'
  evaluation = result_lib.from_record(record.get('result'))
  if evaluation is not None:
    first = next(iter(evaluation.metrics), None)
    numbers = [f'{k} {evaluation.mean(first, k):.2f}' for k in evaluation.methods
               if evaluation.sets(first, k)]
  else:
    numbers = [f'{k} {v:.2f}' for k, v in (record.get('result') or {}).items()
               if isinstance(v, (int, float))]
  return f'; {", ".join(numbers)}' if numbers else ''
