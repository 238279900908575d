"""The command line, without TensorFlow: every command's flags, --help, config names, errors.

Each command is a `Command`: its flags (absl) and the library function they are passed to, by
name (`Command.flow`, imported only once the flags parse). The console commands (pyproject.toml)
and the scripts in experiments/ both run them, so `tf-hat-ebm-sample --workdir=...` and
`python experiments/sample.py --workdir=...` are the same program; --help names it as typed.

Importing this module imports no TensorFlow, so `--help` answers before TensorFlow loads (a
second, not ten), and sets TF_CPP_MIN_LOG_LEVEL before the library imports it: TensorFlow's C++
log (CUDA factory registration, grappler's remapper) would read as errors on a CPU machine. Bad
flags end the program with one `error: ...` line on stderr and exit code 1.
"""
import dataclasses
import importlib
import os
import sys
import textwrap
import traceback
from typing import Callable, Optional, Tuple, Union

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import flags  # noqa: E402
from absl import logging  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from tf_hat_ebm import interrupts  # noqa: E402
from tf_hat_ebm import validation  # noqa: E402
from tf_hat_ebm.config import configs_dir  # noqa: E402
from tf_hat_ebm.errors import fail, main_guard, one_line  # noqa: E402
from tf_hat_ebm import pretrained as pretrained_lib  # noqa: E402
from tf_hat_ebm import progress  # noqa: E402

HELP_ARGS = ('-h', '-?', '--help', '--helpshort', '--helpfull')
# load_run's name for a flag where it differs from the flag's.
FLOW_ARGS = {'trust_workdir_code': 'trust_code'}
# Upper bounds of the integer flags: a typo's extra zeros is an error, not a week of compute.
MAX_SEED = 2**31 - 1
MAX_BATCH = 65_536
MAX_STEP = 10**9


def _interrupted_hook(kind, value, tb):
  """Ctrl-C before a command's error guard runs (its imports take seconds): one line, not
  TensorFlow's import traceback. Python then ends the process by SIGINT (exit 130)."""
  if issubclass(kind, KeyboardInterrupt):
    print('error: interrupted', file=sys.stderr, flush=True)
  else:
    _PREVIOUS_HOOK(kind, value, tb)


_PREVIOUS_HOOK, sys.excepthook = sys.excepthook, _interrupted_hook


# --- Shipped configs: by name or by path -------------------------------------------------------


def scripts_dir():
  """experiments/ of a checkout beside the package, or None (a wheel ships the commands, not the
  scripts: `script_argv` runs a script's command then)."""
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'experiments')
  return path if os.path.isfile(os.path.join(path, 'train.py')) else None


def script_argv(script):
  """The argv prefix that runs experiments/<script>: the file in a checkout, else its command
  (train_<kind>.py is `train`) in this interpreter."""
  directory = scripts_dir()
  if directory:
    return [sys.executable, os.path.join(directory, script)]
  name = 'train' if script.startswith('train') else next(
      (c.name for c in COMMANDS.values() if c.script == script), None)
  if name is None:
    fail(f'{script}: no such command')
  return [sys.executable, '-c', f'from tf_hat_ebm import cli; cli.main({name!r})']


def config_names():
  return sorted(n[:-3] for n in os.listdir(configs_dir())
                if n.endswith('.py') and not n.startswith('_'))


def config_path(value):
  """A --config value as a file: an existing path as given, else a shipped config's name
  (`cifar10_synth` or `cifar10_synth.py`, and `digits_synth:tiny` with its size)."""
  if not value or os.path.exists(value):
    return value
  base, colon, size = value.partition(':')  # NAME:SIZE, the argument of its get_config
  if colon and os.sep not in base and (base[:-3] if base.endswith('.py') else base) in (
      config_names()):
    return config_path(base) + ':' + size
  name = os.path.basename(value)[:-3] if value.endswith('.py') else value
  if os.sep not in value and name in config_names():
    return os.path.join(configs_dir(), name + '.py')
  if os.sep not in value and not value.endswith('.py'):
    fail(f'--config={value}: no such config file, nor a shipped config (shipped: '
         f'{", ".join(config_names())})')
  return value  # ml_collections reports the missing file


