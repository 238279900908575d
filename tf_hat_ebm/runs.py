"""Reading a trained run back: `load_run` gives its config, inference model and step.

Evaluation, export and sampling load a run with `load_run`, whatever the kind: the kind
(registry.py) builds the inference model (networks only, no optimizer slots or bank) and
checkpoints.restore fills it; the frozen generators of joint runs (generators.py) are restored the
same way.
"""
import dataclasses
import os
from typing import Any, Optional

import ml_collections
import tensorflow as tf

from tf_hat_ebm import checkpoints
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


def load_run(workdir, strategy: Optional[tf.distribute.Strategy] = None, checkpoint=None):
  """The inference model of workdir's run, restored from `checkpoint` (a step N, i.e. ckpt-N of
  workdir/checkpoints, or a checkpoint path; default: the latest)."""
  config = load_config(workdir)
  kind = registry.for_config(config)
  if kind.inference is None:
    raise ValueError(f'workdir {workdir} holds a {kind.name!r} run; loadable experiments: '
                     f'{", ".join(registry.loadable())}')
  path = checkpoints.resolve_checkpoint(workdir, checkpoint)
  with (strategy or tf.distribute.get_strategy()).scope():
    model = kind.inference_model(config)
  step = tf.Variable(0, dtype=tf.int64, trainable=False)
  others = [s for s in checkpoints.list_checkpoints(os.path.join(workdir, 'checkpoints'))
            if not path.endswith(f'ckpt-{s}')]
  checkpoints.restore(path, dict(step=step, **model.checkpoint_items()),
                      f'a {kind.name} model built from its config.json',
                      f'; try --checkpoint={others[-1]}' if others else '')
  return Run(config=config, model=model, step=int(step.numpy()), checkpoint=path, workdir=workdir,
             kind=kind)


def load_config(workdir):
  """workdir/config.json, an older one completed with its kind's defaults."""
  return workdir_lib.load_config(workdir, registry.Kind.defaults_of)
