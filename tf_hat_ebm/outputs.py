"""A script's output directory: claimed by one writer, filled through staging, and replaced only
where the script wrote it itself (sample.py, export.py, compare_baselines.py)."""
import json
import os
import shutil
import stat
import tempfile

import tensorflow as tf

from tf_hat_ebm import files
from tf_hat_ebm import workdir as workdir_lib


# A training workdir's own entries: no script's --output may be the workdir or one of these.
WORKDIR_OWN = ('checkpoints', 'tensorboard', 'samples')


def leftovers(script):
  """What a killed run of `script` leaves in its output (its lock, staging, the aside directory
  and journal of a commit): the next run takes over or cleans them (OwnedOutput.__enter__), so
  they never make the output a used one."""
  return lambda name: (name in (f'.{script}.lock', f'.{script}.commit.json')
                       or name.startswith((f'.{script}-staging-', f'.{script}-old-')))


def check_output_dir(path, overwrite, flag, owned=(), script=None):
  """Fails unless `path` can take a script's outputs (see OwnedOutput); its entries.

  A workdir (or its checkpoints/, tensorboard/, samples/) is never an output: the run's files
  there are not the script's to replace. A non-empty directory needs `overwrite`, and even then
  an entry of the same name as one of the script's outputs (`owned`) that the script's manifest
  does not list is an error, not replaced. The leftovers of a killed run of `script` do not
  count.
  """
  if not path:
    raise ValueError(f'--{flag} is empty: give a directory')
  refuse_dangling_link(path, flag)
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise ValueError(f'--{flag}={path} is a file; give a directory')
  # Resolved through links: a symlink never carries an output into a workdir's own directory.
  real = os.path.realpath(path) if '://' not in path else path
  parent, name = os.path.split(os.path.normpath(real))
  if (_is_workdir(real) or (name in WORKDIR_OWN and _is_workdir(parent))
      or in_checkpoints(real)):
    raise ValueError(f'--{flag}={path} is a training workdir or one of its own directories '
                     f'({", ".join(WORKDIR_OWN)}): give a directory of its own, e.g. '
                     f'{os.path.join(parent if name in WORKDIR_OWN else path, "generated")}')
  entries = [e.rstrip('/') for e in tf.io.gfile.listdir(path)] if tf.io.gfile.exists(path) else []
  if script:
    entries = [e for e in entries if not leftovers(script)(e)]
  if entries and not overwrite:
    shown = ', '.join(sorted(entries)[:3])
    raise ValueError(f'--{flag}={path} is not empty ({shown}{", ..." if len(entries) > 3 else ""})'
                     f': pass --overwrite to replace this script\'s output there, or choose '
                     'an empty or new directory')
  return entries


def in_checkpoints(path):
  """The `checkpoints/` directory of a training workdir that `path` lies in (through links), or
  None: nothing but the trainer writes there."""
  if '://' in path:
    return None
  here = os.path.realpath(path)
  while True:
    parent = os.path.dirname(here)
    if os.path.basename(here) == 'checkpoints' and _is_workdir(parent):
      return here
    if parent == here:
      return None
    here = parent


# What each kind of result file starts as: an existing file at a tool's output path is replaced
# (with --overwrite) only when it is of the kind the tool writes, never a checkpoint or a user's.
_RESULT_KINDS = {'.png': ('a PNG image', lambda head: head.startswith(b'\x89PNG\r\n\x1a\n')),
                 '.json': ('a JSON object', lambda head: head.lstrip()[:1] == b'{')}


