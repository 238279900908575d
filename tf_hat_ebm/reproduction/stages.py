"""The reproduction's stages as data: per scale its configs, evaluation flags, the paper's numbers.

A stage's commands are recorded as a user runs them from the output directory: `python`, the
project's `experiments/` scripts, and paths relative to --out (runner.py runs them there); each
is a typed plan.Invocation, each stage a plan.Stage of a plan.StageKind.
Parts and stages carry the paper's names: synthesis, refinement, retrofit, ood, ablations, figures.
"""
import dataclasses
import json
import os
from typing import Dict, Optional, Tuple

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import errors
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import plateau
from tf_hat_ebm.reproduction.plan import Invocation, KINDS, Stage

PARTS = ('synthesis', 'refinement', 'retrofit', 'ood', 'ablations', 'figures')


@dataclasses.dataclass(frozen=True)
class FidSize:
  """How a scale's FID stages score: samples per run (None: the tool's default), runs, batch."""
  num_samples: Optional[int]
  runs: int
  batch_size: Optional[int] = None

  def flags(self):
    return tuple([f'--num_samples={self.num_samples}'] if self.num_samples else []) + (
        f'--runs={self.runs}',) + tuple([f'--batch_size={self.batch_size}']
                                        if self.batch_size else [])


@dataclasses.dataclass(frozen=True)
class Scale:
  """One scale of the pipeline: config per kind, evaluation flags, ETA seconds per kind."""
  configs: Dict[str, str]
  fid: FidSize
  ood: Tuple[str, ...]
  samples: Tuple[str, ...]
  # Estimated idle seconds per stage kind, and of its FID ('fid', or 'fid_<kind>' where it
  # differs): the ETA, rescaled as measured. Measured numbers are data: ETA_FILE's.
  seconds: Dict[str, float]
  seeds: Tuple[int, ...]
  precision: Optional[str] = None  # training precision unless --precision says otherwise
  # Table 2's and Table 1's other datasets: (dataset, config) and (dataset, SN-GAN config, config).
  more_synthesis: Tuple[Tuple[str, str], ...] = ()
  more_refinement: Tuple[Tuple[str, str, str], ...] = ()
  # A near-OOD split: a synthesis model of these digits, scored on the others (Table 3).
  near_ood_classes: Tuple[int, ...] = ()
  calibrate: bool = False  # the FID's floor / memorisation bound at its N, samples' coverage
  # Runs this scale shortens, by the stem of their stage's name: config overrides. Why each:
  # departures.json's 'shortened' (the report's scope section says it).
  shortened: Dict[str, Dict[str, object]] = dataclasses.field(default_factory=dict)
  # Ablation arms this scale does not run, by stem (why: departures.json's 'dropped').
  dropped: Tuple[str, ...] = ()
  # Arms this scale adds beside a reference run: stem -> (reference stem, config).
  more_arms: Dict[str, Tuple[str, str]] = dataclasses.field(default_factory=dict)
  # A refinement of each synthesis run's own G (a strong generator) beside Table 1.
  refine_own: bool = False


_SHORT_ARM = {'training.num_steps': 3000, 'training.checkpoint_every': 250,
              'training.sample_every': 250}
# The ETA's seconds per scale (shipped with the package: pyproject.toml's package-data).
ETA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'eta.json')
with open(ETA_FILE) as _f:
  ETA = json.load(_f)

