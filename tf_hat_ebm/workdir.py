"""A training workdir: its layout, lock, config.json (read, checked, written) and housekeeping.

Layout (score_sde's): checkpoints/ (ckpt-N, archive/, local/worker<i>/ with several workers;
checkpoints.py), tensorboard/, samples/, config.json, run_info.json, train.lock.

Only the exact leftovers of a killed write are ever removed here.
"""
import json
import os
import re
import socket
import time

from absl import logging
import ml_collections
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import files
from tf_hat_ebm import registry
from tf_hat_ebm import validation

LOCK_NAME = 'train.lock'

# What a SIGKILL during a save leaves: TF's '<prefix>_temp/' shard folder, our config.json.tmp.
_ORPHAN = re.compile(r'^ckpt-\d+_temp')


class WorkdirLockedError(PermissionError):
  """Another training run holds the workdir."""


class WorkdirLock:
  """workdir/train.lock holding {"pid", "host"} of the run training in it; released on exit.

  A lock left by a process that is gone (same host, pid not alive, or alive but started at
  another time than the lock records: the pid was reused by an unrelated process) is taken over
  with a message. Only local workdirs are locked: an object store has no atomic create-if-absent.
  """

  def __init__(self, workdir, log=print, name=LOCK_NAME, what='another training run'):
    self.path = os.path.join(workdir, name)
    self.log, self.held, self.what = log, False, what

  def __enter__(self):
    if '://' in self.path:
      return self
    try:
      return self._take()
    except (WorkdirLockedError, PermissionError):
      raise
    except OSError as e:  # a read-only or full filesystem: the path and what to do
      raise PermissionError(f'cannot take the lock {self.path}: {e.strerror or e}; '
                            f'{files.what_to_do(e)}') from None

  def _take(self):
    os.makedirs(os.path.dirname(self.path) or '.', exist_ok=True)
    mine = json.dumps(dict(pid=os.getpid(), host=socket.gethostname(),
                           start=process_start(os.getpid())))
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
                         and not _holder_alive(owner)):
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
      try:
        with os.fdopen(fd, 'w') as f:
          f.write(mine)
      except OSError:  # a full disk: no empty lock left behind for the next run
        os.remove(self.path)
        raise
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
      owner = parse_json(f.read())
    return owner if isinstance(owner, dict) else {}
  except (OSError, ValueError):
    return {}  # garbled or half-written: treated as a lock of this host whose pid is gone


def process_start(pid):
  """When the process `pid` started (clock ticks since boot, /proc/<pid>/stat), or None."""
  try:
    with open(f'/proc/{int(pid)}/stat') as f:
      return int(f.read().rsplit(')', 1)[1].split()[19])  # field 22: starttime
  except (OSError, ValueError, IndexError, TypeError):
    return None


def _holder_alive(owner):
  """The lock's process still runs: its pid is alive and started when the lock says (a lock
  without that record: the pid runs Python); else the pid now belongs to an unrelated process."""
  pid = owner.get('pid')
  if not _pid_alive(pid):
    return False
  recorded = owner.get('start')
  if recorded is not None:
    return process_start(pid) in (None, recorded)
  try:
    with open(f'/proc/{int(pid)}/cmdline', 'rb') as f:
      return b'python' in f.read()
  except (OSError, ValueError):
    return True  # cannot tell: assume it is the holder


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
def load_config(workdir, defaults=None, trust_code=False):
  """workdir/config.json as a ConfigDict (the trainer writes it on the first run).

  defaults: experiment name -> that kind's defaults (or None); the fields an older config.json
  lacks are filled in from them. trained_run.load_config passes every kind's (registry.py).
  Its `experiment` must be a registered kind (a built-in one, or one this process's own code
  imported); a module path is imported only if `trust_code`: a workdir is data.
  """
  path = os.path.join(workdir, 'config.json')
  if not tf.io.gfile.exists(path):
    raise ValueError(f'no config.json in workdir {workdir}: is it the --workdir of a training run?')
  if tf.io.gfile.isdir(path):
    raise ValueError(f'{path} is a directory, not the config file of a training run')
  try:
    with tf.io.gfile.GFile(path) as f:
      text = f.read()
  except (tf.errors.OpError, UnicodeDecodeError) as e:
    raise ValueError(f'cannot read {path}: {getattr(e, "message", e)}') from e
  try:
    config = parse_json(text)
  except ValueError as e:
    raise ValueError(f'{path} is not valid JSON ({e}): restore it from a copy, or rewrite it from '
                     'the training config (ConfigDict.to_json_best_effort)') from e
  if not isinstance(config, dict):
    raise ValueError(f'{path} holds a JSON {type(config).__name__}, not a config object')
  check_kind(path, config.get('experiment', 'synthesis'), trust_code)
  check_pin(workdir, path, config)
  # Without `defaults`, the registered kind's: every read-back config is checked field by field.
  kind_defaults = (defaults or registry.Kind.defaults_of)(config.get('experiment', 'synthesis'))
  if kind_defaults is not None:
    filling = kind_defaults.to_dict()
    for dotted in config_lib.left_out(config):
      section, _, name = dotted.rpartition('.')
      filling.get(section, {}).pop(name, None)
    filled = fill_missing(config, filling)
    if filled:
      logging.warning('%s was written by an older version: defaults filled in for %s', path,
                      ', '.join(filled))
  # Read back, the config is checked as at training start: an edited field never runs unchecked.
  return validation.validate(ml_collections.ConfigDict(config), kind_defaults, source=path)