def check_result_file(path, overwrite, flag=None):
  """Fails unless `path` may take a tool's result file (fid.json, ood.json, a gallery PNG, ...).

  Never a directory, nor a file in a workdir's checkpoints/ (resolved through links); an existing
  file needs `overwrite`, and even then only a file of the kind the tool writes (by its
  extension: a PNG, a JSON object) is replaced. Checked before the work; `flag` names the flag.
  """
  where = f'--{flag}={path}' if flag else path
  if not path or tf.io.gfile.isdir(path):
    raise ValueError(f'{where or "the output file"} is {"a directory" if path else "empty"}: '
                     'give a file path')
  ckpt_dir = in_checkpoints(path)
  if ckpt_dir:
    raise ValueError(f'{where} lies in the training checkpoints {ckpt_dir}: nothing but the '
                     'trainer writes there; give a path outside the workdir\'s checkpoints/')
  if not (os.path.lexists(path) if '://' not in path else tf.io.gfile.exists(path)):
    return
  if not overwrite:
    raise ValueError(f'{where} exists: pass --overwrite to replace it')
  what, looks_right = _RESULT_KINDS.get(os.path.splitext(path)[1].lower(), (None, None))
  if what is None:
    return
  try:
    with tf.io.gfile.GFile(path, 'rb') as f:
      head = f.read(64)
  except tf.errors.OpError:
    head = b''  # a dangling link or unreadable file: not one this tool wrote
  if not looks_right(head):
    raise ValueError(f'{where} exists and is not {what}, so not a file this command wrote: even '
                     'with --overwrite only its own files are replaced; move it away, or give '
                     'another path')


class ResultWriter:
  """One writer per result file: `.<name>.lock` beside it is held for the whole run, and the
  files are checked (check_result_file) once it is held, so two runs at once (another --seed,
  neither --overwrite) cannot both write: the second is refused, as a second training is.

    with outputs.ResultWriter([fid_json], overwrite, 'evaluate_fid.py'):
      ... compute, then write the files ...
  """

  def __init__(self, paths, overwrite, tool, flag=None):
    self.paths, self.overwrite, self.flag = list(paths), overwrite, flag
    directory, name = os.path.split(self.paths[0])
    self._lock = workdir_lib.WorkdirLock(directory or '.', name=f'.{name}.lock',
                                         what=f'another {tool} run writing {name}')

  def check(self):
    for path in self.paths:
      check_result_file(path, self.overwrite, self.flag)

  def __enter__(self):
    self.check()  # before the lock: a bad path is an error, not a lock file
    self._lock.__enter__()
    try:
      self.check()  # again, held: another run may have written it since
    except BaseException:
      self._lock.__exit__(None, None, None)
      raise
    return self

  def __exit__(self, *exc):
    return self._lock.__exit__(*exc)


def refuse_dangling_link(path, flag):
  """A link to nowhere as an output directory is named as such (not 'a file')."""
  if os.path.islink(path) and not os.path.exists(path):
    raise ValueError(f'--{flag}={path} is a dangling symlink (to {os.readlink(path)}): remove it '
                     'or make its target a directory')


def _is_workdir(path):
  return bool(path) and (tf.io.gfile.exists(os.path.join(path, 'config.json'))
                         or tf.io.gfile.isdir(os.path.join(path, 'checkpoints')))


