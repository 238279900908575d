"""A training workdir: its layout, lock, config check, checkpoint managers and housekeeping.

Layout (score_sde's): checkpoints/ (ckpt-N, archive/, local/worker<i>/ with several workers),
tensorboard/, samples/, config.json, run_info.json, train.lock.

Nothing here deletes a checkpoint: a resume that cannot tell which checkpoint to use stops and
says which ones exist (`resume_error`); only the exact leftovers of a killed write are removed.
"""
import json
import os
import re
import socket
import time

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

  def __init__(self, workdir, log=print, name=LOCK_NAME, what='another training run'):
    self.path = os.path.join(workdir, name)
    self.log, self.held, self.what = log, False, what

  def __enter__(self):
    if '://' in self.path:
      return self
    os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
    mine = json.dumps(dict(pid=os.getpid(), host=socket.gethostname()))
    for _ in range(2):
      try:
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
      except FileExistsError:
        if os.path.isdir(self.path):
          raise WorkdirLockedError(f'{self.path} is a directory, not a lock file: remove it '
                                   'and rerun') from None
        owner = _read_lock(self.path)
        if not owner:  # being written this instant, or half-written by a killed run
          time.sleep(0.5)
          owner = _read_lock(self.path)
        if not owner or (owner.get('host') == socket.gethostname()
                         and not _pid_alive(owner.get('pid'))):
          state = f'pid {owner.get("pid")} no longer running' if owner else 'garbled'
          self.log(f'Taking over the stale lock {self.path} ({state}).')
          os.remove(self.path)
          continue
        raise WorkdirLockedError(
            f'{os.path.dirname(self.path)} is in use by {self.what}: {self.path} holds pid '
            f'{owner.get("pid")} on host {owner.get("host")}; wait for it, or delete the lock '
            'file if that run is gone') from None
      except PermissionError as e:
        raise PermissionError(f'cannot take the lock {self.path}: {e.strerror} (a read-only '
                              'directory?)') from None
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


def checkpoint_path(ckpt_dir, spec):
  """The checkpoint prefix a --checkpoint=PATH_OR_STEP names (a step means ckpt_dir/ckpt-STEP)."""
  spec = str(spec).strip()
  if spec.isdigit():
    return os.path.join(ckpt_dir, f'ckpt-{int(spec)}')
  return spec[:-len('.index')] if spec.endswith('.index') else spec


def resume_error(ckpt_dir, reason, none_restores=False):
  """The one-line refusal of a resume that would have to guess (`none_restores`: every
  checkpoint was tried and failed, so no --checkpoint can help)."""
  steps = checkpoint_steps(ckpt_dir)
  found = ', '.join(f'ckpt-{s}' for s in steps) or 'none'
  advice = (f'restore the checkpoints from a copy, or move {ckpt_dir} away to start the run over'
            if none_restores else
            f'resume from one of them with --checkpoint=STEP, or with '
            f'--checkpoint={LATEST_INTACT} from the newest that restores')
  return ValueError(
      f'cannot resume from {ckpt_dir}: {reason}; checkpoints found: {found}; nothing was '
      f'deleted; {advice}')


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


# ---- the config a workdir was made with ---------------------------------------------------------
# Config fields that decide the shapes in a checkpoint, or what the run means: a workdir made with
# other values is not resumed (other fields, e.g. num_steps or logging, may change on resume).
STRUCTURAL_KEYS = ('experiment', 'data.name', 'data.image_size', 'data.channels', 'model',
                   'training.batch_size', 'training.bank_size', 'training.generator_update',
                   'langevin.temperature')


def _lookup(tree, dotted):
  for key in dotted.split('.'):
    tree = tree.get(key) if isinstance(tree, dict) else None
  return tree


def check_config(workdir, config, ckpt_dir, allow_change=False):
  """Refuses a workdir whose checkpoints were made by a config with other networks or data."""
  try:
    tf.io.gfile.makedirs(workdir)
  except tf.errors.OpError as e:
    raise PermissionError(f'cannot create workdir {workdir}: {e.message}') from e
  path = os.path.join(workdir, 'config.json')
  # Any checkpoint file counts, not only one the state file names (it may be damaged).
  if not (tf.io.gfile.exists(path) and checkpoint_steps(ckpt_dir)):
    return
  # Through load_config: a config.json of an older version gets the defaults it ran with.
  from tf_hat_ebm import checkpoints  # pylint: disable=g-import-not-at-top
  previous = checkpoints.load_config(workdir).to_dict()
  current = json.loads(config.to_json_best_effort())
  saved = _lookup(previous, 'training.checkpoint_data_iterator')
  if saved is not None and saved != config.training.checkpoint_data_iterator:
    # The checkpoints do (or do not) hold the input position: they restore only as written.
    raise ValueError(f'training.checkpoint_data_iterator was {saved} when the checkpoints of '
                     f'{workdir} were written; resume with '
                     f'--config.training.checkpoint_data_iterator={saved}')
  changed = [f'{k}: {_lookup(previous, k)!r} -> {_lookup(current, k)!r}'
             for k in STRUCTURAL_KEYS if _lookup(previous, k) != _lookup(current, k)]
  if changed and not allow_change:
    raise ValueError(f'workdir {workdir} was made by a different config '
                     f'({"; ".join(changed)}); use a new --workdir, or '
                     '--allow_config_change to resume anyway')


def write_config(workdir, config):
  """Writes config.json, once the restore succeeded (so it always matches the checkpoints)."""
  path = os.path.join(workdir, 'config.json')
  try:
    with tf.io.gfile.GFile(path + '.tmp', 'w') as f:
      f.write(config.to_json_best_effort(indent=2))
    tf.io.gfile.rename(path + '.tmp', path, overwrite=True)
  except tf.errors.OpError as e:
    raise PermissionError(f'cannot write to workdir {workdir}: {e.message}') from e


# ---- checkpoint managers -------------------------------------------------------------------------
def checkpoint_managers(ckpt_dir, step, items, local_items, keep, worker_index=0, is_chief=True,
                        multi_worker=False):
  """(checkpoint, manager, local checkpoint, local manager, archive manager) of a run.

  One worker: one checkpoint holds everything, replica-local parts (the bank) included. Several:
  the chief writes the replicated state to checkpoints/, the others to a temporary directory they
  delete (tf.distribute's convention), and every worker keeps its replica-local state in its own
  checkpoints/local/worker<i>/. Archived snapshots (checkpoints/archive/, never deleted; score_sde's
  checkpoints-meta vs checkpoints split) are written by the chief only.
  """
  local_checkpoint = local_manager = None
  if not multi_worker:
    checkpoint = tf.train.Checkpoint(step=step, **items, **local_items)
    write_dir = ckpt_dir
  else:
    checkpoint = tf.train.Checkpoint(step=step, **items)
    local_checkpoint = tf.train.Checkpoint(**local_items)
    local_manager = tf.train.CheckpointManager(
        local_checkpoint, os.path.join(ckpt_dir, 'local', f'worker{worker_index}'),
        max_to_keep=keep, step_counter=step)
    write_dir = ckpt_dir if is_chief else os.path.join(ckpt_dir, f'.tmp_worker{worker_index}')
  manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=keep, step_counter=step)
  archive = (tf.train.CheckpointManager(checkpoint, os.path.join(ckpt_dir, 'archive'),
                                        max_to_keep=None, step_counter=step)
             if is_chief else None)
  return checkpoint, manager, local_checkpoint, local_manager, archive
