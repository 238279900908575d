"""The kinds of experiment: one `Kind` per value of config.experiment, holding everything that
differs by kind: its contract (defaults, task, inference model, export module, the fields that
block a resume) and the hooks the tools ask of it (FLOP formula, samplers, ...), each typed by its
tool. Kinds only: a test's sizes live with the tests (tests/conftest.py), a benchmark's variants
with the benchmark (benchmarks/step_time.py).

A kind outside this file is a module path: config.experiment = 'package.module' names a module
that defines `KIND = registry.Kind(name='package.module', ...)` (docs/code.md). It is imported
when the user's own config names it (training); a workdir's config.json is data and names only
registered kinds, unless loaded with --trust_workdir_code (workdir.load_config).

Everything is named as 'module:attribute' and imported when used: the SN-GAN task pulls in TF-GAN
and TF Probability, seconds of start-up a synthesis run does not need, and this module stays free
of TensorFlow for the config files.
"""
import dataclasses
import importlib
from typing import Any, Mapping, Optional, Tuple

# Fields that decide the shapes in any checkpoint, or what the run means: a workdir made with other
# values is not resumed (others, e.g. num_steps or logging, may change on resume).
STRUCTURAL = ('experiment', 'data.name', 'data.image_size', 'data.channels', 'model',
              'training.batch_size')


@dataclasses.dataclass(frozen=True)
class Kind:
  """The contract of a kind: its defaults, its task, the inference model `load_run` restores, the
  SavedModel module every chain runs through, the fields that block a resume; and `hooks`, what
  the tools ask of it, each hook named and typed by the tool that uses it:

    flops           flops.StepFlops ('module:function'; step_time.py: GFLOP/s)
    samplers        evaluation.samplers.Samplers ('module:function'; what tf-hat-ebm-evaluate-fid
                    scores)
    sampler_run     evaluation.samplers.LoadRun ('module:function': a run without an inference
                    model)
    baselines       evaluation.compare.Baselines (bool: the generator alone and DDLS apply)
    release         release_import.Release ('conditional' or 'joint': the release's model type)
    grid_labels     summaries.GridLabels (panel labels of the training grids)
  A hook a kind lacks means the tool does not apply (or uses its default).
  """
  name: str
  config: str                     # 'module:function() -> ConfigDict', the kind's defaults (no TF)
  task: str                       # 'module:Class', a tasks.base.Task
  inference: Optional[str] = None  # 'module:function(config) -> tasks.base.InferenceModel'
  export: Optional[str] = None    # 'module:Class(model, image_shape, path_steps) -> tf.Module'
  structural: Tuple[str, ...] = ()  # fields besides STRUCTURAL that block a resume
  hooks: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def hook(self, name, default=None):
    """The hook `name` as given (data, or a 'module:attribute' string), or `default`."""
    return self.hooks.get(name, default)

  def load_hook(self, name):
    """The object a 'module:attribute' hook names, imported now; None when the kind has none."""
    spec = self.hooks.get(name)
    return load(spec) if spec else None

  def defaults(self):
    """The neutral defaults of the kind: a fresh, unlocked ConfigDict."""
    return load(self.config)()

  def task_class(self):
    return load(self.task)

  def make_task(self, config, strategy, **kwargs):
    return self.task_class()(config, strategy, **kwargs)

  def inference_model(self, config):
    """Networks of the run (no optimizer slots, no bank), to be restored from a checkpoint."""
    if self.inference is None:
      raise ValueError(f'{self.name} runs have no inference model; loadable: '
                       f'{", ".join(loadable())}')
    return load(self.inference)(config)

  def export_module(self, model, config, path_steps=None):
    """The SavedModel module of an inference model: the chain every evaluation samples with."""
    data = config.data
    return load(self.export)(model, (data.image_size, data.image_size, data.channels),
                             path_steps=path_steps)

  def structural_keys(self):
    return STRUCTURAL + tuple(self.structural)

  @staticmethod
  def defaults_of(name):
    """The defaults of any kind called `name`, or None for an unknown one (reported by whoever
    builds it): what an older config.json is completed with (workdir.load_config). Only
    registered kinds: nothing is imported here."""
    if not is_registered(name):
      return None
    try:
      return get(name).defaults()
    except ValueError:
      return None


_SYNTH, _JOINT = 'tf_hat_ebm.tasks.synthesis', 'tf_hat_ebm.tasks.joint'
KINDS = {k.name: k for k in (
    Kind('synthesis', 'tf_hat_ebm.config:synthesis_defaults', f'{_SYNTH}:SynthesisTask',
         f'{_SYNTH}:inference_model', 'tf_hat_ebm.export:ConditionalHatEBMModule',
         structural=('training.bank_size', 'training.generator_update', 'langevin.temperature'),
         hooks=dict(flops='tf_hat_ebm.flops:synthesis',
                    samplers='tf_hat_ebm.evaluation.samplers:synthesis', release='conditional')),
    Kind('joint', 'tf_hat_ebm.config:joint_defaults', f'{_JOINT}:JointTask',
         f'{_JOINT}:inference_model', 'tf_hat_ebm.export:JointHatEBMModule',
         structural=('langevin.temperature',),
         hooks=dict(flops='tf_hat_ebm.flops:joint',
                    samplers='tf_hat_ebm.evaluation.samplers:joint',
                    baselines=True, release='joint')),
    Kind('sngan', 'tf_hat_ebm.config:sngan_defaults', 'tf_hat_ebm.tasks.sngan:SNGANTask',
         hooks=dict(samplers='tf_hat_ebm.evaluation.samplers:sngan',
                    sampler_run='tf_hat_ebm.evaluation.samplers:load_sngan_run',
                    grid_labels={'x': 'SN-GAN samples G(z)'})),
    Kind('autoencoder', 'tf_hat_ebm.config:autoencoder_defaults',
         'tf_hat_ebm.tasks.autoencoder:AutoencoderTask',
         hooks=dict(grid_labels={'x': 'reconstructions of test images',
                                 'g_z': 'decoder samples D(z), z ~ N(0, I)'})),
)}


def get(name):
  """The kind called `name`: a built-in one, or the KIND of the module `name` names."""
  if name not in KINDS and '.' in name:
    try:
      kind = importlib.import_module(name).KIND
    except (ImportError, AttributeError) as e:
      raise ValueError(f'experiment {name!r}: no module {name} defining KIND ({e})') from e
    if kind.name != name:
      raise ValueError(f'module {name} defines the kind {kind.name!r}; set KIND.name = {name!r}')
    KINDS[name] = kind
  if name not in KINDS:
    raise ValueError(f'unknown experiment {name!r}; known: {", ".join(KINDS)} (or a module path '
                     'defining KIND)')
  return KINDS[name]


def is_registered(name):
  """A built-in kind, or one whose module this process's own code imported: nothing to import."""
  return name in KINDS


def for_config(config):
  return get(config.get('experiment', 'synthesis'))


def defaults(name):
  """The defaults of the kind `name`, for config files: `defaults('joint')` plus differences."""
  return get(name).defaults()


def loadable():
  return sorted(k for k, e in KINDS.items() if e.inference is not None)


def load(spec):
  module, _, name = spec.partition(':')
  return getattr(importlib.import_module(module), name)
