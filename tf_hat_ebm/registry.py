"""The one registry: an experiment kind (config.experiment) gives its config defaults, task,
inference model and export module. Every script and benchmark goes through here.

Modules are named, not imported, until used: the SN-GAN task pulls in TF-GAN and TF Probability,
seconds of start-up that a synthesis run does not need.
"""
import dataclasses
import importlib
from typing import Optional

from tf_hat_ebm import config as config_lib


@dataclasses.dataclass(frozen=True)
class Experiment:
  kind: str
  task: str                       # 'module:Class', a tasks.base.Task
  inference: Optional[str] = None  # 'module:function(config) -> tasks.base.InferenceModel'
  export: Optional[str] = None    # 'module:Class(model, image_shape, path_steps) -> tf.Module'

  def defaults(self):
    return config_lib.defaults(self.kind)

  def task_class(self):
    return _load(self.task)

  def inference_model(self, config):
    """Networks of the run (no optimizer slots, no bank), to be restored from a checkpoint."""
    if self.inference is None:
      raise ValueError(f'{self.kind} runs have no inference model; loadable: '
                       f'{", ".join(loadable())}')
    return _load(self.inference)(config)

  def export_module(self, model, config, path_steps=None):
    """The SavedModel module of an inference model: the chain every evaluation samples with."""
    data = config.data
    return _load(self.export)(model, (data.image_size, data.image_size, data.channels),
                              path_steps=path_steps)


EXPERIMENTS = {e.kind: e for e in (
    Experiment('synthesis', 'tf_hat_ebm.tasks.synthesis:SynthesisTask',
               'tf_hat_ebm.tasks.synthesis:inference_model', 'tf_hat_ebm.export:HatEBMModule'),
    Experiment('joint', 'tf_hat_ebm.tasks.joint:JointTask',
               'tf_hat_ebm.tasks.joint:inference_model', 'tf_hat_ebm.export:JointHatEBMModule'),
    Experiment('sngan', 'tf_hat_ebm.tasks.sngan:SNGANTask'),
    Experiment('autoencoder', 'tf_hat_ebm.tasks.autoencoder:AutoencoderTask'),
)}


def get(kind):
  if kind not in EXPERIMENTS:
    raise ValueError(f'unknown experiment {kind!r}; known: {", ".join(EXPERIMENTS)}')
  return EXPERIMENTS[kind]


def for_config(config):
  return get(config.get('experiment', 'synthesis'))


def loadable():
  return sorted(k for k, e in EXPERIMENTS.items() if e.inference is not None)


def _load(spec):
  module, _, name = spec.partition(':')
  return getattr(importlib.import_module(module), name)