class OwnedOutput:
  """A script's output directory: it replaces only what it wrote itself, one writer at a time.

    with outputs.OwnedOutput(path, 'sample', overwrite, 'output') as out:
      write everything into out.staging ...
      out.commit()
  On entry the directory is claimed (`.<script>.lock`, taken atomically; a second writer is
  refused) and a uniquely named staging directory is made in it. `commit` moves the staged
  entries in and records each one in `.<script>.manifest.json` with what it is on disk (type,
  inode, size, mtime). An --overwrite rerun replaces only entries the manifest lists AND that are
  still exactly what this script wrote: an edited manifest naming other files, or an entry
  replaced since (e.g. by a symlink), is refused, never deleted. Nothing is deleted through a
  symlink. The swap is journalled (`.<script>.commit.json`): the earlier entries are renamed
  aside, the new ones renamed in, the manifest replaced, and only then the old ones deleted; a
  run killed midway is rolled back (or finished) by the next run, so the old or the new output
  always exists in full. A failure before `commit` leaves the earlier output as it was.
  """

  def __init__(self, path, script, overwrite, flag):
    self.path, self.script, self.overwrite, self.flag = path, script, overwrite, flag
    self.manifest = os.path.join(path, f'.{script}.manifest.json')
    self.journal = os.path.join(path, f'.{script}.commit.json')
    self.staging, self._lock, self.written = None, None, []

  def check(self):
    """The early check (before the work): the path can take this script's outputs."""
    check_output_dir(self.path, self.overwrite, self.flag, script=self.script)

  def __enter__(self):
    self.check()
    try:
      tf.io.gfile.makedirs(self.path)
    except tf.errors.OpError as e:
      raise PermissionError(f'cannot write to --{self.flag}={self.path}: {e.message}') from e
    self._lock = workdir_lib.WorkdirLock(self.path, name=f'.{self.script}.lock',
                                         what=f'another {self.script} run')
    self._lock.__enter__()
    try:
      self._recover()
      for name in tf.io.gfile.listdir(self.path):  # left by a killed run of this script
        if name.startswith((f'.{self.script}-staging-', f'.{self.script}-old-')):
          remove(os.path.join(self.path, name.rstrip('/')))
          print(f'Removed {os.path.join(self.path, name.rstrip("/"))}, left by a killed '
                f'{self.script} run.', flush=True)
      local = '://' not in self.path
      self.staging = tempfile.mkdtemp(prefix=f'.{self.script}-staging-',
                                      dir=self.path if local else None)
    except OSError as e:
      self._lock.__exit__(None, None, None)
      raise PermissionError(f'cannot write to --{self.flag}={self.path}: {e}') from e
    return self

  def _entry(self, name):
    return os.path.join(self.path, name)

  def _previous(self):
    """{name: recorded stat} of the entries the manifest lists, or {} (none, or garbled)."""
    if not tf.io.gfile.exists(self.manifest):
      return {}
    try:
      with tf.io.gfile.GFile(self.manifest) as f:
        files = workdir_lib.parse_json(f.read()).get('files', {})
      if isinstance(files, list):  # a manifest without stats: nothing can be checked
        files = {name: None for name in files}
      return {str(n): files[n] for n in files if _plain_name(str(n), self.script)}
    except (ValueError, AttributeError, TypeError, tf.errors.OpError):
      return {}  # garbled: nothing is known to be ours, so nothing is deleted

  def _own(self, previous):
    """The listed entries that are on disk exactly as this script left them; others refused."""
    own = []
    for name, recorded in sorted(previous.items()):
      target = self._entry(name)
      if not _exists(target):
        continue
      if '://' not in self.path and stat_of(target) != recorded:
        raise FileExistsError(
            f'{target} is listed in {self.manifest} but is not what {self.script} wrote there '
            '(changed, replaced or the manifest edited): nothing was deleted; move it away, or '
            'choose another directory')
      own.append(name)
    return own

  def commit(self):
    """Swaps the staged entries in for this script's earlier ones (see the class)."""
    previous = self._previous()
    mine = {self.manifest, self.journal, self._lock.path, self.staging}
    staged = sorted(e.rstrip('/') for e in tf.io.gfile.listdir(self.staging))
    # Checked again now (not only before the work): another command may have written here since.
    others = [e.rstrip('/') for e in tf.io.gfile.listdir(self.path)
              if self._entry(e.rstrip('/')) not in mine]
    if others and not self.overwrite:
      raise FileExistsError(f'--{self.flag}={self.path} was written to while this run worked '
                            f'({", ".join(sorted(others)[:3])}): nothing of this run was kept; '
                            'rerun with another directory, or --overwrite to replace it')
    foreign = [name for name in staged if name in others and name not in previous]
    if foreign:
      raise FileExistsError(f'{self._entry(foreign[0])} exists and was not written '
                            f'by {self.script}: move it away, or choose another directory')
    own = self._own(previous)
    if '://' in self.path:  # an object store renames nothing atomically: replace in place
      for name in own:
        remove(self._entry(name))
      for name in staged:
        _move(os.path.join(self.staging, name), self._entry(name))
      self._write_manifest(staged)
      return
    aside = tempfile.mkdtemp(prefix=f'.{self.script}-old-', dir=self.path)
    # The new entries' stats (a rename keeps them): a rollback removes only what this run moved.
    new = {name: stat_of(os.path.join(self.staging, name)) for name in staged}
    try:
      workdir_lib.write_atomic(self.journal, json.dumps(
          dict(aside=os.path.basename(aside), old=own, new=new)))
      for name in own:
        os.replace(self._entry(name), os.path.join(aside, name))
      for name in staged:
        os.replace(os.path.join(self.staging, name), self._entry(name))
      self._write_manifest(staged)
      os.remove(self.journal)  # committed: from here on the new output is the one
    except KeyboardInterrupt:
      if not os.path.lexists(self.journal):  # stopped before (or once done with) the renames
        remove(aside)
      raise KeyboardInterrupt(self._interrupted_swap(aside)) from None
    remove(aside)

  def _interrupted_swap(self, aside):
    """Ctrl-C amid the renames: rolled back (or completed) at once, else said where the old
    output waits and which command puts it back."""
    try:
      self._recover()
      state = 'holds the new output in full' if self.written else 'is as it was before this run'
      return f'interrupted while moving the new output into --{self.flag}={self.path}; it {state}'
    except (OSError, ValueError, KeyboardInterrupt):
      return (f'interrupted while moving the new output into --{self.flag}={self.path}: the '
              f'earlier output waits in {aside}; the same command with --overwrite puts it back '
              'and writes the new one')

  def _write_manifest(self, staged):
    files = {name: stat_of(self._entry(name)) if '://' not in self.path else None
             for name in staged}
    workdir_lib.write_atomic(self.manifest, json.dumps(
        dict(script=self.script, files=files), indent=2))
    self.written = staged

  def _recover(self):
    """Rolls back (or completes) a commit a killed run left half done (its journal)."""
    if '://' in self.path or not os.path.lexists(self.journal):
      return
    try:
      with open(self.journal) as f:
        journal = workdir_lib.parse_json(f.read())
      aside_name, old, new = str(journal['aside']), list(journal['old']), dict(journal['new'])
      aside = self._entry(aside_name)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
      raise FileExistsError(f'{self.journal} (an interrupted {self.script} commit) is unreadable '
                            f'({e}): check {self.path} by hand and remove it') from None
    # Only a directory of this script's own making is ever emptied or removed.
    if not (_plain_name(aside_name, '') and aside_name.startswith(f'.{self.script}-old-')
            and os.path.isdir(aside) and not os.path.islink(aside)):
      os.remove(self.journal)
      return
    previous = self._previous()
    committed = set(previous) == set(new) and all(
        stat_of(self._entry(n)) == previous[n] for n in new)
    if not committed:  # roll back: the killed run's new entries go, the old ones come back
      for name, recorded in new.items():
        if _plain_name(name, self.script) and stat_of(self._entry(name)) == recorded:
          remove(self._entry(name))  # moved in by the killed run (same inode and mtime)
      for name in old:
        if _plain_name(name, self.script) and os.path.lexists(os.path.join(aside, name)):
          os.replace(os.path.join(aside, name), self._entry(name))
    os.remove(self.journal)
    remove(aside)

  def __exit__(self, *exc):
    try:
      if self.staging and os.path.isdir(self.staging):
        remove(self.staging)
    finally:
      self._lock.__exit__(*exc)
    error = exc[1]
    disk = isinstance(error, OSError) and error.errno in files.FULL + files.READ_ONLY
    if disk and not error.filename:  # a memmap's, a zip's write: no path of its own
      raise PermissionError(files.cannot_write(f'--{self.flag}={self.path}', error)) from None
    return False