def resolve_config(argv):
  """argv with a shipped config's name after --config replaced by its path."""
  argv, out = list(argv), []
  while argv:
    arg = argv.pop(0)
    if arg in ('--config', '-config') and argv:
      out += [arg, config_path(argv.pop(0))]
    elif arg.startswith(('--config=', '-config=')):
      flag, _, value = arg.partition('=')
      out.append(f'{flag}={config_path(value)}')
    else:
      out.append(arg)
  return out


# --- Commands ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Command:
  """A program: `define(flag_values)` defines its flags, `flow` ('module:function') takes them
  as keyword arguments (FLOW_ARGS renames) and does the work; --help shows the rest. A command
  of a layer above this one (the reproduction) names its `define` as 'module:function' too, so
  that this module imports nothing of it."""
  name: str                      # console command: tf-hat-ebm-<name>
  script: str                    # experiments/<script>, the same program in a checkout
  summary: str
  examples: Tuple[str, ...]      # argument lines, each shown after the program's name
  define: Union[Callable[[flags.FlagValues], None], str]
  flow: str
  description: str = ''
  # The command takes --config: a shipped config's name as its default, or '' for none.
  default_config: Optional[str] = None
  required: Tuple[str, ...] = ('workdir',)


def _workdir_flags(fv, help_text='Workdir of a training run.'):
  flags.DEFINE_string('workdir', None, help_text, flag_values=fv)


def _run_flags(fv):
  """--checkpoint and --overwrite (and load_run's options), of commands that read a run."""
  flags.DEFINE_string('checkpoint', None, 'Checkpoint to load: a step N (ckpt-N in '
                      '<workdir>/checkpoints) or a checkpoint path; default: the latest.',
                      flag_values=fv)
  flags.DEFINE_bool('trust_workdir_code', False, 'Import the code a run\'s config.json names: '
                    'a generator factory or SavedModel, a kind outside tf_hat_ebm (a workdir is '
                    'data: off by default).', flag_values=fv)
  flags.DEFINE_bool('allow_other_generator', False, 'Load a joint run over a generator whose '
                    'weights differ from those it was trained on (its pinned fingerprint).',
                    flag_values=fv)
  flags.DEFINE_string('generator_path', None, 'A joint run: the directory its SN-GAN or '
                      'autoencoder workdir (or SavedModel) has moved to since training.',
                      flag_values=fv)
  flags.DEFINE_integer('generator_checkpoint', None, 'A joint run: load this checkpoint step of '
                       'its generator instead of the pinned one (with --allow_other_generator).',
                       lower_bound=0, upper_bound=MAX_STEP, flag_values=fv)
  flags.DEFINE_bool('overwrite', False, 'Replace this command\'s earlier output at the output '
                    'path (other files there are kept); without it a non-empty target is an error.',
                    flag_values=fv)


def _define_train(fv):
  flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>); '
                      'rerunning resumes from it.', flag_values=fv)
  flags.DEFINE_string('tpu', None, 'TPU name, or "local", for TPUStrategy (else TF_CONFIG / GPUs '
                      '/ the default device).', flag_values=fv)
  flags.DEFINE_bool('allow_config_change', False,
                    'Resume a workdir whose networks, data or batch differ from --config.',
                    flag_values=fv)
  flags.DEFINE_string('checkpoint', None,
                      'Resume from this checkpoint: a step N (checkpoints/ckpt-N), a path, or '
                      '"latest_intact" for the newest checkpoint that restores.', flag_values=fv)


