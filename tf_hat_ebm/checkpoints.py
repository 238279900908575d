"""Reading a trained run back: config.json, its checkpoints, the one restore of saved networks.

Evaluation, export and sampling load a run with `load_run`, whatever the experiment: the registry
builds the experiment's inference model (networks only, no optimizer slots or bank) and
`restore` fills it; the frozen generators of joint runs (generators.py) are restored the same way.
"""
import dataclasses
import json
import os
from typing import Any, Optional

from absl import logging
import ml_collections
import tensorflow as tf

from tf_hat_ebm import registry
from tf_hat_ebm import validation
from tf_hat_ebm import workdir as workdir_lib


@dataclasses.dataclass
class Run:
  """A restored run: its config, inference model, step and checkpoint path."""
  config: ml_collections.ConfigDict
  model: Any
  step: int
  checkpoint: str
  workdir: str


def load_config(workdir):
  """workdir/config.json as a ConfigDict (the trainer writes it on the first run)."""
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
    config = json.loads(text)
  except ValueError as e:
    raise ValueError(f'{path} is not valid JSON ({e}): restore it from a copy, or rewrite it from '
                     'the training config (ConfigDict.to_json_best_effort)') from e
  if not isinstance(config, dict):
    raise ValueError(f'{path} holds a JSON {type(config).__name__}, not a config object')
  _migrate(config)
  experiment = registry.EXPERIMENTS.get(config.get('experiment', 'synthesis'))
  if experiment is not None:  # an unknown kind is reported by whoever builds it
    defaults = experiment.defaults().to_dict()
    for section, fields in IMPLICIT_BEFORE.items():
      defaults[section].update(fields)
    filled = fill_missing(config, defaults)
    if filled:
      logging.warning('%s was written by an older version: defaults filled in for %s', path,
                      ', '.join(filled))
  # Read back, the config is checked as at training start: an edited field never runs unchecked.
  return validation.validate(ml_collections.ConfigDict(config), source=path)


# Fields whose default changed when they were added: a config.json written before they existed
# gets the value the run was trained with (Mimicry's initialisation), not today's default.
IMPLICIT_BEFORE = {'model': {'init': 'mimicry'}}


def _migrate(config):
  """Moves fields of older config.json files to where they live now, in place."""
  latent_sphere = (config.get('generator') or {}).pop('latent_sphere', None)
  if latent_sphere is not None:  # now a chain setting
    for chain in ('langevin', 'sampling'):
      if isinstance(config.get(chain), dict):
        config[chain].setdefault('latent_sphere', latent_sphere)


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


def list_checkpoints(ckpt_dir):
  """Steps N of the ckpt-N checkpoints in ckpt_dir that can be restored (an .index), ascending.

  Independent of the `checkpoint` state file, so a lost or garbled state file still shows what
  can be restored.
  """
  return sorted(s for s in workdir_lib.checkpoint_steps(ckpt_dir)
                if tf.io.gfile.exists(os.path.join(ckpt_dir, f'ckpt-{s}.index')))


def _state_file_checkpoint(ckpt_dir):
  """The latest checkpoint the state file names, or None (no, unreadable or stale state file)."""
  verbosity = logging.get_verbosity()
  logging.set_verbosity(logging.ERROR)  # TF logs a garbled state file as a warning: we raise
  try:
    latest = tf.train.latest_checkpoint(ckpt_dir)
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
    path = workdir_lib.checkpoint_path(ckpt_dir, checkpoint)
    if not tf.io.gfile.exists(path + '.index'):
      raise ValueError(f'--checkpoint={checkpoint}: no checkpoint {path} (.index missing); '
                       f'checkpoints in {ckpt_dir}: {present}')
    return path
  latest = _state_file_checkpoint(ckpt_dir)
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


def restore(path, items, what='the networks', hint=''):
  """Restores `items` (name -> network or variable) from the checkpoint at `path`: the one
  restore of saved state outside the trainer. Other saved objects (optimizers, bank) are skipped;
  an item the checkpoint lacks, or of another shape, is a one-line ValueError."""
  try:
    tf.train.Checkpoint(**items).restore(path).expect_partial().assert_existing_objects_matched()
  except (tf.errors.OpError, AssertionError, ValueError, IndexError) as e:
    # IndexError: TF's reader of a truncated .data file.
    detail = restore_detail(e)
    raise ValueError(f'cannot restore {what} from {path} (truncated, or a checkpoint of other '
                     f'networks?): {detail}{hint}') from e


def restore_detail(error):
  """The first sentence of a failed restore's error, without TF's listing of variable values."""
  text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
  return text.split(' Showing ')[0][:300]


def load_run(workdir, strategy: Optional[tf.distribute.Strategy] = None, checkpoint=None,
             trust_code=False, allow_other_generator=False):
  """The inference model of workdir's run, restored from `checkpoint` (a step N, i.e. ckpt-N of
  workdir/checkpoints, or a checkpoint path; default: the latest).

  A joint run's generator is the one pinned in its config.json (other weights are an error unless
  `allow_other_generator`); a generator factory it names is code, imported only if `trust_code`.
  """
  config = load_config(workdir)
  gen = config.get('generator')
  if gen is not None and gen.source == 'factory' and not trust_code:
    # A workdir is data: opening one must not run code the user did not ask for.
    raise ValueError(f'{os.path.join(workdir, "config.json")} names the generator factory '
                     f'{gen.path!r}, code that loading this run would import and call; pass '
                     '--trust_workdir_code if you trust this workdir')
  if gen is not None and allow_other_generator:
    gen.fingerprint = ''
  experiment = registry.get(config.get('experiment', 'synthesis'))
  if experiment.inference is None:
    raise ValueError(f'workdir {workdir} holds a {experiment.kind!r} run; loadable experiments: '
                     f'{", ".join(registry.loadable())}')
  path = resolve_checkpoint(workdir, checkpoint)
  with (strategy or tf.distribute.get_strategy()).scope():
    model = experiment.inference_model(config)
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  others = [s for s in list_checkpoints(os.path.join(workdir, 'checkpoints'))
            if not path.endswith(f'ckpt-{s}')]
  restore(path, dict(step=step, **model.checkpoint_items()),
          f'a {experiment.kind} model built from its config.json',
          f'; try --checkpoint={others[-1]}' if others else '')
  return Run(config=config, model=model, step=int(step.numpy()), checkpoint=path, workdir=workdir)
