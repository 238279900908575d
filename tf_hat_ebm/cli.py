"""The command line of every script, without TensorFlow: flags, --help, errors, quiet logs.

Importing this module imports no TensorFlow, so `--help` answers before TensorFlow loads (a
second, not ten), and sets TF_CPP_MIN_LOG_LEVEL before any script imports it: TensorFlow's C++
log (CUDA factory registration, grappler's remapper) would read as errors on a CPU machine. Bad
flags end the program with one `error: ...` line on stderr and exit code 1.
"""
import logging as py_logging
import os
import runpy
import sys
import traceback

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402

HELP_ARGS = ('-h', '-?', '--help', '--helpshort', '--helpfull')
# Console entry points (pyproject.toml) -> the experiments/ script each one runs.
SCRIPTS = {'train': 'train.py', 'sample': 'sample.py', 'export': 'export.py',
           'evaluate-fid': 'evaluate_fid.py', 'evaluate-ood': 'evaluate_ood.py',
           'compare': 'compare_baselines.py', 'import-release': 'import_release.py'}


def _interrupted_hook(kind, value, tb):
  """Ctrl-C before a script's error guard runs (its imports take seconds): one line, not
  TensorFlow's import traceback. Python then ends the process by SIGINT (exit 130)."""
  if issubclass(kind, KeyboardInterrupt):
    print('error: interrupted', file=sys.stderr, flush=True)
  else:
    _PREVIOUS_HOOK(kind, value, tb)


_PREVIOUS_HOOK, sys.excepthook = sys.excepthook, _interrupted_hook


def one_line(error):
  """The informative line of an error (TF's traced errors start with 'in user code:')."""
  lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
  if not lines:
    return type(error).__name__
  if lines[0].startswith('in user code') and len(lines) > 1:
    return lines[-1]
  return lines[0]


def fail(message, code=1):
  # TensorFlow warns about the unrestored values of a failed restore when objects are deleted
  # (at exit): hundreds of lines after the one that matters.
  py_logging.getLogger('tensorflow').setLevel(py_logging.ERROR)
  print(f'error: {message}', file=sys.stderr, flush=True)
  sys.exit(code)


def key_flags(*names):
  """Lists flags defined elsewhere (a shared module) in the running script's --help."""
  for name in names:
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[name])


def define_checkpoint_and_overwrite_flags():
  """--checkpoint and --overwrite, shared by the scripts that read a run and write outputs."""
  flags.DEFINE_string('checkpoint', None, 'Checkpoint to load: a step N (ckpt-N in '
                      '<workdir>/checkpoints) or a checkpoint path; default: the latest.')
  flags.DEFINE_bool('trust_workdir_code', False, 'Import the code a run\'s config.json names: '
                    'a generator factory, a kind outside tf_hat_ebm (a workdir is data: off by '
                    'default).')
  flags.DEFINE_bool('allow_other_generator', False, 'Load a joint run over a generator whose '
                    'weights differ from those it was trained on (its pinned fingerprint).')
  flags.DEFINE_string('generator_path', None, 'A joint run: the directory its SN-GAN or '
                      'autoencoder workdir (or SavedModel) has moved to since training.')
  flags.DEFINE_integer('generator_checkpoint', None, 'A joint run: load this checkpoint step of '
                       'its generator instead of the pinned one (with --allow_other_generator).',
                       lower_bound=0)
  flags.DEFINE_bool('overwrite', False, 'Replace this script\'s earlier output at the output '
                    'path (other files there are kept); without it a non-empty target is an error.')
  key_flags('checkpoint', 'overwrite')


def _example(doc):
  """The first command line of a script's docstring."""
  lines = (doc or '').splitlines()
  for i, line in enumerate(lines):
    if line.strip().startswith('python '):
      command = [line.strip()]
      while command[-1].endswith('\\') and i + len(command) < len(lines):
        command.append(lines[i + len(command)].strip())
      return '\n    '.join(command)
  return None