def check_kind(path, name, trust_code):
  """Fails unless the kind `name` a config.json names is registered, or trusted (then imported)."""
  if not isinstance(name, str):
    raise ValueError(f'{path}: config field experiment must be a string; got {name!r}')
  if registry.is_registered(name):
    return
  if not trust_code:
    raise ValueError(f'{path} names the experiment {name!r}, not a kind of tf_hat_ebm: loading '
                     f'it would import the module {name}, code from a workdir; pass '
                     '--trust_workdir_code if you trust this workdir (known kinds: '
                     f'{", ".join(registry.KINDS)})')
  registry.get(name)  # the user's own code: imported, its KIND registered


def check_pin(workdir, path, config):
  """Refuses an empty generator.fingerprint in the config.json of a run that trained (has
  checkpoints): every such run recorded one, and an empty one would turn the pin off."""
  gen = config.get('generator')
  if (isinstance(gen, dict) and gen.get('fingerprint') == ''
      and checkpoints.checkpoint_steps(os.path.join(workdir, 'checkpoints'))):
    raise ValueError(f'{path}: generator.fingerprint is empty, but this run recorded the weights '
                     'of its generator there (edited?): restore it from a copy of config.json; to '
                     'load whatever generator is there now, set any 16 hex digits and pass '
                     '--allow_other_generator')


def fill_missing(config, defaults, prefix=''):
  """Adds the fields of `defaults` that the dict `config` lacks, in place; their dotted names.

  Values present in `config` stay as they are, and so do fields `defaults` does not know.
  """
  filled = []
  for name, value in defaults.items():
    if name not in config:
      config[name] = value
      filled.append(prefix + name)
    elif isinstance(value, dict) and isinstance(config[name], dict):
      filled += fill_missing(config[name], value, f'{prefix}{name}.')
  return filled


def _lookup(tree, dotted):
  for key in dotted.split('.'):
    tree = tree.get(key) if isinstance(tree, dict) else None
  return tree


def check_config(workdir, config, ckpt_dir, kind, allow_change=False):
  """Refuses a workdir whose checkpoints were made by a config with other networks or data (the
  fields `kind.structural_keys()` names); `kind` is config's (registry.Kind)."""
  try:
    tf.io.gfile.makedirs(workdir)
  except tf.errors.OpError as e:
    raise PermissionError(f'cannot create workdir {workdir}: {e.message}') from e
  path = os.path.join(workdir, 'config.json')
  # Any checkpoint file counts, not only one the state file names (it may be damaged).
  if not (tf.io.gfile.exists(path) and checkpoints.checkpoint_steps(ckpt_dir)):
    return
  # Through load_config: a config.json of an older version gets the defaults it ran with.
  previous = load_config(workdir, kind.defaults_of).to_dict()
  current = json.loads(config.to_json_best_effort())
  saved = _lookup(previous, 'training.checkpoint_data_iterator')
  if saved is not None and saved != config.training.checkpoint_data_iterator:
    # The checkpoints do (or do not) hold the input position: they restore only as written.
    raise ValueError(f'training.checkpoint_data_iterator was {saved} when the checkpoints of '
                     f'{workdir} were written; resume with '
                     f'--config.training.checkpoint_data_iterator={saved}')
  changed = [f'{k}: {_lookup(previous, k)!r} -> {_lookup(current, k)!r}'
             for k in kind.structural_keys()
             if _lookup(previous, k) != _lookup(current, k)]
  if changed and not allow_change:
    raise ValueError(f'workdir {workdir} was made by a different config '
                     f'({"; ".join(changed)}); use a new --workdir, or '
                     '--allow_config_change to resume anyway')


def parse_json(text):
  """json.loads(text); a document nested too deeply for Python's parser (a RecursionError) is
  malformed JSON like any other: a ValueError, which every reader turns into one line naming
  the file."""
  try:
    return json.loads(text)
  except RecursionError:
    raise ValueError('nested too deeply to be read') from None


def write_atomic(path, content):
  """Writes `content` (str or bytes) to `path` through a temporary file and a rename: a reader
  never sees a half-written file, and a failed write leaves the old one (files.write_atomic; an
  object store's through path.tmp). A full or read-only disk is a one-line PermissionError."""
  if '://' not in path:
    try:
      return files.write_atomic(path, content)
    except OSError as e:
      raise PermissionError(files.cannot_write(path, e)) from None
  with tf.io.gfile.GFile(path + '.tmp', 'wb' if isinstance(content, bytes) else 'w') as f:
    f.write(content)
  tf.io.gfile.rename(path + '.tmp', path, overwrite=True)


def write_config(workdir, config):
  """Writes config.json, once the restore succeeded (so it always matches the checkpoints)."""
  try:
    write_atomic(os.path.join(workdir, 'config.json'), config.to_json_best_effort(indent=2))
  except tf.errors.OpError as e:
    raise PermissionError(f'cannot write to workdir {workdir}: {e.message}') from e
