"""The kinds of experiment: one `Kind` per value of config.experiment, holding everything that
differs by kind (defaults, task, inference model, export module, FLOP formula, the fields that block
a resume, the evaluation it offers, its test sizes). Scripts, benchmarks and tests ask it.

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
from typing import Mapping, Optional, Tuple

# Fields that decide the shapes in any checkpoint, or what the run means: a workdir made with other
# values is not resumed (others, e.g. num_steps or logging, may change on resume).
STRUCTURAL = ('experiment', 'data.name', 'data.image_size', 'data.channels', 'model',
              'training.batch_size')


@dataclasses.dataclass(frozen=True)
class Kind:
  name: str
  config: str                     # 'module:function() -> ConfigDict', the kind's defaults (no TF)
  task: str                       # 'module:Class', a tasks.base.Task
  inference: Optional[str] = None  # 'module:function(config) -> tasks.base.InferenceModel'
  export: Optional[str] = None    # 'module:Class(model, image_shape, path_steps) -> tf.Module'
  # 'module:function(config, h, g, batch, steps) -> (FLOPs of a training step, of one chain)' at
  # per-image forward FLOPs h (hat) and g (generator); None: no formula (step_time.py says so).
  flops: Optional[str] = None
  structural: Tuple[str, ...] = ()  # fields besides STRUCTURAL that block a resume
  # 'module:function(run, net, train, num_samples, runs, seed, batch_size) -> (rows, fids, chain)':
  # the FID rows evaluate_fid.py reports for a run of this kind.
  fid_rows: Optional[str] = None
  # 'module:function(workdir, checkpoint) -> run' for a kind without an inference model whose
  # fid_rows still score something (an SN-GAN's generator alone); None: runs.load_run.
  fid_run: Optional[str] = None
  # Labels of the training grids' panels ('x', 'g_z') where they are not X = G(Z) + Y and G(Z).
  grid_labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
  # The step_time.py variants of the kind's `perf` options (benchmarks/step_time.py).
  speed_variants: Tuple[str, ...] = ()
  # Runs whose chain starts from a frozen generator's latents: compare.py puts the generator alone
  # (and DDLS) beside the Hat EBM.
  baselines: bool = False
  # The authors' release's model type a run of this kind holds, 'conditional' or 'joint'
  # (release_import.py), or None: the release has none.
  release: Optional[str] = None
  tiny: Mapping[str, object] = dataclasses.field(default_factory=dict)  # tests' extra overrides

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

  def step_flops(self, config, h, g, batch, steps):
    """(FLOPs of a training step, of one chain), or None when the kind has no formula."""
    return load(self.flops)(config, h, g, batch, steps) if self.flops else None

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
         flops='tf_hat_ebm.flops:synthesis', fid_rows='tf_hat_ebm.evaluation.rows:synthesis',
         structural=('training.bank_size', 'training.generator_update', 'langevin.temperature'),
         release='conditional', speed_variants=('release', 'fast', 'bf16', 'xla'),
         tiny={'training.bank_size': 16}),
    Kind('joint', 'tf_hat_ebm.config:joint_defaults', f'{_JOINT}:JointTask',
         f'{_JOINT}:inference_model', 'tf_hat_ebm.export:JointHatEBMModule',
         flops='tf_hat_ebm.flops:joint', fid_rows='tf_hat_ebm.evaluation.rows:joint',
         structural=('langevin.temperature',), baselines=True,
         release='joint', speed_variants=('fast', 'bf16'),
         tiny={'training.num_steps': 2, 'training.sample_every': 2, 'optim.hat_lr': 1e-3}),
    Kind('sngan', 'tf_hat_ebm.config:sngan_defaults', 'tf_hat_ebm.tasks.sngan:SNGANTask',
         fid_rows='tf_hat_ebm.evaluation.rows:sngan',
         fid_run='tf_hat_ebm.evaluation.rows:load_sngan_run',
         grid_labels={'x': 'SN-GAN samples G(z)'},
         tiny={'training.n_dis': 2, 'training.num_steps': 2, 'training.sample_every': 2}),
    Kind('autoencoder', 'tf_hat_ebm.config:autoencoder_defaults',
         'tf_hat_ebm.tasks.autoencoder:AutoencoderTask',
         grid_labels={'x': 'reconstructions of test images',
                      'g_z': 'decoder samples D(z), z ~ N(0, I)'}),
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
