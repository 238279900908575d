"""Test setup: two logical CPU devices (for MirroredStrategy tests) and tiny configs."""
import ast
import contextlib
import fcntl
import io
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Mapping

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
if os.environ.get('PYTEST_XDIST_WORKER'):
  # One TensorFlow thread pool per pytest-xdist worker (and the scripts it starts): two workers on
  # two cores, not four busy threads fighting for them.
  os.environ.setdefault('TF_NUM_INTRAOP_THREADS', '1')
  os.environ.setdefault('TF_NUM_INTEROP_THREADS', '2')
# Feature classifiers trained by the tests (and the scripts they run) stay out of ~/.cache.
os.environ.setdefault('TF_HAT_EBM_CACHE', tempfile.mkdtemp(prefix='tf_hat_ebm_cache_'))

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def xdist_controller(args):
  """Whether this process is pytest-xdist's controller (`-n N`, N > 0, in `args`): it hands the
  tests to its workers and runs none itself."""
  if os.environ.get('PYTEST_XDIST_WORKER'):
    return False
  for i, arg in enumerate(args):
    if arg in ('-n', '--numprocesses'):
      value = args[i + 1] if i + 1 < len(args) else ''
    elif arg.startswith('--numprocesses='):
      value = arg.split('=', 1)[1]
    elif arg.startswith('-n') and not arg.startswith('--'):
      value = arg[2:]
    else:
      continue
    return value in ('auto', 'logical') or (value.isdigit() and int(value) > 0)
  return False


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(REPO, 'experiments', 'configs')

# The controller does not load TensorFlow (seconds of CPU for a process that runs no test).
if not xdist_controller(sys.argv[1:] + os.environ.get('PYTEST_ADDOPTS', '').split()):
  import tensorflow as tf  # noqa: E402

  from tf_hat_ebm import cli  # noqa: E402
  from tf_hat_ebm import config as config_lib  # noqa: E402
  from tf_hat_ebm import registry  # noqa: E402
  from tf_hat_ebm import results as result_lib  # noqa: E402
  from tpu_utils import use_logical_cpus  # noqa: E402

  # Must happen before TensorFlow touches a device: one process, two logical CPUs for all tests.
  TWO_CPUS = use_logical_cpus(2)

# Every kind shrunk to seconds: 8-wide networks, 2-step chains, batch 4, a checkpoint every 2 steps,
# no PNG figures (a test of figures sets training.figures).
# Not perf.precision 'auto': the tests compute the same numbers whether or not the CPU has bf16.
SMALL = {
    'model.hat_width': 8, 'model.gen_width': 8, 'model.disc_width': 8, 'model.enc_width': 8,
    'model.z_dim': 4,
    'langevin.steps': 2, 'sampling.steps': 2, 'ddls.steps': 2,
    'training.batch_size': 4, 'training.num_steps': 4, 'training.steps_per_loop': 2,
    'training.log_every': 2, 'training.checkpoint_every': 2, 'training.eval_every': 2,
    'training.sample_every': 4, 'training.num_grid_samples': 4, 'training.figures': False,
    'perf.precision': 'float32',
}
# What a kind needs on top of SMALL to run in seconds, by config.experiment (dotted path -> value):
# only a synthesis run has a bank; a kind not named here (tests/toykind) needs nothing more.
KIND_SIZES: Mapping[str, Mapping[str, object]] = {
    'synthesis': {'training.bank_size': 16},
    'joint': {'training.num_steps': 2, 'training.sample_every': 2, 'optim.hat_lr': 1e-3},
    'sngan': {'training.n_dis': 2, 'training.num_steps': 2, 'training.sample_every': 2},
}


def fid_result(step=None, data=None, **sets):
  """The JSON of an evaluation result (schema 2) of FIDs alone: sets {method: [FID per set]},
  `data` the held-out split's FID."""
  return result_lib.EvalResult(
      methods={m: m for m in sets}, metrics={'fid': result_lib.FID},
      values={'fid': {m: [float(v) for v in runs] for m, runs in sets.items()}},
      data={} if data is None else {'fid': data}, step=step,
      runs=len(next(iter(sets.values()), ()))).to_json()


def load_config(experiment, *args):
  """get_config(*args) of experiments/configs/<experiment>.py (or of the file `experiment`, a
  path ending in .py), loaded by its file path."""
  path = experiment if experiment.endswith('.py') else os.path.join(CONFIGS, experiment + '.py')
  return config_lib.load_file(path, *args)


def _parent(config, path):
  """The section holding a dotted path's last field, and that field's name."""
  *sections, name = path.split('.')
  for section in sections:
    config = config[section]
  return config, name


def _has(config, path):
  *sections, name = path.split('.')
  for section in sections:
    if section not in config:
      return False
    config = config[section]
  return name in config


