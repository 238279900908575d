"""A stage's record against the files in --out: pure checks over files and records, no TensorFlow.

A stage is done when its record <out>/<stage>/done.json exists and agrees with its workdir. It
holds the step, the sha256 of config.json and of every file its numbers are read from (fid.json,
...) or that it read from other stages (the calibration's samples): it points at its numbers,
never copies them, and they are read from those files on every run (an older record's copies
are ignored). A record that disagrees with its workdir is re-evaluated when the workdir is only
further on (trained on: scored again at its new step, and the figures drawn again from that
checkpoint) or its result file is missing, and refused in one line otherwise. Records of
another scale, size or command line are refused.
"""
import hashlib
import json
import math
import os
import re

from tf_hat_ebm import files as files_lib
from tf_hat_ebm import results as result_lib
from tf_hat_ebm.errors import one_line
from tf_hat_ebm.reproduction import plan

# A restorable checkpoint of a local --out (checkpoints.py's names, read without TensorFlow).
CHECKPOINT_INDEX = re.compile(r'^ckpt-(\d+)\.index$')


class StageError(ValueError):
  """A stage that failed or cannot be trusted: one line, exit 1."""


class Redo(set):
  """The outputs of a stage to write again, and why (a progress line)."""

  def __init__(self, outputs, reason):
    super().__init__(o for o in outputs if o is not None)
    self.reason = reason


def read_json(path):
  with open(path) as f:
    text = f.read()
  try:
    return json.loads(text)
  except RecursionError:
    raise ValueError('nested too deeply to be read') from None


def kept_checkpoints(ckpt_dir):
  """Steps N of the ckpt-N in ckpt_dir that can be restored (an .index), ascending."""
  try:
    names = os.listdir(ckpt_dir)
  except OSError:
    return []
  return sorted(int(m.group(1)) for m in map(CHECKPOINT_INDEX.match, names) if m)


def training_progress(workdir):
  """(last checkpoint step, configured training.num_steps or None) of a training workdir."""
  steps = kept_checkpoints(os.path.join(workdir, 'checkpoints'))
  try:
    target = read_json(os.path.join(workdir, 'config.json'))['training']['num_steps']
  except (OSError, ValueError, KeyError, TypeError):
    target = None
  return (steps[-1] if steps else 0), target


def run_precision(workdir):
  """The precision the workdir's last training process computed in (run_info.json), or None."""
  try:
    return read_json(os.path.join(workdir, 'run_info.json'))['runs'][-1].get('precision')
  except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
    return None


def file_sha256(path):
  try:
    return files_lib.sha256(path)
  except OSError:
    return None


def config_body_sha256(path):
  """sha256 of a config.json without training.num_steps: equal for a run trained on further."""
  try:
    config = read_json(path)
    config.get('training', {}).pop('num_steps', None)
  except (OSError, ValueError, AttributeError):
    return None
  return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def result_step(path):
  """The checkpoint step a result file (fid.json, ood.json) was computed at, or None."""
  if not path.endswith('.json'):
    return None
  try:
    step = read_json(path).get('step')
    return step if isinstance(step, int) else None
  except (OSError, ValueError, AttributeError):
    return None


def describe(scale, size):
  return f'scale {scale}' + (f', config size {size}' if size else '')


def _whole(value):
  return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _seconds(value):
  return (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and value >= 0)


# A record's fields a reader computes with, and what each must be when present (not null).
RECORD_FIELDS = {
    'step': (_whole, 'a whole number of steps'),
    'num_steps': (_whole, 'a whole number of steps'),
    'seconds': (_seconds, 'a number of seconds'),
    'files': (lambda v: isinstance(v, dict) and all(
        isinstance(k, str) and isinstance(s, (str, type(None))) for k, s in v.items()),
        'an object of file: sha256'),
    'config': (lambda v: isinstance(v, dict), 'an object'),
    'exits': (lambda v: isinstance(v, list) and all(isinstance(e, dict) for e in v),
              'a list of command exits'),
}


def check_record_fields(record):
  """A ValueError naming the first field of a stage record that holds a value of the wrong kind
  (a record edited by hand: `"step": "2"`)."""
  for field, (ok, what) in RECORD_FIELDS.items():
    value = record.get(field)
    if value is not None and not ok(value):
      raise ValueError(f'field {field} is {json.dumps(value)[:40]}, not {what}')