def _define_fid(fv):
  _workdir_flags(fv)
  flags.DEFINE_integer('num_samples', None, 'Samples per run (default: 50,000 with Inception as '
                       'in the paper, 5,000 with the classifier features).', lower_bound=1,
                       upper_bound=10**6, flag_values=fv)
  _metric_samples_check('num_samples', fv)
  flags.DEFINE_integer('runs', 3, 'Independent sample sets; each metric is reported as mean +- '
                       'std.', lower_bound=1, upper_bound=100, flag_values=fv)
  flags.DEFINE_integer('batch_size', 250, 'Sampling and feature batch size.', lower_bound=1,
                       upper_bound=MAX_BATCH, flag_values=fv)
  flags.DEFINE_enum('feature_net', None, list(validation.FEATURE_NETS), 'Feature network '
                    '(default: classifier for digits, inception otherwise). classifier: the one '
                    'shipped for the data (trained here where none is); classifier_retrained: '
                    'trained on this machine and cached.', flag_values=fv)
  flags.DEFINE_string('inception_path', None, 'Local copy of the TF-GAN Inception (TF-Hub module '
                      'directory); default: TF-Hub, honouring TFHUB_CACHE_DIR.', flag_values=fv)
  flags.DEFINE_string('features', None, 'Your feature network: a SavedModel (serving_default '
                      'signature) or Keras model file mapping images to vectors, its input size '
                      'read from it; default: the config\'s data.features. Recorded in fid.json '
                      'by path and fingerprint.', flag_values=fv)
  flags.DEFINE_list('features_range', None, 'The input range of --features as low,high '
                    '(default 0,1).', flag_values=fv)
  _cache_flag(fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the first sample batch.', lower_bound=0,
                       upper_bound=MAX_SEED, flag_values=fv)
  flags.DEFINE_bool('baselines', True, 'Also score the baselines: the generator alone, and DDLS '
                    'for a refinement. --nobaselines: the Hat EBM alone (e.g. an ablation arm).',
                    flag_values=fv)
  flags.DEFINE_string('output', None, 'Where the result goes (JSON; default <workdir>/fid.json), '
                      'e.g. the FID of an earlier --checkpoint beside the last one\'s.',
                      flag_values=fv)
  _run_flags(fv)


def _metric_samples_check(name, fv, off=None):
  """A sample count every metric can score (`off`: the value that scores none), checked with the
  flags, before any work."""
  least = validation.MIN_METRIC_SAMPLES
  none = f' ({off}: none)' if off is not None else ''
  flags.register_validator(
      name, lambda v: v in (None, off) or v >= least, flag_values=fv,
      message=f'needs at least {least} samples per set: recall\'s k-NN manifold (k = {least - 1})'
              f' needs each sample and {least - 1} others{none}')


def _cache_flag(fv):
  flags.DEFINE_string('feature_cache_dir', None, 'Where the FID feature classifier is cached '
                      '(default: $TF_HAT_EBM_CACHE or ~/.cache/tf_hat_ebm, one per dataset).',
                      flag_values=fv)


def _define_ood(fv):
  _workdir_flags(fv)
  flags.DEFINE_list('sets', None, 'OOD sets (default: svhn_cropped, cifar100, celeb_a; for '
                    'digits the offline sets of tf_hat_ebm/evaluation/ood.py).', flag_values=fv)
  flags.DEFINE_integer('num', 10_000, 'Images per set at most.', lower_bound=1, upper_bound=10**7,
                       flag_values=fv)
  flags.DEFINE_integer('batch_size', 250, 'Batch size.', lower_bound=1, upper_bound=MAX_BATCH,
                       flag_values=fv)
  flags.DEFINE_string('data_dir', None, 'tfds data_dir of the OOD sets (default: the config\'s).',
                      flag_values=fv)
  _run_flags(fv)