SCALES = {
    # Each config at its own length; FID of 1,000 samples with the digits classifier.
    'digits': Scale(
        configs=dict(synthesis='digits_synth', sngan='digits_sngan', refinement='digits_refine',
                     autoencoder='digits_autoencoder', retrofit='digits_retrofit'),
        fid=FidSize(1000, 2), ood=(), samples=('--num_samples=500',),
        seconds=ETA['digits'],  # a refinement's FID runs DDLS's chain too: fid_refinement
        seeds=(0, 1, 2), near_ood_classes=(0, 1, 2, 3, 4), calibrate=True,
        shortened=dict(
            # the unstable arms: a shorter run with a checkpoint every 250 steps, so the end
            # window's 5 checkpoints see their swings; near-OOD at its best AUROC's length
            current=_SHORT_ARM, coop_bn=_SHORT_ARM, nearood={'training.num_steps': 2000}),
        # its verdict cannot change at this scale (the residual stays at the data noise's scale)
        dropped=('noresidual',),
        # the synthesis at the paper's Langevin time (the config runs 0.4x of it), paired
        more_arms=dict(paper_time=('synthesis', 'digits_synth_paper_time')), refine_own=True),
    # The paper configs in float32, as the paper and the release trained.
    'paper': Scale(
        configs=dict(synthesis='cifar10_synth', sngan='cifar10_sngan',
                     refinement='cifar10_refine', autoencoder='cifar10_autoencoder',
                     retrofit='cifar10_retrofit'),
        fid=FidSize(None, 3), ood=(), samples=('--num_samples=64',),
        seconds=ETA['paper'],
        seeds=(0,), precision='float32',
        more_synthesis=(('celeba', 'celeba_synth'), ('imagenet128', 'imagenet128_synth'),
                        ('imagenet128_large', 'imagenet128_synth_large')),
        more_refinement=(('celeba', 'celeba_sngan', 'celeba_refine'),)),
}
# Evaluation sizes that go with a config size (config.SIZES): the tests' pipeline in seconds.
EVAL_SIZES = {'tiny': dict(fid=FidSize(20, 2, batch_size=10),
                           ood=('--num=50',), samples=('--num_samples=4', '--path_chains=2'),
                           seconds=5)}

# The historical-generator-update figure: each arm's training grid at this step, side by side.
HISTORICAL_STEP = 500
# Ablation arms: name -> (part of the reference stage's name, config overrides). Cooperative
# learning without batch norm is the update of 'current' (tasks/synthesis.py): one run, both rows.
ABLATIONS = {
    'current': ('synthesis', {'training.generator_update': 'current'}),
    'coop_bn': ('synthesis', {'training.generator_update': 'cooperative_bn'}),
    'noresidual': ('refinement', {'langevin.use_residual': False,
                                  'sampling.use_residual': False}),
}
# The release's CIFAR-10 refinement files (--release_sngan=DIR): hat and SN-GAN generator.
RELEASE_FILES = dict(hat='ebm.ckpt', generator='gen.ckpt')
# The imported SN-GAN's workdir: inside the stage's directory (which holds its log and record),
# never that directory itself, which the import would refuse as not empty on every rerun.
RELEASE_GAN = 'sngan_release/generator'


@dataclasses.dataclass
class Options:
  """What the user asked for (experiments/reproduce.py's flags)."""
  out: str
  scale: str = 'digits'
  seeds: Tuple[int, ...] = (0, 1, 2)
  parts: Tuple[str, ...] = PARTS
  size: Optional[str] = None  # config size (config.SIZES), e.g. 'tiny' for the tests
  tpu: Optional[str] = None
  data_dir: Optional[str] = None
  inception_path: Optional[str] = None
  precision: Optional[str] = None  # None: the scale's (float32 at paper scale)
  release_sngan: Optional[str] = None
  jobs: str = 'auto'
  dry_run: bool = False
  overwrite: bool = False
  previous_reports: Tuple[str, ...] = ()  # earlier report.json files: verdicts that flip

  def training_precision(self):
    return self.precision or SCALES[self.scale].precision


def resolved_config(stage):
  """The config a training stage runs with: its file (and size) and the command's overrides."""
  path, _, size = stage.config.partition(':')
  try:
    config = config_lib.load_file(os.path.join(config_lib.configs_dir(),
                                               path[len('experiments/configs/'):]),
                                  *([size] if size else []))
  except TypeError as e:  # a config whose get_config takes no size
    raise ValueError(f'{stage.config}: {errors.one_line(e)}') from None
  for key, value in stage.overrides.items():
    section, name = config_lib.field_parent(config, key)
    if section is None:
      raise ValueError(f'stage {stage.name}: {stage.config} has no field {key}')
    section[name] = value
  return config


def window_steps(training):
  """The checkpoints before the last that a finished run keeps (its `keep_checkpoints` newest,
  every `checkpoint_every` steps), past the plateau rule's 2/3 checkpoint: with the end, the
  rule's end window (plateau.py)."""
  every, keep = int(training.checkpoint_every), int(training.get('keep_checkpoints', 1))
  mid = plateau.checkpoint_step(training.num_steps, training.get('steps_per_loop', 1))
  last = (int(training.num_steps) - 1) // every * every  # the newest one before the end
  return [s for s in (last - j * every for j in reversed(range(keep - 1))) if s > mid]


def flag_value(value):
  """A config override as a flag's text: a tuple as comma-separated values (0,1,2)."""
  return ','.join(map(str, value)) if isinstance(value, tuple) else f'{value}'