def read_record(path, stage, options):
  """The record of a finished stage, or None; refuses one it cannot trust (one line)."""
  if not os.path.lexists(path):
    return None
  try:
    record = read_json(path)
    if not isinstance(record, dict):
      raise ValueError(f'a JSON {type(record).__name__}, not an object')
    if not isinstance(record.get('result', {}), dict):
      raise ValueError(f'its result is a JSON {type(record["result"]).__name__}, not an object')
    check_record_fields(record)
  except (OSError, ValueError) as e:
    raise StageError(f'{path} is not a stage record ({one_line(e)}): delete it to rerun '
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


# A record's numbers, read from its files (Disk.with_numbers): never written into done.json.
NUMBERS = ('result', 'plateau')


def stored(record):
  """A record as done.json holds it: its files' sha256 in place of the numbers read from them."""
  return {k: v for k, v in record.items() if k not in NUMBERS}


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


class Disk:
  """The stages' files in `out` beside the records of the stages done: what a command skips,
  which checkpoint it scores or draws, and whether a record still holds."""

  def __init__(self, out, records):
    self.out, self.records = out, records

  def path(self, *parts):
    return os.path.join(self.out, *parts)

  def exists(self, name):
    return os.path.exists(self.path(name))

  # ---- a command ------------------------------------------------------------------------------
  def scored_step(self, cmd):
    """The step a command scores: its checkpoint's, else its workdir's latest; None without a
    workdir."""
    if cmd.checkpoint is not None:
      return cmd.checkpoint
    return training_progress(self.path(cmd.workdir))[0] if cmd.workdir else None

  def made(self, stage):
    """{command line: making()} of the stage's commands that finished (progress.json)."""
    try:
      made = read_json(self.path(stage.name, 'progress.json'))
      return made if isinstance(made, dict) else {}
    except (OSError, ValueError):
      return {}

  def making(self, stage, output):
    return dict(output=output, inputs={f: file_sha256(self.path(f)) for f in stage.inputs})

  def skip_reason(self, stage, output, cmd=None, redo=()):
    """Why a command need not run: its output exists (a result of its workdir's latest step, or
    made by this very command), or its training is complete."""
    if output is not None:
      if output in redo or not self.exists(output):
        return None
      if stage.kind.tracked and self.made(stage).get(cmd.line()) != self.making(stage, output):
        return None
      step, wanted = result_step(self.path(output)), self.scored_step(cmd)
      if step is not None and wanted is not None and step != wanted:
        return None  # scored at another step than its command's: scored again
      return 'skipped: output exists'
    step, target = training_progress(self.path(stage.workdir))
    return f'skipped: trained to step {step}' if target and step >= target else None

  def with_checkpoint(self, stage, cmd):
    """A figure is drawn from the checkpoint its model's record was scored at; an end-window
    command scores its slot's checkpoint (window_checkpoint)."""
    model = self.records.get(cmd.workdir or '')
    if stage.kind.draws_scored and model and isinstance(model.get('step'), int):
      cmd = cmd.at(model['step'])
    if stage.kind.slots:
      return self.window_checkpoint(stage, cmd)
    return cmd

  def window_checkpoint(self, stage, cmd):
    """The command of an end-window slot, scoring the checkpoint the stage planned; when the run
    no longer keeps it (an interrupted run's own save pruned it), the slot's counterpart among
    the newest checkpoints it kept before its end and past its 2/3 one. None: too few kept."""
    if self.exists(cmd.checkpoint_path() + '.index'):
      return cmd
    slots = [c.checkpoint for c in stage.commands if c.workdir == cmd.workdir]
    end = training_progress(self.path(cmd.workdir))[0]
    mid = result_lib.from_record((self.records.get(cmd.workdir) or {}).get('plateau'))
    kept = [k for k in kept_checkpoints(self.path(cmd.workdir, cmd.checkpoints))
            if k < end and (mid is None or mid.step is None or k > mid.step)][-len(slots):]
    slot = slots.index(cmd.checkpoint) - (len(slots) - len(kept))
    return cmd.at(kept[slot]) if slot >= 0 else None

  def of_stopped_model(self, cmd):
    """A figure (or end-window) command of a model the runaway guard stopped (recorded): its
    failure is no failure of the figures (window) stage."""
    model = self.records.get(cmd.workdir or '')
    return bool(model and model.get('failed'))

  # ---- a stage's numbers ----------------------------------------------------------------------
  def result(self, stage):
    """The numbers of a finished stage, read from its result files (plan.Result)."""
    return stage.result.read(stage, self.path)

  def plateau(self, stage):
    """The result of the plateau rule's checkpoint (plan.PLATEAU_FID, plateau.py), or None."""
    name = plan.plateau_file(stage)
    if not stage.result.scored or name not in stage.outputs or not self.exists(name):
      return None
    return result_lib.read(self.path(name)).to_json()

  def record_files(self, stage):
    """{file: sha256} of what the record rests on: config.json, its result files, its inputs."""
    return {f: file_sha256(self.path(f)) for f in stage.record_files(self.exists)}

  def with_numbers(self, stage, record, files=None):
    """`record` with its result (and plateau checkpoint's) read from their files, then the files
    they rest on (`files`: those it was checked against; default their sha256 now). In a fresh
    record's order however it was read: the report of either is the same."""
    for key in NUMBERS + ('files',):
      record.pop(key, None)
    record['result'] = self.result(stage)
    earlier = self.plateau(stage)
    if earlier is not None:
      record['plateau'] = earlier
    record['files'] = self.record_files(stage) if files is None else files
    return record

  # ---- a record against its workdir -----------------------------------------------------------
  def verify(self, stage, record, pending):
    """None when `record` agrees with what is on disk (its numbers then read again from their
    files); else the outputs to write again (a Redo: the workdir trained on, a result file
    missing, a stage this one read from running again); a StageError when neither holds."""
    where = self.path(stage.name, 'done.json')
    if record.get('failed'):  # stopped by the guard: its training, and its rescore's files
      redo = self.verify_training(stage, record, where)
      if redo is None and record.get('files'):
        self.check_files_unchanged(stage, record['files'], where)
        return self.reread(stage, record)
      return redo
    again = set(stage.after) & pending
    if again and stage.kind.slots:  # the runs scored again
      return Redo([o for o, c in zip(stage.outputs, stage.commands) if c.workdir in again],
                  f'{", ".join(sorted(again))} runs again')
    if again and stage.kind.tracked:
      # Judged again after them: what their new outputs change runs again (progress.json).
      return Redo((), f'{", ".join(sorted(again))} runs again')
    redo = self.verify_training(stage, record, where)
    if redo is None:
      redo = self.verify_files(stage, record.get('files'), where)
    if redo is None:
      redo = self.verify_outputs(stage, record)
    return redo if redo is not None else self.reread(stage, record)

  def check_files_unchanged(self, stage, files, where):
    for name, sha in sorted(files.items()):
      if file_sha256(self.path(name)) != sha:
        raise StageError(f'stage {stage.name}: {self.path(name)} is not the file {where} '
                         f'rests on (changed or deleted): delete {self.path(stage.name)} to '
                         'rerun the stage')

  def verify_files(self, stage, files, where):
    """A Redo or StageError when a file the record rests on changed or went; else None."""
    if not isinstance(files, dict) or not all(isinstance(k, str) for k in files):
      # An older record: judged again from what is on disk (nothing valid is recomputed).
      return Redo((), 'its record lists no files to check it against')
    for name, sha in sorted(files.items()):
      now = file_sha256(self.path(name))
      if now == sha or (now is not None and stage.kind.trains
                        and name == f'{stage.workdir}/config.json'):
        continue  # a training's config.json is judged by its values (verify_training)
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
    return None

  def verify_outputs(self, stage, record):
    """A Redo of the outputs missing, scored at another step than their model's, or drawn from
    a model scored again since; else None."""
    missing = [o for o, c in zip(stage.outputs, stage.commands) if o is not None
               and not self.exists(o) and self.with_checkpoint(stage, c) is not None]
    for cmd, output in zip(stage.commands, stage.outputs):  # a score of its command's step
      cmd = self.with_checkpoint(stage, cmd) if stage.kind.slots else cmd
      if cmd is None or output is None:
        continue  # a window slot its run kept no checkpoint for
      step, wanted = result_step(self.path(output)), self.scored_step(cmd)
      if step is not None and wanted and step != wanted:
        return Redo([output], f'{output} is of step {step}, its model now of step {wanted}')
    if stage.kind.draws_scored:
      drawn = {m: self.records[m].get('step') for m in record.get('models') or {}
               if m in self.records}
      if drawn != (record.get('models') or {}):
        return Redo(stage.outputs, 'a model it drew was scored again at another step')
    if missing:
      return Redo(missing, f'{", ".join(missing)} is missing')
    return None

  def verify_training(self, stage, record, where):
    """A training stage's step and config.json against its workdir (see verify)."""
    if not stage.kind.trains:
      return None
    step, target = training_progress(self.path(stage.workdir))
    config = record.get('config') or {}
    path = self.path(stage.workdir, 'config.json')
    if file_sha256(path) is None or step == 0:
      raise StageError(f'stage {stage.name}: {where} records step {record.get("step")}, but '
                       f'{self.path(stage.workdir)} holds '
                       f'{"no config.json" if file_sha256(path) is None else "no checkpoint"} '
                       f'(deleted?): delete {self.path(stage.name)} to rerun the stage')
    # The same bytes, or the same values (reformatted; or trained on: num_steps raised).
    body = config_body_sha256(path) == config.get('body_sha256')
    same = file_sha256(path) == config.get('sha256') or (body and target == record.get('num_steps'))
    if not same and (not body or step == record.get('step')):
      raise StageError(f'stage {stage.name}: {path} changed since {where} was written (another '
                       f'config): delete {self.path(stage.name)} to rerun the stage')
    if not isinstance(record.get('step'), int) or step < record['step']:
      raise StageError(f'stage {stage.name}: {where} records step {record.get("step")}, but the '
                       f'latest checkpoint of {self.path(stage.workdir)} is step {step} (deleted?):'
                       f' delete {self.path(stage.name)} to rerun the stage')
    if step > record['step'] and not record.get('failed'):
      return Redo([o for c, o in zip(stage.commands, stage.outputs) if o is not None
                   and c.checkpoint is None],
                  f'trained on from step {record["step"]} to {step}: scored again')
    return None

  def reread(self, stage, record):
    """The record's numbers, read from the files whose sha256 it holds (checked by now); a
    copy an older record holds is replaced, never compared."""
    try:
      self.with_numbers(stage, record, record.get('files'))
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError, AttributeError) as e:
      raise StageError(f'stage {stage.name}: cannot read its result again '
                       f'({one_line(e)}): delete {self.path(stage.name)} to rerun the '
                       'stage') from None
    return None