def _define_sample(fv):
  _workdir_flags(fv, 'Workdir of a training run (latest checkpoint, or --checkpoint).')
  flags.DEFINE_string('saved_model', None, 'Or: a SavedModel written by tf-hat-ebm-export.',
                      flag_values=fv)
  flags.DEFINE_string('output', None, 'Output directory (default: <workdir>/generated or '
                      '<saved_model>_samples).', flag_values=fv)
  flags.DEFINE_integer('num_samples', 100, 'Number of samples.', lower_bound=1, upper_bound=10**8,
                       flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed: the same seed gives the same files; batch b draws the '
                       'stream (seed, b), so other seeds share no sample.', lower_bound=0,
                       upper_bound=MAX_SEED, flag_values=fv)
  flags.DEFINE_integer('batch_size', 250, 'Samples per chain batch.', lower_bound=1,
                       upper_bound=MAX_BATCH, flag_values=fv)
  # 100 chains of 3 rows fit matplotlib's 2**16 pixels at 128x128 images.
  flags.DEFINE_integer('path_chains', 4, 'Chains in the Langevin-path figure.', lower_bound=1,
                       upper_bound=100, flag_values=fv)
  _path_steps_flag(fv, 'Chain steps shown in the path figure (workdir only; a SavedModel has the '
                   'steps chosen at export). Default: 5 evenly spaced in 0..K.')
  _run_flags(fv)


def _path_steps_flag(fv, help_text):
  flags.DEFINE_list('path_steps', None, help_text, flag_values=fv)


def _define_compare(fv):
  _workdir_flags(fv, 'Workdir of a joint (refinement or retrofit) training run.')
  flags.DEFINE_string('out', None, 'Output directory (default: <workdir>/compare).',
                      flag_values=fv)
  flags.DEFINE_integer('num', 100, 'Samples per method.', lower_bound=1, upper_bound=10**5,
                       flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of Z0 and of the chains.', lower_bound=0,
                       upper_bound=MAX_SEED, flag_values=fv)
  flags.DEFINE_integer('fid_samples', 1000, 'Digits: samples per method and run for the '
                       'small-data FID (0: no FID).', lower_bound=0, upper_bound=10**6,
                       flag_values=fv)
  _metric_samples_check('fid_samples', fv, off=0)
  flags.DEFINE_integer('fid_runs', 2, 'Digits: independent sample sets for the FID (mean +- '
                       'std).', lower_bound=1, upper_bound=100, flag_values=fv)
  flags.DEFINE_integer('batch_size', 250, 'Samples per chain batch.', lower_bound=1,
                       upper_bound=MAX_BATCH, flag_values=fv)
  _cache_flag(fv)
  _run_flags(fv)


def _define_export(fv):
  _workdir_flags(fv)
  flags.DEFINE_string('output', None, 'SavedModel directory to write (default: '
                      '<workdir>/saved_model).', flag_values=fv)
  _path_steps_flag(fv, 'Chain steps returned by sample_path (default: 5 evenly spaced steps '
                   'from 0 to K).')
  _run_flags(fv)


def _define_gallery(fv):
  _workdir_flags(fv, 'Workdir of a trained synthesis run.')
  flags.DEFINE_string('out', 'docs/gallery.png', 'Output PNG.', flag_values=fv)
  flags.DEFINE_integer('num', 36, 'Samples per panel.', lower_bound=1, upper_bound=10_000,
                       flag_values=fv)
  flags.DEFINE_integer('path_chains', 3, 'Chains in the Langevin path.', lower_bound=1,
                       upper_bound=100, flag_values=fv)
  flags.DEFINE_integer('seed', 0, 'Seed of the samples and chains.', lower_bound=0,
                       upper_bound=MAX_SEED, flag_values=fv)
  _run_flags(fv)


def _define_import(fv):
  flags.DEFINE_string('workdir', None, 'New workdir to write.', flag_values=fv)
  flags.DEFINE_string('hat', None, 'Checkpoint prefix of the release hat network (EBM).',
                      flag_values=fv)
  flags.DEFINE_string('generator', None, 'Checkpoint prefix of the release generator.',
                      flag_values=fv)
  flags.DEFINE_string('decoder', None, 'Checkpoint prefix of the release decoder (retrofit).',
                      flag_values=fv)
  flags.DEFINE_string('encoder', None, 'Optional: the release encoder (retrofit), kept beside '
                      'the decoder.', flag_values=fv)
  flags.DEFINE_string('generator_workdir', None, 'Joint configs: where the generator or decoder '
                      'is written (default <workdir>/generator).', flag_values=fv)
  flags.DEFINE_integer('step', None, 'Training step recorded in the checkpoint (default: the '
                       "config's training.num_steps).", flag_values=fv)


