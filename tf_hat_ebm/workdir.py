"""Workdir housekeeping of the trainer: the run lock, checkpoint discovery, orphan clean-up.

Nothing here deletes a checkpoint: a resume that cannot tell which checkpoint to use stops and
says which ones exist (`resume_error`); only the exact leftovers of a killed write are removed.
"""
import json
import os
import re
import socket

import tensorflow as tf

# Resume from the newest checkpoint that restores, skipping damaged newer ones (only on request).
LATEST_INTACT = 'latest_intact'
LOCK_NAME = 'train.lock'

_CKPT_FILE = re.compile(r'^ckpt-(\d+)\.(index|data-\d+-of-\d+)$')
# What a SIGKILL during a save leaves: TF's '<prefix>_temp/' shard folder, our config.json.tmp.
_ORPHAN = re.compile(r'^ckpt-\d+_temp')


class WorkdirLockedError(PermissionError):
  """Another training run holds the workdir."""


class WorkdirLock:
  """workdir/train.lock holding {"pid", "host"} of the run training in it; released on exit.

  A lock left by a process that is gone (same host, pid not alive) is taken over with a message.
  Only local workdirs are locked: an object store has no atomic create-if-absent.
  """

  def __init__(self, workdir, log=print):
    self.path = os.path.join(workdir, LOCK_NAME)
    self.log, self.held = log, False

  def __enter__(self):
    if '://' in self.path:
      return self
    os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
    mine = json.dumps(dict(pid=os.getpid(), host=socket.gethostname()))
    for _ in range(2):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        owner = _read_lock(self.path)
        if owner.get('host') == socket.gethostname() and not _pid_alive(owner.get('pid')):
          self.log(f'Taking over the stale lock {self.path} of pid {owner.get("pid")} '
                   f'(no longer running).')
          os.remove(self.path)
          continue
        raise WorkdirLockedError(
            f'workdir is in use by another training run: {self.path} holds pid '
            f'{owner.get("pid")} on host {owner.get("host")}; wait for it, or delete the lock '
            'file if that run is gone') from None
      with os.fdopen(fd, 'w') as f:
        f.write(mine)
      self.held = True
      return self
    raise WorkdirLockedError(f'cannot take the lock {self.path}: it keeps reappearing')

  def __exit__(self, *exc):
    if self.held:
      self.held = False
      try:
        os.remove(self.path)
      except FileNotFoundError:
        pass
    return False


def _read_lock(path):
  try:
    with open(path) as f:
      owner = json.load(f)
    return owner if isinstance(owner, dict) else {}
  except (OSError, ValueError):
    return {}  # garbled or half-written: treated as a lock of this host whose pid is gone


def _pid_alive(pid):
  if not isinstance(pid, int) or pid <= 0:
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True  # alive, owned by another user
  return True


def checkpoint_steps(ckpt_dir):
  """Steps of every ckpt-N with any file (index or data) in ckpt_dir, newest first."""
  if not tf.io.gfile.isdir(ckpt_dir):
    return []
  steps = {int(m.group(1)) for m in map(_CKPT_FILE.match, tf.io.gfile.listdir(ckpt_dir)) if m}
  return sorted(steps, reverse=True)


def resolve_checkpoint(ckpt_dir, spec):
  """The checkpoint prefix a --checkpoint=PATH_OR_STEP names (a step means ckpt_dir/ckpt-STEP)."""
  spec = str(spec).strip()
  if spec.isdigit():
    return os.path.join(ckpt_dir, f'ckpt-{int(spec)}')
  return spec[:-len('.index')] if spec.endswith('.index') else spec


def resume_error(ckpt_dir, reason):
  """The one-line refusal of a resume that would have to guess."""
  steps = checkpoint_steps(ckpt_dir)
  found = ', '.join(f'ckpt-{s}' for s in steps) or 'none'
  return ValueError(
      f'cannot resume from {ckpt_dir}: {reason}; checkpoints found: {found}; nothing was '
      'deleted; resume from one of them with --checkpoint=STEP, or with '
      f'--checkpoint={LATEST_INTACT} from the newest that restores')


def clean_orphans(workdir, ckpt_dirs, log=print):
  """Removes what a kill during a save leaves behind: ckpt-N_temp* and config.json.tmp."""
  removed = []
  for directory in ckpt_dirs:
    if not tf.io.gfile.isdir(directory):
      continue
    for name in tf.io.gfile.listdir(directory):
      name = name.rstrip('/')
      if _ORPHAN.match(name):
        path = os.path.join(directory, name)
        if tf.io.gfile.isdir(path):
          tf.io.gfile.rmtree(path)
        else:
          tf.io.gfile.remove(path)
        removed.append(path)
  tmp = os.path.join(workdir, 'config.json.tmp')
  if tf.io.gfile.exists(tmp):
    tf.io.gfile.remove(tmp)
    removed.append(tmp)
  if removed:
    log(f'Removed {len(removed)} leftover(s) of an interrupted save: {", ".join(removed)}')
  return removed