class _Builder:
  """Collects the stages of one set of Options."""

  def __init__(self, options):
    self.o, self.scale, self.stages = options, SCALES[options.scale], []
    sized = EVAL_SIZES.get(options.size, {})
    self.fid_size = sized.get('fid', self.scale.fid)
    self.fid = self.fid_size.flags() + ('--feature_cache_dir=feature_cache',)
    if options.inception_path:
      self.fid += (f'--inception_path={options.inception_path}',)
    self.ood = tuple(sized.get('ood', self.scale.ood))
    self.samples = tuple(sized.get('samples', self.scale.samples))

  def config_file(self, config):
    size = f':{self.o.size}' if self.o.size else ''
    return f'experiments/configs/{config}.py{size}'

  def train_command(self, kind, config, workdir, overrides):
    flags = [f'--config.{k}={flag_value(v)}' for k, v in overrides.items()]
    if self.o.data_dir and not config.startswith('digits'):
      flags.append(f'--config.data.data_dir={self.o.data_dir}')
    if self.o.tpu:
      flags.append(f'--tpu={self.o.tpu}')
    return Invocation(kind.script, workdir, tuple(flags), config=self.config_file(config))

  def fid_command(self, workdir, baselines=True, **at):
    return Invocation('experiments/evaluate_fid.py', workdir, self.fid, baselines=baselines, **at)

  def trained(self, name, kind, part, seed, config=None, extra=None, after=(), scored=True,
              reference=None, label=None, baselines=True):
    """A training stage in <out>/<name>/, then (`scored`) the FID of its samples (and of its
    baselines: a refinement's SN-GAN and DDLS)."""
    config, kind = config or self.scale.configs[kind], KINDS[kind]
    overrides = dict({'seed': seed}, **(extra or {}))
    if self.o.training_precision() and kind.hat_ebm:
      overrides['perf.precision'] = self.o.training_precision()
    stage = Stage(name, kind, part, [], [None], workdir=name, after=after,
                  result=plan.FID if scored else plan.NONE, reference=reference,
                  config=self.config_file(config), overrides=overrides, label=label,
                  guard_stop_is_result=scored and kind.hat_ebm)
    shorter = {} if self.o.size else self.scale.shortened.get(name.rsplit('_s', 1)[0], {})
    if shorter:
      full = resolved_config(stage).training.num_steps
      overrides.update(shorter)
      stage.length = resolved_config(stage).training.num_steps / full
    if scored:
      # The plateau rule's checkpoint: archived (kept whatever keep_checkpoints prunes), scored
      # after the end's FID; the Hat EBM alone (an SN-GAN's one row is its generator).
      t = resolved_config(stage).training
      step = plateau.checkpoint_step(t.num_steps, t.get('steps_per_loop', 1))
      overrides['training.archive_every'] = step
      # enough kept checkpoints for the rule's end window (window_steps)
      overrides['training.keep_checkpoints'] = max(int(t.get('keep_checkpoints', 1)),
                                                   plateau.MIN_CHECKPOINTS - 1)
      stage.commands.append(self.fid_command(name, baselines))
      stage.outputs.append(f'{name}/fid.json')
      stage.commands.append(self.fid_command(
          name, kind.plateau_baselines, checkpoint=step, checkpoints='checkpoints/archive',
          output=plan.plateau_file(stage), seed=step))
      stage.outputs.append(plan.plateau_file(stage))
    stage.commands.insert(0, self.train_command(kind, config, name, overrides))
    self.stages.append(stage)

  def release_sngan(self):
    """The release's published CIFAR-10 SN-GAN, imported with its refinement hat."""
    files = {k: os.path.join(self.o.release_sngan, v) for k, v in RELEASE_FILES.items()}
    commands = [Invocation('experiments/import_release.py', 'release_refinement',
                           (f'--hat={files["hat"]}', f'--generator={files["generator"]}',
                            f'--generator_workdir={RELEASE_GAN}'),
                           config=self.config_file(self.scale.configs['refinement'])),
                self.fid_command(RELEASE_GAN)]
    self.stages.append(Stage('sngan_release', KINDS['release'], 'refinement', commands,
                             [f'{RELEASE_GAN}/config.json', f'{RELEASE_GAN}/fid.json'],
                             workdir=RELEASE_GAN, result=plan.FID, label='published SN-GAN'))

  def seed(self, seed):
    """The stages of one training seed (Tables 1-3 and the retrofit)."""
    parts, s = set(self.o.parts), f'_s{seed}'
    if parts & {'synthesis', 'ood', 'ablations'}:
      self.trained(f'synthesis{s}', 'synthesis', 'synthesis', seed)
    for data, config in self.scale.more_synthesis if 'synthesis' in parts else ():
      self.trained(f'synthesis_{data}{s}', 'synthesis', 'synthesis', seed, config=config)
    if parts & {'refinement', 'ablations'}:
      self.refinement(seed, '', None, self.scale.configs['refinement'])
    if 'refinement' in parts and self.scale.refine_own and any(
        st.name == f'synthesis{s}' for st in self.stages):
      self.trained(f'refine_own{s}', 'refinement', 'refinement', seed, after=(f'synthesis{s}',),
                   extra={'generator.source': 'synthesis', 'generator.path': f'synthesis{s}'},
                   label='refinement of the synthesis run\'s G')
    for data, gan_config, config in self.scale.more_refinement if 'refinement' in parts else ():
      self.refinement(seed, f'_{data}', gan_config, config)
    if 'retrofit' in parts:
      self.trained(f'autoencoder{s}', 'autoencoder', 'retrofit', seed, scored=False)
      self.trained(f'retrofit{s}', 'retrofit', 'retrofit', seed, after=(f'autoencoder{s}',),
                   extra={'generator.path': f'autoencoder{s}'})
    if 'ood' in parts:
      self.stages.append(Stage(
          f'ood{s}', KINDS['ood'], 'ood', [self.ood_command(f'synthesis{s}')],
          [f'synthesis{s}/ood.json'], after=(f'synthesis{s}',), result=plan.OOD))
      if self.scale.near_ood_classes:
        self.near_ood(seed)

  def ood_command(self, workdir, sets=()):
    return Invocation('experiments/evaluate_ood.py', workdir, self.ood
                      + ((f'--sets={",".join(sets)}',) if sets else ())
                      + ((f'--data_dir={self.o.data_dir}',) if self.o.data_dir else ()))

  def near_ood(self, seed):
    """A synthesis model of some digits, scored on the other digits (a semantic near-OOD set)."""
    name = f'nearood_s{seed}'
    self.trained(name, 'synthesis', 'ood', seed, scored=False,
                 extra={'data.classes': self.scale.near_ood_classes},
                 label='synthesis model of digits ' + ', '.join(
                     map(str, self.scale.near_ood_classes)))
    stage = self.stages[-1]
    stage.commands.append(self.ood_command(name, ('other_digits',)))
    stage.outputs.append(f'{name}/ood.json')
    stage.result = plan.OOD

  def refinement(self, seed, data, gan_config, config):
    s = f'_s{seed}'
    if self.o.release_sngan and not data:
      gan = RELEASE_GAN
      if not any(st.name == 'sngan_release' for st in self.stages):
        self.release_sngan()
    else:
      gan = f'sngan{data}{s}'
      self.trained(gan, 'sngan', 'refinement', seed, config=gan_config, label='retrained SN-GAN')
    self.trained(f'refinement{data}{s}', 'refinement', 'refinement', seed, config=config,
                 extra={'generator.path': gan}, after=(gan.split('/')[0],))

  def ablations(self, seed):
    """Each arm beside its reference: the generator's targets, and refinement without Y (scored
    alone: its SN-GAN and DDLS are the reference's)."""
    for arm, (reference, extra) in ABLATIONS.items():
      if arm in self.scale.dropped and not self.o.size:
        continue
      extra, after = dict(extra), ()
      if reference == 'refinement':
        gan = 'sngan_release' if self.o.release_sngan else f'sngan_s{seed}'
        extra['generator.path'], after = RELEASE_GAN if self.o.release_sngan else gan, (gan,)
      self.trained(f'{arm}_s{seed}', reference, 'ablations', seed, extra=extra, after=after,
                   reference=f'{reference}_s{seed}', baselines=reference != 'refinement')
    for arm, (reference, config) in self.scale.more_arms.items():
      self.trained(f'{arm}_s{seed}', reference, 'ablations', seed, config=config,
                   reference=f'{reference}_s{seed}')

  def window(self, seed):
    """The plateau rule's end window of each scored run of `seed`: the checkpoints it keeps
    before its last, scored as its 2/3 checkpoint is, so the rule weighs how the FID scatters
    from checkpoint to checkpoint, not only between sample sets (plateau.py). Each checkpoint's
    sample sets draw latents of their own (--seed=its step): the evaluation sd is then the noise
    between checkpoints too, not only between the sets of one."""
    name, cmds, outputs, runs = f'window_s{seed}', [], [], []
    for st in self.stages:
      if not (st.result.scored and st.kind.trains and st.name.endswith(f'_s{seed}')):
        continue
      steps = window_steps(resolved_config(st).training)
      for slot, step in enumerate(steps, 1):  # a slot: the run may keep another step in it
        outputs.append(f'{name}/{st.name}_w{slot}.json')
        cmds.append(self.fid_command(st.name, st.kind.plateau_baselines, checkpoint=step,
                                     checkpoints='checkpoints', output=outputs[-1], seed=step))
      runs += [st.name] if steps else []
    if cmds:  # a run the guard stopped may have kept none of them: its scoring is excused
      self.stages.append(Stage(name, KINDS['window'], 'plateau', cmds, outputs,
                               after=tuple(runs), result=plan.WINDOW, keep_going=True,
                               inputs=[f'{r}/fid.json' for r in runs]))

  def figures(self):
    """Langevin paths and sample grids of the first seed's models (every dataset's), and the
    baselines beside the Hat EBM's, after every other stage."""
    seed, cmds, outputs = self.o.seeds[0], [], []

    def shown(base):  # every dataset's main models, and the ablation arms
      return base.split('_')[0] in ('synthesis', 'refinement', 'retrofit') or base in ABLATIONS
    models = [st.name for st in self.stages if st.result.scored and st.name.endswith(
        f'_s{seed}') and shown(st.name.rsplit('_s', 1)[0])]
    if not models:  # a figures stage of nothing would be recorded done and never draw
      raise ValueError('--parts=figures draws the models of the other parts, and none of them '
                       'trains one: give them too, e.g. --parts=synthesis,figures (the stages '
                       'done in --out are skipped)')
    for model in models:
      target = f'samples/{model.rsplit("_s", 1)[0]}'
      cmds.append(Invocation('experiments/sample.py', model,
                             (f'--output={target}', '--overwrite') + self.samples))
      outputs.append(f'{target}/langevin_path.png')  # its last file
    for model in models:  # the baselines from the same Z0: SN-GAN / decoder, DDLS
      if model.split('_')[0] in ('refinement', 'retrofit'):
        target = f'samples/{model.rsplit("_s", 1)[0]}_baselines'
        cmds.append(Invocation('experiments/compare_baselines.py', model,
                               (f'--out={target}', '--fid_samples=0', '--num=64', '--overwrite')))
        outputs.append(f'{target}/side_by_side.png')
    self.stages.append(Stage('figures', KINDS['figures'], 'figures', cmds, outputs,
                             after=tuple(st.name for st in self.stages), keep_going=True))
    if self.scale.calibrate and models:
      self.calibration(models)

  def calibration(self, models):
    """The FID's floor and memorisation bound at its N, and the coverage of each model's
    samples (the figures stage's samples.npz)."""
    num = self.fid_size.num_samples
    files = [f'samples/{m.rsplit("_s", 1)[0]}/samples.npz' for m in models]
    samples = ','.join(f'{m.rsplit("_s", 1)[0]}={f}' for m, f in zip(models, files))
    cmd = Invocation('experiments/calibrate_fid.py', models[0], (
        f'--num={num}', '--feature_cache_dir=feature_cache', f'--samples={samples}',
        '--output=calibration/calibration.json', '--overwrite'))
    self.stages.append(Stage('calibration', KINDS['calibration'], 'figures', [cmd],
                             ['calibration/calibration.json'], after=('figures',),
                             result=plan.JSON, inputs=files))


def build(options):
  """Every stage of `options`, in an order that respects their `after`."""
  if options.release_sngan and options.scale != 'paper':
    raise ValueError('--release_sngan imports the published CIFAR-10 SN-GAN: it needs '
                     '--scale=paper')
  builder = _Builder(options)
  for seed in options.seeds:
    builder.seed(seed)
  if 'ablations' in options.parts:
    for seed in options.seeds:
      builder.ablations(seed)
  for seed in options.seeds:
    builder.window(seed)
  if 'figures' in options.parts:
    builder.figures()
  return builder.stages


def estimate(stage, options):
  """Estimated idle seconds of a stage (for the ETA)."""
  tiny = EVAL_SIZES.get(options.size, {}).get('seconds')
  if tiny:
    return tiny * len(stage.commands)
  return stage.kind.estimate(stage, SCALES[options.scale].seconds)