def _define_calibrate(fv):
  flags.DEFINE_string('workdir', None, 'Workdir of a digits run (its config.json names the '
                      'data).', flag_values=fv)
  flags.DEFINE_integer('num', 1000, 'N: images per FID, as the FID of the samples uses.',
                       lower_bound=2, upper_bound=1_000_000, flag_values=fv)
  flags.DEFINE_integer('runs', 3, 'Random draws per reference FID (mean +- std).', lower_bound=1,
                       upper_bound=100, flag_values=fv)
  flags.DEFINE_list('samples', [], 'label=path of a sample.py samples.npz, per model; a missing '
                    'file is reported as such (its model drew no samples).', flag_values=fv)
  flags.DEFINE_string('output', None, 'The JSON file written.', flag_values=fv)
  _cache_flag(fv)
  flags.DEFINE_bool('overwrite', False, 'Replace an existing --output.', flag_values=fv)


def _define_pretrained(fv):
  flags.DEFINE_string('model', None, 'The shipped model to install: '
                      f'{", ".join(pretrained_lib.names()) or "none shipped"}.', flag_values=fv)
  flags.DEFINE_string('workdir', None, 'The workdir to write (a refinement\'s or retrofit\'s '
                      'generator goes in <workdir>/generator).', flag_values=fv)
  flags.DEFINE_bool('overwrite', False, 'Install into a directory that is not empty, replacing '
                    'the files the install writes (the others are kept).', flag_values=fv)