def tiny(experiment='digits_synth', **overrides):
  """The experiment's config shrunk to seconds (SMALL and its kind's KIND_SIZES), overridden.

  Override keys are dotted paths, as `**{'training.batch_size': 8}` or `training__batch_size=8`.
  The shrinking sets only the fields the config has; an override may add one.
  """
  config = load_config(experiment)
  extra = KIND_SIZES.get(registry.for_config(config).name, {})
  for path, value in {**SMALL, **extra}.items():
    if _has(config, path):
      section, name = _parent(config, path)
      section[name] = value
  for key, value in overrides.items():
    section, name = _parent(config, key.replace('__', '.'))
    section[name] = value
  return config


@pytest.fixture(autouse=True)
def _eager_unless_graph(request):
  """tf.functions run eagerly in the fast tests (no tracing: a tiny training costs a quarter),
  but as graphs, as the scripts run them, in a test marked `graph` (what only graphs do: one chain
  across export; a training of each kind) and in every slow test (the scripts end to end)."""
  node = request.node
  tf.config.run_functions_eagerly(node.get_closest_marker('graph') is None and
                                  node.get_closest_marker('slow') is None)
  yield
  tf.config.run_functions_eagerly(True)


@contextlib.contextmanager
def functions_run(eagerly):
  """tf.functions run eagerly (or as graphs) inside, then as before: in a `graph` test what is not
  under test (a training before its export is compared) runs eagerly; a kind's one graph training
  in a session fixture runs as graphs."""
  before = tf.config.functions_run_eagerly()
  tf.config.run_functions_eagerly(eagerly)
  try:
    yield
  finally:
    tf.config.run_functions_eagerly(before)


@pytest.fixture(name='tiny')
def tiny_fixture():
  return tiny


@pytest.fixture
def config():
  return tiny()


@pytest.fixture
def two_replicas():
  return tf.distribute.MirroredStrategy(TWO_CPUS)


def shared_dir(tmp_path_factory, name, build):
  """Directory `name`, made by build(path) once for the whole run: by whichever pytest-xdist
  worker asks first, while the others wait on its lock. Read-only, as a session fixture's."""
  root = tmp_path_factory.getbasetemp()
  if os.environ.get('PYTEST_XDIST_WORKER'):
    root = root.parent  # pytest-N/popen-gwK: the workers of this run share pytest-N
  path, done = root / name, root / f'{name}.done'
  with open(root / f'{name}.lock', 'w') as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not done.exists():
      shutil.rmtree(path, ignore_errors=True)  # a build that failed in another worker
      path.mkdir()
      build(path)
      done.touch()
  return path


def train_tiny(workdir, steps, **overrides):
  """tiny(**overrides) trained `steps` steps in workdir; the trainer."""
  from tf_hat_ebm.tasks.synthesis import SynthesisTask  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  config = tiny(**overrides)
  strategy = tf.distribute.get_strategy()
  trainer = Trainer(SynthesisTask(config, strategy), config, str(workdir), strategy, verbose=False)
  trainer.train(steps)
  return trainer


@pytest.fixture(scope='session')
def trained_run(tmp_path_factory):
  """(workdir, trainer) of tiny() with figures trained for 2 steps (checkpoint, config.json,
  grids at step 2): the trainer for what it kept in memory (its report's figures). Read-only."""
  workdir = str(tmp_path_factory.mktemp('trained'))
  return workdir, train_tiny(workdir, 2, **{'training.figures': True})


@pytest.fixture(scope='session')
def trained_workdir(tmp_path_factory):
  """A workdir as trained_run's, for the eval tests (read-only: copy_of it to write)."""
  return str(shared_dir(tmp_path_factory, 'trained',
                        lambda path: train_tiny(path, 2, **{'training.figures': True})))