def _plain_name(name, script):
  """An entry name directly in the output that is not one of the script's own bookkeeping."""
  return (bool(name) and '/' not in name and '\\' not in name and name not in ('.', '..')
          and not (script and name.startswith(f'.{script}')))


def _exists(path):
  return os.path.lexists(path) if '://' not in path else tf.io.gfile.exists(path)


def stat_of(path):
  """What an entry is on disk, not following symlinks: [type, inode, size, mtime in ns]."""
  try:
    st = os.lstat(path)
  except FileNotFoundError:
    return None
  kind = 'link' if stat.S_ISLNK(st.st_mode) else 'dir' if stat.S_ISDIR(st.st_mode) else 'file'
  return [kind, st.st_ino, st.st_size if kind == 'file' else 0, st.st_mtime_ns]


def remove(path):
  """Deletes `path`; a symlink is unlinked, never followed (nor any link inside a directory)."""
  if '://' in path:
    if tf.io.gfile.isdir(path):
      tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
      tf.io.gfile.remove(path)
  elif os.path.islink(path) or not os.path.isdir(path):
    if os.path.lexists(path):
      os.unlink(path)
  else:
    shutil.rmtree(path)  # rmtree unlinks the symlinks it meets inside, never follows them


def _move(src, dst):
  if os.path.isdir(src):
    for name in os.listdir(src):
      _move(os.path.join(src, name), os.path.join(dst, name))
  else:
    tf.io.gfile.copy(src, dst, overwrite=True)