COMMANDS = {c.name: c for c in (
    Command('train', 'train.py', 'Trains any experiment: the kind of run comes from the '
            "config's `experiment`.",
            ('', '--config=digits_refine --workdir=workdir/digits_refine',
             '--config=cifar10_refine --config.generator.path=/data/runs/cifar10_sngan '
             '--workdir=gs://bucket/refine --tpu=my-tpu'),
            _define_train, 'tf_hat_ebm.trainer:train_command',
            'Running the same command again resumes from the workdir\'s latest checkpoint. '
            '--config.<field>=<value> overrides a field (a misspelt field is an error).',
            default_config='digits_synth', required=()),
    Command('sample', 'sample.py', 'Samples of a trained Hat EBM as PNG grids and an .npz, and '
            'the Langevin-path figure.',
            ('--workdir=workdir/digits_synth --num_samples=100',
             '--saved_model=exported/digits_synth --output=/tmp/samples'),
            _define_sample, 'tf_hat_ebm.samples:sample_run', required=()),
    Command('export', 'export.py', 'Exports a trained Hat EBM as a SavedModel '
            '(tf.saved_model.load / tensorflow_hub.load).',
            ('--workdir=workdir/digits_synth --output=exported/digits_synth',),
            _define_export, 'tf_hat_ebm.export:export_run'),
    Command('evaluate-fid', 'evaluate_fid.py', 'FID, KID (every metric) of a trained Hat EBM '
            'beside its baselines, all with one feature network.',
            ('--workdir=workdir/digits_synth',
             '--workdir=/data/runs/cifar10 --inception_path=/data/inception'),
            _define_fid, 'tf_hat_ebm.evaluation.evaluate:evaluate_run',
            'Writes <workdir>/fid.json and eval/<metric>_<method> in the workdir\'s '
            'TensorBoard.'),
    Command('evaluate-ood', 'evaluate_ood.py', 'Out-of-distribution detection by the energy '
            'H(x) (the paper\'s Table 3): AUROC per OOD set.',
            ('--workdir=workdir/digits_synth',
             '--workdir=/data/runs/cifar10 --data_dir=/data/tfds'),
            _define_ood, 'tf_hat_ebm.evaluation.ood:evaluate_run',
            'Writes <workdir>/ood.json, <workdir>/ood_energies.png and eval/ood_auroc_<set>.'),
    Command('compare', 'compare_baselines.py', 'The Hat EBM beside its baselines (the '
            'generator alone, DDLS) for a refinement or retrofit run.',
            ('--workdir=workdir/digits_refine', '--workdir=workdir/digits_retrofit'),
            _define_compare, 'tf_hat_ebm.evaluation.compare:compare_run',
            'Writes <workdir>/compare/{generator,ddls,hat_ebm,side_by_side}.png (and scores.json '
            'for the digits).'),
    Command('gallery', 'gallery.py', 'The README\'s gallery figure from a trained run: X = G(Z) '
            '+ Y, G(Z), Y and a Langevin path.',
            ('--workdir=workdir/digits_synth --out=docs/gallery.png',),
            _define_gallery, 'tf_hat_ebm.samples:gallery'),
    Command('import-release', 'import_release.py', 'Turns the authors\' published models (Keras '
            'save_weights checkpoints) into a tf_hat_ebm workdir.',
            ('--config=cifar10_synth --hat=release/cifar10/ebm.ckpt '
             '--generator=release/cifar10/gen.ckpt --workdir=workdir/release_c10',
             '--config=cifar10_retrofit --hat=release/retrofit/ebm.ckpt '
             '--decoder=release/retrofit/dec.ckpt --workdir=workdir/release_rf'),
            _define_import, 'tf_hat_ebm.release_import:import_command',
            '--hat/--generator/--decoder take a checkpoint prefix (the path given to '
            'save_weights, without .index); the config must describe the published networks.',
            default_config='', required=('config', 'workdir')),
    Command('calibrate-fid', 'calibrate_fid.py', 'How far the digits FID can go at a sample '
            'size N (floor, memorisation bound, a missing class), and the class coverage and '
            'nearest training images of models\' samples.',
            ('--workdir=workdir/digits_synth --num=1000 '
             '--samples=synthesis=samples/synthesis/samples.npz --output=calibration.json',),
            _define_calibrate, 'tf_hat_ebm.evaluation.calibration:calibrate_command',
            'Against the train split\'s statistics: the FID of N held-out test digits, of N '
            'training digits and of N test digits without one class, each over --runs draws '
            'without replacement (extrapolated from a fit FID(n) = a + b / n over subsamples '
            'where a set has fewer than N); per --samples file the class histogram by the FID\'s '
            'classifier and the distance of each sample to its nearest training image.',
            required=('workdir', 'output')),
    Command('pretrained', 'pretrained.py', 'Installs a ready-made digits model shipped with the '
            'package as a workdir that every command reads (no training).',
            ('--model=digits_synth --workdir=workdir/digits_synth',
             '--model=digits_sngan --workdir=workdir/digits_sngan'),
            _define_pretrained, 'tf_hat_ebm.pretrained:install_command',
            'Every file is checked against its sha256 in the package\'s manifest first. The '
            'workdir holds config.json, one checkpoint of the networks and pretrained.json (what '
            'trained the model: command and commit).', required=('model', 'workdir')),
    Command('reproduce', 'reproduce.py', 'The paper in one command: every table and figure as '
            'resumable stages, and a report.',
            ('', '--dry_run', '--scale=paper --tpu=my-tpu --data_dir=gs://bucket/tfds '
             '--inception_path=/data/inception --out=/data/reproduce'),
            'tf_hat_ebm.reproduction.command:define_flags',
            'tf_hat_ebm.reproduction.pipeline:reproduce_command',
            'A finished stage leaves <out>/<stage>/done.json and is skipped on the next run; an '
            'interrupted one resumes. Writes <out>/report.md, report.json and figures/.',
            required=()),
)}


def program(argv0):
  """The program's name as typed: `python experiments/sample.py` or `tf-hat-ebm-sample`."""
  if argv0.endswith('.py'):
    return f'python {os.path.relpath(argv0) if os.path.isabs(argv0) else argv0}'
  return os.path.basename(argv0)