@pytest.fixture(scope='session')
def exported_workdir(trained_workdir, tmp_path_factory):
  """(path, printed lines) of trained_workdir's export (export_run): read-only, copy it to edit.
  One save for the tests that read an export: a save traces every signature."""
  from tf_hat_ebm import export  # pylint: disable=g-import-not-at-top

  def build(path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
      export.export_run(trained_workdir, str(path / 'saved_model'))
    (path / 'printed.txt').write_text(printed.getvalue())

  path = shared_dir(tmp_path_factory, 'exported', build)
  return str(path / 'saved_model'), (path / 'printed.txt').read_text()


def train_tiny_refinement(gan_dir, run_dir):
  """A tiny SN-GAN in gan_dir and a tiny refinement over it in run_dir, 2 steps each; the
  refinement's config. tiny() gives both the SN-GAN's shapes (widths 8, z_dim 4) and DDLS 2
  steps."""
  from tf_hat_ebm.tasks import joint  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.tasks import sngan  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  strategy = tf.distribute.get_strategy()
  gan_config = tiny('digits_sngan')
  Trainer(sngan.SNGANTask(gan_config, strategy), gan_config, gan_dir, strategy,
          verbose=False).train(2)
  config = tiny('digits_refine', **{'generator.path': gan_dir})
  Trainer(joint.JointTask(config, strategy), config, run_dir, strategy, verbose=False).train(2)
  return config


@pytest.fixture(scope='session')
def four_steps(tmp_path_factory):
  """A workdir of tiny() trained 4 steps: checkpoints ckpt-2 and ckpt-4, samples at step 4.
  Read-only: a test that writes works on copy_of(four_steps, tmp_path)."""
  return shared_dir(tmp_path_factory, 'four', lambda path: train_tiny(path, 4))


def copy_of(workdir, tmp_path):
  """A copy of a shared trained workdir in tmp_path/run, for a test that writes to it."""
  target = tmp_path / 'run'
  shutil.copytree(workdir, target)
  return target


@pytest.fixture(scope='session')
def trained_autoencoder(tmp_path_factory):
  """(workdir, task, last metrics, trainer) of a tiny digits_autoencoder trained 2 steps, evaluated
  and sampled at each: the autoencoder tests' run and the retrofits' frozen decoder (read-only)."""
  from tf_hat_ebm.tasks import autoencoder  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  config = tiny('digits_autoencoder', **{
      'training.batch_size': 8, 'training.num_steps': 2, 'training.steps_per_loop': 1,
      'training.eval_every': 1, 'training.eval_examples': 16, 'training.sample_every': 2,
      'training.figures': True})
  workdir = str(tmp_path_factory.mktemp('autoencoder'))
  strategy = tf.distribute.get_strategy()
  task = autoencoder.AutoencoderTask(config, strategy)
  trainer = Trainer(task, config, workdir, strategy, verbose=False)
  with functions_run(eagerly=False):  # the autoencoder's graph training of the fast suite
    metrics = trainer.train(2)
  return workdir, task, metrics, trainer


FOLDER_IMAGES = 300  # digits written as PNGs by `digits_folder`


def write_png(path, pixels):
  """uint8 pixels [h, w, c] as a PNG file at path (its folder made)."""
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tf.io.write_file(path, tf.io.encode_png(tf.constant(pixels)))


@pytest.fixture(scope='session')
def digits_folder(tmp_path_factory):
  """(a folder of FOLDER_IMAGES digit PNGs in class folders class_<label>/, uint8 [n, 8, 8, 1]
  pixels in the order of their sorted paths): a user's folder of images."""
  from tf_hat_ebm import data  # pylint: disable=g-import-not-at-top
  images, labels = data.digits_arrays('train')
  pixels = np.round((images[:FOLDER_IMAGES] + 1.0) * 127.5).astype(np.uint8)
  names = [f'class_{label}/{i:04d}.png' for i, label in enumerate(labels[:FOLDER_IMAGES])]

  def build(folder):
    for name, image in zip(names, pixels):
      write_png(str(folder / name), image)

  folder = shared_dir(tmp_path_factory, 'digits_png', build)
  order = np.argsort([str(folder / name) for name in names])
  return str(folder), pixels[order]


@pytest.fixture(scope='session')
def folder_workdir(digits_folder, tmp_path_factory):
  """A workdir of tiny() on `digits_folder`'s PNGs (folder:<path>) trained for 4 steps, with
  random flips and no cache (its checkpoints save the input position of that pipeline)."""
  return str(shared_dir(tmp_path_factory, 'folder_run', lambda path: train_tiny(
      path, 4, **{'data.name': f'folder:{digits_folder[0]}', 'data.random_flip': True,
                  'data.cache': False, 'training.figures': True})))


def script_call(script):
  """The arguments of experiments/<script>'s one call, `cli.main(name, **keywords)`."""
  with open(os.path.join(REPO, 'experiments', script)) as f:
    tree = ast.parse(f.read())
  call, = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
           and isinstance(n.func, ast.Attribute) and n.func.attr == 'main']
  return ([ast.literal_eval(a) for a in call.args],
          {k.arg: ast.literal_eval(k.value) for k in call.keywords})


def run_command(script, *args):
  """experiments/<script> with `args`, run in this process (its one call, cli.main): a
  CompletedProcess with its exit code and what it printed."""
  path = os.path.join(REPO, 'experiments', script)
  positional, keywords = script_call(script)
  out, err, code = io.StringIO(), io.StringIO(), 0
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      cli.main(*positional, argv=[path, *args], **keywords)
    except SystemExit as e:
      code = e.code if isinstance(e.code, int) else int(e.code is not None)
  return subprocess.CompletedProcess([path, *args], code, out.getvalue(), err.getvalue())


def train_keeps_generator_frozen(task, config, workdir, steps=2):
  """Trains `task` for `steps`: its metrics finite, its frozen generator's weights unchanged."""
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  before = [v.numpy().copy() for v in task.generator.model.variables]
  metrics = Trainer(task, config, str(workdir), tf.distribute.get_strategy(),
                    verbose=False).train(steps)
  assert all(np.isfinite(v) for v in metrics.values())
  for a, b in zip(before, task.generator.model.variables):
    np.testing.assert_array_equal(a, b.numpy())
  return metrics
