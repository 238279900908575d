"""Reading a trained run back: `load_run` gives its config, inference model and step.

Evaluation, export and sampling load a run with `load_run`, whatever the kind: the kind
(registry.py) builds the inference model (networks only, no optimizer slots or bank) and
checkpoints.restore fills it; the frozen generators of joint runs (generators.py) are restored the
same way.
"""
import dataclasses
import os
from typing import Any, Optional

from absl import logging
import ml_collections
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import generators
from tf_hat_ebm import registry
from tf_hat_ebm import workdir as workdir_lib


@dataclasses.dataclass
class Run:
  """A restored run: its config, inference model, step and checkpoint path."""
  config: ml_collections.ConfigDict
  model: Any
  step: int
  checkpoint: str
  workdir: str
  kind: registry.Kind
  # With allow_other_generator: the fingerprint of the generator loaded in place of the one the
  # run was trained with (config.generator.fingerprint), when they differ; else None.
  other_generator: Optional[str] = None


def load_run(workdir, strategy: Optional[tf.distribute.Strategy] = None, checkpoint=None,
             trust_code=False, allow_other_generator=False, generator_path=None,
             generator_checkpoint=None):
  """The inference model of workdir's run, restored from `checkpoint` (a step N, i.e. ckpt-N of
  workdir/checkpoints, or a checkpoint path; default: the latest).

  A joint run's generator is the one pinned in its config.json (other weights are an error unless
  `allow_other_generator`); a generator factory, a SavedModel generator (a graph of any ops) or
  a kind outside the library that it names is code, loaded only if `trust_code` (or, for the
  generator, when the caller names it as `generator_path`). `generator_path` /
  `generator_checkpoint` load it from where it is now (moved), or from another of its
  checkpoints (which needs `allow_other_generator`: other weights).
  """
  config = load_config(workdir, trust_code)
  gen = config.get('generator')
  trained = _generator_flags(config, workdir, trust_code, allow_other_generator,
                             generator_path, generator_checkpoint)
  kind = registry.for_config(config)
  if kind.inference is None:
    raise ValueError(f'workdir {workdir} holds a {kind.name!r} run; loadable experiments: '
                     f'{", ".join(registry.loadable())}')
  checkpoints.resolve_checkpoint(workdir, checkpoint)  # a missing one named before any build
  with (strategy or tf.distribute.get_strategy()).scope():
    try:
      model = kind.inference_model(config)
    except generators.PinnedGeneratorGone as e:  # say it with this command's flags
      present = f'--generator_checkpoint={e.present[-1]}' if e.present else (
          '--generator_checkpoint=STEP')
      raise ValueError(f'the generator this run was trained over, ckpt-{e.pinned} of {e.path}, '
                       f'is gone ({e.where()}): if it moved, pass --generator_path=ITS_NEW_DIR; '
                       f'to use another of its checkpoints, {present} --allow_other_generator'
                       ) from None
  other = None
  if gen is not None and allow_other_generator:  # the config keeps the weights it trained with
    other = gen.fingerprint if gen.fingerprint != trained else None
    gen.fingerprint = trained
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  path = _restore(workdir, checkpoint, dict(step=step, **model.checkpoint_items()),
                  f'a {kind.name} model built from its config.json')
  return Run(config=config, model=model, step=int(step.numpy()), checkpoint=path, workdir=workdir,
             kind=kind, other_generator=other)


ROTATION_RETRIES = 3  # a training writing a checkpoint every few seconds: plenty


def _restore(workdir, checkpoint, items, what):
  """Restores `items` from `checkpoint` (default: the latest); its path.

  A training that keeps few checkpoints (training.keep_checkpoints) may delete the latest while
  it is read: then the new latest is read instead, a few times at most, and a warning says so.
  """
  for attempt in range(ROTATION_RETRIES + 1):
    path = checkpoints.resolve_checkpoint(workdir, checkpoint)
    others = [s for s in checkpoints.list_checkpoints(os.path.join(workdir, 'checkpoints'))
              if not path.endswith(f'ckpt-{s}')]
    try:
      checkpoints.restore(path, items, what, f'; try --checkpoint={others[-1]}' if others else '',
                          shapes_from=os.path.join(workdir, 'config.json'))
      return path
    except ValueError:
      gone = not (tf.io.gfile.exists(path + '.index') and tf.io.gfile.glob(path + '.data-*'))
      if checkpoint is not None or not gone or attempt == ROTATION_RETRIES:
        raise
      logging.warning('%s was deleted while it was read (the training rotates its checkpoints, '
                      'training.keep_checkpoints): reading the latest one again', path)
  raise AssertionError('unreachable')


def _generator_flags(config, workdir, trust_code, allow_other, path, checkpoint):
  """Applies the generator flags of load_run to config.generator; the fingerprint it was
  trained with (None: no generator)."""
  gen = config.get('generator')
  if gen is None:
    if path or checkpoint is not None:
      raise ValueError(f'--generator_path / --generator_checkpoint apply to joint runs; '
                       f'{workdir} holds a {config.get("experiment")} run')
    return None
  if gen.source == 'factory' and not trust_code and not path:
    # A workdir is data: opening one must not run code the user did not ask for.
    raise ValueError(f'{os.path.join(workdir, "config.json")} names the generator factory '
                     f'{gen.path!r}, code that loading this run would import and call; pass '
                     '--trust_workdir_code if you trust this workdir')
  if gen.source == 'savedmodel' and not trust_code and not path:
    # A SavedModel's graph can hold any op (file writes, ...): loading it runs them.
    raise ValueError(f'{os.path.join(workdir, "config.json")} names the SavedModel generator '
                     f'{gen.path}, a graph whose ops loading this run would run; pass '
                     f'--generator_path={gen.path} if it is yours, or --trust_workdir_code if '
                     'you trust this workdir')
  if path:
    gen.path = generators.absolute_path(path)
  if checkpoint is not None:
    gen.checkpoint = int(checkpoint)
  trained = gen.get('fingerprint', '')
  if allow_other:
    gen.fingerprint = ''  # recorded by the load, then compared with `trained`
  return trained


def load_config(workdir, trust_code=False):
  """workdir/config.json, an older one completed with its kind's defaults; a kind outside the
  library is imported only if `trust_code`."""
  return workdir_lib.load_config(workdir, registry.Kind.defaults_of, trust_code)
