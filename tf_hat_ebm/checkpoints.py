"""The checkpoint files of a run: which exist, which one to load, restoring, the managers.

Nothing here deletes a checkpoint: a resume that cannot tell which checkpoint to use stops and
says which ones exist (`resume_error`).
"""
import os
import re

from absl import logging
import tensorflow as tf

# Resume from the newest checkpoint that restores, skipping damaged newer ones (only on request).
LATEST_INTACT = 'latest_intact'
_CKPT_FILE = re.compile(r'^ckpt-(\d+)\.(index|data-\d+-of-\d+)$')


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


def restore_checkpoint(checkpoint, path, partial=False):
  """checkpoint.restore(path), every object of `checkpoint` matched (and with `partial`, saved
  objects it lacks skipped); a failure is a ValueError holding the first line of TF's error."""
  try:
    status = checkpoint.restore(path)
    (status.expect_partial() if partial else status).assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError, IndexError) as e:
    # IndexError: what TF's reader raises on a truncated file ("Read less bytes than requested").
    raise ValueError(restore_detail(e)) from e


def restore_detail(error):
  """The first sentence of a failed restore's error, without TF's listing of variable values."""
  text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
  return text.split(' Showing ')[0][:300]


def list_checkpoints(ckpt_dir):
  """Steps N of the ckpt-N checkpoints in ckpt_dir that can be restored (an .index), ascending.

  Independent of the `checkpoint` state file, so a lost or garbled state file still shows what
  can be restored.
  """
  return sorted(s for s in checkpoint_steps(ckpt_dir)
                if tf.io.gfile.exists(os.path.join(ckpt_dir, f'ckpt-{s}.index')))


def state_file_checkpoint(ckpt_dir):
  """The latest checkpoint the state file names, or None (no, unreadable or stale state file)."""
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.ERROR)  # TF logs a garbled state file as a warning: we raise
  try:
    latest = tf.train.latest_checkpoint(ckpt_dir)
  except UnicodeDecodeError:  # bytes that are not text: unreadable as a garbled one is
    latest = None
  finally:
    logging.set_verbosity(verbosity)
  return latest if latest and tf.io.gfile.exists(latest + '.index') else None


def resolve_checkpoint(workdir, checkpoint=None, what=None, script=None):
  """The checkpoint path to load: `checkpoint` (a step N or a path), else the latest.

  With ckpt-N files present but no usable state file this is an error naming them: the run is
  still there, and "train first" would have the user start it over. `what` and `script` name the
  run a missing checkpoint should come from ('SN-GAN', 'experiments/train_sngan.py').
  """
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  steps = list_checkpoints(ckpt_dir)
  present = ', '.join(f'ckpt-{s}' for s in steps) or 'none'
  if checkpoint is not None:
    checkpoint = str(checkpoint)
    path = checkpoint_path(ckpt_dir, checkpoint)
    if not tf.io.gfile.exists(path + '.index'):
      raise ValueError(f'--checkpoint={checkpoint}: no checkpoint {path} (.index missing); '
                       f'checkpoints in {ckpt_dir}: {present}')
    return path
  latest = state_file_checkpoint(ckpt_dir)
  if latest:
    return latest
  if steps:
    raise ValueError(f'the state file {os.path.join(ckpt_dir, "checkpoint")} is missing or '
                     f'unreadable, but {present} exist: pass --checkpoint={steps[-1]} '
                     '(or another step) to load one')
  if what:
    raise FileNotFoundError(f'no {what} checkpoint in {ckpt_dir}; train one with {script} first')
  raise ValueError(f'no checkpoint in {ckpt_dir}: train first (the trainer saves every '
                   'training.checkpoint_every steps and at the end)')


def restore(path, items, what='the networks', hint='', shapes_from=None):
  """Restores `items` (name -> network or variable) from the checkpoint at `path`: the one
  restore of saved state outside the trainer. Other saved objects (optimizers, bank) are skipped;
  an item the checkpoint lacks, or of another shape, is a one-line ValueError. `shapes_from`: the
  file the networks' shapes come from, blamed for a shape mismatch (every checkpoint of a run has
  the same shapes, so another checkpoint cannot help)."""
  try:
    restore_checkpoint(tf.train.Checkpoint(**items), path, partial=True)
  except ValueError as e:
    if shapes_from and 'incompatible tensor with shape' in str(e):
      raise ValueError(f'cannot restore {what} from {path}: {e} The networks {shapes_from} '
                       'describes have other shapes than the checkpoint\'s: its model and data '
                       'fields must be those the run was trained with (edited? restore them)'
                       ) from e
    raise ValueError(f'cannot restore {what} from {path} (truncated, or a checkpoint of other '
                     f'networks?): {e}{hint}') from e


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
  try:
    manager = tf.train.CheckpointManager(checkpoint, write_dir, max_to_keep=keep,
                                         step_counter=step)
  except UnicodeDecodeError as e:  # it reads the state file, which holds bytes that are not text
    present = ', '.join(f'ckpt-{s}' for s in list_checkpoints(write_dir)) or 'none'
    raise ValueError(f'{os.path.join(write_dir, "checkpoint")}, the checkpoints\' state file, is '
                     f'not text ({e.reason} at byte {e.start}): move it away and rerun (the '
                     f'checkpoints present: {present})') from None
  archive = (tf.train.CheckpointManager(checkpoint, os.path.join(ckpt_dir, 'archive'),
                                        max_to_keep=None, step_counter=step)
             if is_chief else None)
  return checkpoint, manager, local_checkpoint, local_manager, archive
