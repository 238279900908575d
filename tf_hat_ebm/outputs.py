"""A script's output directory: claimed by one writer, filled through staging, and replaced only
where the script wrote it itself (sample.py, export.py, compare_baselines.py)."""
import json
import os
import shutil
import tempfile

import tensorflow as tf

from tf_hat_ebm import workdir as workdir_lib


# A training workdir's own entries: no script's --output may be the workdir or one of these.
WORKDIR_OWN = ('checkpoints', 'tensorboard', 'samples')


def check_output_dir(path, overwrite, flag, owned=()):
  """Fails unless `path` can take a script's outputs (see OwnedOutput); its entries.

  A workdir (or its checkpoints/, tensorboard/, samples/) is never an output: the run's files
  there are not the script's to replace. A non-empty directory needs `overwrite`, and even then
  an entry of the same name as one of the script's outputs (`owned`) that the script's manifest
  does not list is an error, not replaced.
  """
  if not path:
    raise ValueError(f'--{flag} is empty: give a directory')
  if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
    raise ValueError(f'--{flag}={path} is a file; give a directory')
  parent, name = os.path.split(os.path.normpath(path))
  if _is_workdir(path) or (name in WORKDIR_OWN and _is_workdir(parent)):
    raise ValueError(f'--{flag}={path} is a training workdir or one of its own directories '
                     f'({", ".join(WORKDIR_OWN)}): give a directory of its own, e.g. '
                     f'{os.path.join(parent if name in WORKDIR_OWN else path, "generated")}')
  entries = [e.rstrip('/') for e in tf.io.gfile.listdir(path)] if tf.io.gfile.exists(path) else []
  if entries and not overwrite:
    shown = ', '.join(sorted(entries)[:3])
    raise ValueError(f'--{flag}={path} is not empty ({shown}{", ..." if len(entries) > 3 else ""})'
                     f': pass --overwrite to replace this script\'s output there, or choose '
                     'an empty or new directory')
  return entries


def _is_workdir(path):
  return bool(path) and (tf.io.gfile.exists(os.path.join(path, 'config.json'))
                         or tf.io.gfile.isdir(os.path.join(path, 'checkpoints')))


class OwnedOutput:
  """A script's output directory: it replaces only what it wrote itself, one writer at a time.

    with outputs.OwnedOutput(path, 'sample', overwrite, 'output') as out:
      write everything into out.staging ...
      out.commit()
  On entry the directory is claimed (`.<script>.lock`, taken atomically; a second writer is
  refused) and a uniquely named staging directory is made in it. `commit` moves the staged files
  in and records them in `.<script>.manifest.json`; an --overwrite rerun deletes only the files
  that manifest lists. A failure before `commit` leaves the earlier output as it was.
  """

  def __init__(self, path, script, overwrite, flag):
    self.path, self.script, self.overwrite, self.flag = path, script, overwrite, flag
    self.manifest = os.path.join(path, f'.{script}.manifest.json')
    self.staging, self._lock, self.written = None, None, []

  def check(self):
    """The early check (before the work): the path can take this script's outputs."""
    check_output_dir(self.path, self.overwrite, self.flag)

  def __enter__(self):
    self.check()
    try:
      tf.io.gfile.makedirs(self.path)
    except tf.errors.OpError as e:
      raise PermissionError(f'cannot write to --{self.flag}={self.path}: {e.message}') from e
    self._lock = workdir_lib.WorkdirLock(self.path, name=f'.{self.script}.lock',
                                         what=f'another {self.script} run')
    self._lock.__enter__()
    local = '://' not in self.path
    for name in tf.io.gfile.listdir(self.path):  # left by a killed run of this script
      if name.startswith(f'.{self.script}-staging-'):
        tf.io.gfile.rmtree(os.path.join(self.path, name.rstrip('/')))
    try:
      self.staging = tempfile.mkdtemp(prefix=f'.{self.script}-staging-',
                                      dir=self.path if local else None)
    except OSError as e:
      self._lock.__exit__(None, None, None)
      raise PermissionError(f'cannot write to --{self.flag}={self.path}: {e}') from e
    return self

  def _previous(self):
    if not tf.io.gfile.exists(self.manifest):
      return []
    try:
      with tf.io.gfile.GFile(self.manifest) as f:
        files = json.load(f).get('files', [])
      return [str(n) for n in files if '/' not in str(n) and str(n) not in ('', '.', '..')]
    except (ValueError, AttributeError, tf.errors.OpError):
      return []  # garbled: nothing is known to be ours, so nothing is deleted

  def commit(self):
    """Moves the staged entries into the output, replacing only this script's earlier files."""
    previous = self._previous()
    mine = {self.manifest, self._lock.path, self.staging}
    staged = sorted(e.rstrip('/') for e in tf.io.gfile.listdir(self.staging))
    # Checked again now (not only before the work): another command may have written here since.
    others = [e.rstrip('/') for e in tf.io.gfile.listdir(self.path)
              if os.path.join(self.path, e.rstrip('/')) not in mine]
    if others and not self.overwrite:
      raise FileExistsError(f'--{self.flag}={self.path} was written to while this run worked '
                            f'({", ".join(sorted(others)[:3])}): nothing of this run was kept; '
                            'rerun with another directory, or --overwrite to replace it')
    foreign = [name for name in staged if name in others and name not in previous]
    if foreign:
      raise FileExistsError(f'{os.path.join(self.path, foreign[0])} exists and was not written '
                            f'by {self.script}: move it away, or choose another directory')
    for name in previous:
      target = os.path.join(self.path, name)
      if tf.io.gfile.isdir(target):
        tf.io.gfile.rmtree(target)
      elif tf.io.gfile.exists(target):
        tf.io.gfile.remove(target)
    for name in staged:
      _move(os.path.join(self.staging, name), os.path.join(self.path, name))
    self.written = staged
    workdir_lib.write_atomic(
        self.manifest, json.dumps(dict(script=self.script, files=staged), indent=2))

  def __exit__(self, *exc):
    try:
      if self.staging and os.path.isdir(self.staging):
        shutil.rmtree(self.staging, ignore_errors=True)
    finally:
      self._lock.__exit__(*exc)
    return False


def _move(src, dst):
  if '://' not in dst:
    os.replace(src, dst)
  elif os.path.isdir(src):
    for name in os.listdir(src):
      _move(os.path.join(src, name), os.path.join(dst, name))
  else:
    tf.io.gfile.copy(src, dst, overwrite=True)