def help_text(command, prog, fv):
  """The --help page: usage, summary, examples as typed, description, flags, shipped configs."""
  lines = [f'usage: {prog} [flags]', command.summary, '', 'examples:']
  lines += [f'    {prog} {example}'.rstrip() for example in command.examples]
  if command.description:
    lines += [''] + textwrap.wrap(command.description, 100)
  lines += ['', 'flags:']
  lines += [_flag_line(fv[name]) for name in _own_flags(fv)]
  if command.default_config is not None:
    default = f'; default {command.default_config}' if command.default_config else ''
    lines += ['', f'shipped configs (--config=NAME, or the path of a config file{default}):']
    lines += textwrap.wrap(', '.join(config_names()), 100, initial_indent='    ',
                           subsequent_indent='    ')
  return '\n'.join(lines)


def _own_flags(fv):
  """The command's flags (not the --config.<field> overrides ml_collections adds)."""
  return sorted(name for name in fv.flag_values_dict() if '.' not in name)


def _flag_line(flag):
  prefix = f'--[no]{flag.name}' if flag.boolean else f'--{flag.name}'
  default = '' if flag.default is None or flag.name == 'config' else f' (default: {flag.default})'
  return textwrap.fill(f'  {prefix}: {flag.help}{default}', 100, subsequent_indent='      ')


def _config_flag_error(error, argv):
  """One line for a --config file or override that ml_collections cannot load."""
  while error.args and isinstance(error.args[0], BaseException):  # AttributeError(KeyError(..))
    error = error.args[0]
  if isinstance(error, SyntaxError):
    text = f'{error.msg} ({error.filename}, line {error.lineno})'
  else:
    lines = [line.strip() for line in str(error.args[0] if error.args else error).splitlines()
             if line.strip()]
    # A failed config file load reports the OS error last; an unknown field comes first.
    text = (lines[-1] if isinstance(error, OSError) else
            '; '.join(lines).replace("'", '', 2)) if lines else type(error).__name__
  if isinstance(error, KeyError):
    text = f'no such config field {text}'
  given = [a for a in argv[1:] if a.lstrip('-').startswith('config')]
  named = [a.split('=')[0] for a in given if any(
      a.split('=')[0].endswith('.' + w.strip('\'",;')) for w in text.split()[:5])]
  return f'{", ".join(named or given or ["--config"])}: {text}'


def _user_frame(error, argv):
  """The innermost frame of the error in the user's own files (not Python's import machinery
  nor the libraries'): the line of a config file to look at."""
  frames = traceback.extract_tb(error.__traceback__)
  given = {os.path.abspath(p) for p in config_file_args(argv[1:])}
  files = [f for f in frames if os.path.abspath(f.filename) in given]
  own = [f for f in frames if not f.filename.startswith('<')
         and os.sep + 'site-packages' + os.sep not in f.filename]
  return (files or own or frames)[-1]


def config_file_args(argv):
  """The --config file paths given on the command line."""
  paths = []
  for i, arg in enumerate(argv):
    if arg in ('--config', '-config') and i + 1 < len(argv):
      paths.append(argv[i + 1])
    elif arg.startswith(('--config=', '-config=')):
      paths.append(arg.split('=', 1)[1])
  return paths


def refuse_json_config(argv):
  """A run's config.json given as --config would be executed as Python: one line instead."""
  for path in config_file_args(argv):
    if path.lower().endswith('.json'):
      fail(f'--config={path} is a JSON file (a run\'s config.json?), but --config takes a Python '
           'config file defining get_config() (experiments/configs/*.py): to resume that run, '
           'rerun the command that made it (same --config file and --workdir); to sample, '
           'export or evaluate it, pass its directory as --workdir')