def answer_help(doc=None):
  """Prints the script's summary, an example and its flags, exits 0, if --help was asked.

  Called once the script's flags are defined and before it imports TensorFlow; does nothing
  when the script is imported rather than run.
  """
  if not any(a.split('=')[0] in HELP_ARGS for a in sys.argv[1:]):
    return
  if doc is None:
    main = sys.modules.get('__main__')
    doc = getattr(main, '__doc__', None)
  summary = (doc or '').strip().splitlines()[:1]
  example = _example(doc)
  lines = [f'usage: {os.path.basename(sys.argv[0])} [flags]']
  lines += summary
  if example:
    lines.append(f'example:\n    {example}')
  full = '--helpfull' in sys.argv[1:]
  lines.append('flags (--helpfull: also absl\'s):' if not full else 'flags:')
  lines.append(flags.FLAGS.get_help() if full else flags.FLAGS.main_module_help().strip('\n'))
  print('\n'.join(lines))
  sys.exit(0)


def _config_flag_error(error):
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
  given = [a for a in sys.argv[1:] if a.lstrip('-').startswith('config')]
  named = [a.split('=')[0] for a in given if any(
      a.split('=')[0].endswith('.' + w.strip('\'",;')) for w in text.split()[:5])]
  return f'{", ".join(named or given or ["--config"])}: {text}'


def _user_frame(error):
  """The innermost frame of the error in the user's own files (not Python's import machinery
  nor the libraries'): the line of a config file to look at."""
  frames = traceback.extract_tb(error.__traceback__)
  given = {os.path.abspath(p) for p in config_file_args(sys.argv[1:])}
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


def _parse_flags(argv):
  """absl's flag parsing with every failure on one line (no usage text, no traceback)."""
  try:
    args = flags.FLAGS(argv)
  except flags.Error as e:
    fail(one_line(e))
  except SyntaxError as e:  # a --config file that is not Python
    fail(_config_flag_error(e))
  except Exception as e:  # pylint: disable=broad-except
    # A --config file is user code: whatever it raises is reported against the file and line.
    frame = _user_frame(e)
    given = [a.split('=')[0] for a in argv[1:] if a.lstrip('-').startswith('config')]
    fail(f'{given[0] if given else "--config"}: the config file raised {type(e).__name__}: '
         f'{one_line(e)} ({frame.filename}, line {frame.lineno})')
  if not flags.FLAGS['verbosity'].present:
    # Libraries' INFO logs (tfds, SavedModel writing) would bury the one-line errors; the
    # scripts print their own progress. --verbosity=0 brings them back.
    logging.set_verbosity(logging.WARNING)
  # A config file that failed to load fails on first use: use it now, while errors are flags'.
  for name in flags.FLAGS:
    value = flags.FLAGS[name].value
    if type(value).__name__ == '_ErrorConfig':
      try:
        value.get('name')
      except OSError as e:
        fail(_config_flag_error(e))
  return args


def run(main, define_flags=None):
  """app.run(main) for the scripts: flag definition and parsing errors become one line.

  `define_flags` runs first, under the same guard: ml_collections reads --config overrides
  from sys.argv when the config flag is defined. --help is answered before `main` runs.
  """
  refuse_json_config(sys.argv[1:])
  if define_flags is not None:
    try:
      define_flags()
    except (AttributeError, KeyError, TypeError, ValueError, OSError, SyntaxError) as e:
      fail(_config_flag_error(e))
  answer_help()
  app.run(main, flags_parser=_parse_flags)


def scripts_dir():
  """experiments/: inside the installed package (a wheel), else beside it (a checkout)."""
  here = os.path.dirname(os.path.abspath(__file__))
  for path in (os.path.join(here, 'experiments'),
               os.path.join(os.path.dirname(here), 'experiments')):
    if os.path.isfile(os.path.join(path, 'export.py')):
      return path
  fail('experiments/ scripts not found beside the tf_hat_ebm package; reinstall it')


def _entry_point(name):
  def main():
    path = os.path.join(scripts_dir(), SCRIPTS[name])
    sys.argv[0] = path
    sys.path.insert(0, os.path.dirname(path))  # the scripts import their neighbours
    runpy.run_path(path, run_name='__main__')
  main.__name__ = name.replace('-', '_')
  return main


train = _entry_point('train')
sample = _entry_point('sample')
export = _entry_point('export')
evaluate_fid = _entry_point('evaluate-fid')
evaluate_ood = _entry_point('evaluate-ood')
compare = _entry_point('compare')
import_release = _entry_point('import-release')