def _define(command, argv):
  """The command's flags on a FlagValues of their own (commands share names, not state)."""
  fv = flags.FlagValues()
  try:
    if command.default_config is not None:
      default = command.default_config and config_path(command.default_config)
      config_flags.DEFINE_config_file(
          'config', default or None,
          'Experiment config: a shipped config\'s name (see below) or a config file.',
          flag_values=fv, lock_config=True, sys_argv=argv)
    define = _load(command.define) if isinstance(command.define, str) else command.define
    define(fv)
    flags.mark_flags_as_required(command.required, flag_values=fv)
  except (AttributeError, KeyError, TypeError, ValueError, OSError, SyntaxError) as e:
    fail(_config_flag_error(e, argv))
  return fv


def _parse(fv, argv):
  """absl's flag parsing with every failure on one line (no usage text, no traceback)."""
  try:
    rest = fv(argv)
  except flags.Error as e:
    fail(one_line(e))
  except SyntaxError as e:  # a --config file that is not Python
    fail(_config_flag_error(e, argv))
  except Exception as e:  # pylint: disable=broad-except
    # A --config file is user code: whatever it raises is reported against the file and line.
    frame = _user_frame(e, argv)
    given = [a.split('=')[0] for a in argv[1:] if a.lstrip('-').startswith('config')]
    fail(f'{given[0] if given else "--config"}: the config file raised {type(e).__name__}: '
         f'{one_line(e)} ({frame.filename}, line {frame.lineno})')
  if len(rest) > 1:
    fail(f'unexpected arguments: {" ".join(rest[1:])} (flags are --name=value)')
  if 'config' in fv and type(fv['config'].value).__name__ == '_ErrorConfig':
    try:  # a config file that failed to load fails on first use: use it now
      fv['config'].value.get('name')
    except OSError as e:
      fail(_config_flag_error(e, argv))


def flow_arguments(fv):
  """The parsed flags as the flow's keyword arguments."""
  return {FLOW_ARGS.get(name, name): fv[name].value for name in _own_flags(fv)}


# The flags that lower a command's memory, named when it runs out (in this order).
MEMORY_FLAGS = ('batch_size', 'jobs', 'num_samples')


def memory_flags(fv):
  names = set(_own_flags(fv))
  found = [f'--{name}' for name in MEMORY_FLAGS if name in names]
  return found + (['--config.training.batch_size'] if 'config' in names else [])


def main(name, argv=None, default_config=None):
  """Runs the command `name` on argv (default sys.argv): --help, or the flow on the flags."""
  progress.guard_output()
  command = COMMANDS[name]
  if default_config:
    command = dataclasses.replace(command, default_config=default_config)
  argv = sys.argv if argv is None else argv
  refuse_json_config(argv[1:])
  argv = resolve_config(argv)
  fv = _define(command, argv)
  if any(a.split('=')[0] in HELP_ARGS for a in argv[1:]):
    print(help_text(command, program(argv[0]), fv))
    sys.exit(0)
  _parse(fv, argv)
  if not flags.FLAGS.is_parsed():
    flags.FLAGS.mark_as_parsed()  # absl logging: no "logging before flag parsing" line
  # Libraries' INFO logs (tfds, SavedModel writing) would bury the one-line errors; the
  # commands print their own progress.
  logging.set_verbosity(logging.WARNING)
  flow = _load(command.flow)
  with interrupts.sigterm_as_interrupt():  # SIGTERM cleans up as Ctrl-C does (exit 130)
    return main_guard(lambda: flow(**flow_arguments(fv)), memory_flags=memory_flags(fv))


def _load(spec):
  """The function a 'module:function' string names, imported now."""
  module, _, function = spec.partition(':')
  return getattr(importlib.import_module(module), function)


# The console commands (pyproject.toml's [project.scripts]).
def train():
  main('train')


def sample():
  main('sample')


def export():
  main('export')


def evaluate_fid():
  main('evaluate-fid')


def evaluate_ood():
  main('evaluate-ood')


def compare():
  main('compare')


def gallery():
  main('gallery')


def import_release():
  main('import-release')


def calibrate_fid():
  main('calibrate-fid')


def reproduce():
  main('reproduce')


def pretrained():
  main('pretrained')
