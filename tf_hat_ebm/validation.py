"""Every config check, in one place, run wherever a config is built or read back; TensorFlow-free.

`validate(config)` checks that every field is one of its experiment kind's (an unknown field
is named), the type of every field against the kind's defaults (a config.json edited to
`"hat_width": "8"` fails here, not deep inside Keras), every choice field against its one list
below, every text field (printable UTF-8), and the range of every number a run reads: signs
and sane upper bounds of chain lengths, step sizes, drift clips, temperatures, Adam's betas,
seeds, counts, widths and sizes. Training, resume, sampling, export, evaluation and import all
call it, so a value that would reverse the sampler (a negative step size) or break the optimizer
never runs. Each error is one ValueError naming the field (and the file, for a config read back).
"""
import math

from tf_hat_ebm import config as config_lib

OPTIONAL_FLOATS = config_lib.OPTIONAL_FLOATS  # None: off
FLOAT32_MAX = 3.4028234663852886e38
CHAIN_SECTIONS = ('langevin', 'sampling', 'ddls')
# Kept here (not imported from data.py / nets.py) so that checking a config needs no TensorFlow.
DIFFAUGMENT_POLICIES = ('color', 'translation', 'cutout')  # augment.py
DATASETS = ('digits', 'cifar10', 'cifar100', 'svhn_cropped', 'celeb_a', 'imagenet2012')
# A user's images (image_sources.py): 'folder:<path>' or 'array:<path>'.
USER_SOURCES = ('folder:', 'array:')
SUPPORTED_IMAGE_SIZES = (16, 32, 64, 128)
# The choices of every choice field, defined once here and read by the modules that act on them.
GENERATOR_SOURCES = ('sngan', 'autoencoder', 'synthesis', 'savedmodel', 'factory')
PRECISIONS = ('float32', 'mixed_bfloat16', 'mixed_float16')  # Keras policies; config adds 'auto'
CLIP_MODES = ('global', 'per_variable_per_replica')
GENERATOR_UPDATES = ('bank', 'current', 'cooperative', 'cooperative_bn')
CROPS = ('release', 'random_resized')
RESIZE_METHODS = ('bilinear', 'nearest', 'bicubic', 'area', 'lanczos3', 'lanczos5', 'gaussian',
                  'mitchellcubic')  # tf.image.resize's
LR_DECAYS = ('linear', 'constant')
INITS = ('glorot', 'mimicry')
GUARD_ACTIONS = ('auto', 'stop', 'rollback', 'warn', 'off')  # training.guard.action (guard.py)
JIT_COMPILE_SETTINGS = ('auto', 'on', 'off')  # perf.jit_compile (perf.py)
# the FID's features (--feature_net): classifier_retrained trains the classifier on this machine
FEATURE_NETS = ('inception', 'classifier', 'classifier_retrained')
# The fewest samples per set every metric can score: recall's k-NN manifold of the samples
# (k = metrics.K_NEAREST = 3) needs each sample and 3 others (FID and KID need 2).
MIN_METRIC_SAMPLES = 4
# Sane upper bounds: far above any run the paper or the release made, far below what overflows
# TensorFlow's int32 shapes or float32, or would run for days before the first line is printed.
MAX_SEED = 2**31 - 1
# A chain a user can wait for: 28x the longest a config runs (350), minutes on a CPU.
MAX_CHAIN_STEPS = 10_000
MAX_LOOP_STEPS = 100_000  # training.steps_per_loop: steps per host call
MAX_STEP_SIZE = 100.0
MAX_SCALE = 1e6       # temperatures, drift clips, prior sigmas, loss factors
MAX_WIDTH = 4096
MAX_Z_DIM = 65_536
MAX_BATCH = 65_536
MAX_STEPS = 10**9     # training steps and periods
MAX_COUNT = 10**7     # bank, buffers, examples
MAX_NAME = 200


class ConfigError(ValueError):
  """A config field of the wrong type or out of range."""


def check_dataset(name):
  if name.startswith(USER_SOURCES) and name.split(':', 1)[1]:
    return
  if name not in DATASETS:
    raise ConfigError(f'unknown dataset {name!r}; known datasets: {", ".join(DATASETS)}, or '
                      'your images as folder:<path> or array:<path.npy|.npz>')


def check_image_size(image_size):
  if image_size not in SUPPORTED_IMAGE_SIZES:
    raise ConfigError(f'image size {image_size} has no SN-GAN network; supported sizes are '
                      f'{", ".join(map(str, SUPPORTED_IMAGE_SIZES))}')


def diffaugment_policy(policy):
  """'translation,cutout' -> ('translation', 'cutout'); '' -> (); an unknown name is an error."""
  names = tuple(p.strip() for p in str(policy or '').split(',') if p.strip())
  unknown = [p for p in names if p not in DIFFAUGMENT_POLICIES]
  if unknown:
    raise ConfigError(f'training.diffaugment: unknown {", ".join(map(repr, unknown))}; choose '
                      f'from {", ".join(DIFFAUGMENT_POLICIES)} (comma-separated, or \'\' for none)')
  return names


def _fail(field, requirement, value, source):
  where = f'{source}: ' if source else ''
  raise ConfigError(f'{where}config field {field} must be {requirement}; got {value!r}')


def check_number(field, value, low=None, high=None, strict_low=False, strict_high=False,
                 integer=False, optional=False, source=None):
  """A finite number (an int if `integer`) within [low, high] (open ends if strict), or None if
  `optional`; else a ConfigError naming the field."""
  if optional and value is None:
    return
  ok = isinstance(value, int) if integer else isinstance(value, (int, float))
  ok = ok and not isinstance(value, bool) and math.isfinite(value) and abs(value) <= FLOAT32_MAX
  if ok and low is not None:
    ok = value > low if strict_low else value >= low
  if ok and high is not None:
    ok = value < high if strict_high else value <= high
  if not ok:
    kind = 'an integer' if integer else 'a finite number'
    bounds = []
    if low is not None:
      bounds.append(f'{">" if strict_low else ">="} {_show(low)}')
    if high is not None:
      bounds.append(f'{"<" if strict_high else "<="} {_show(high)}')
    requirement = f'{kind} {" and ".join(bounds)}'.strip()
    _fail(field, requirement + (' (or None)' if optional else ''), value, source)


def _show(bound):
  return str(bound) if isinstance(bound, int) else f'{bound:g}'


def _check_choice(field, value, choices, source):
  if isinstance(value, (list, dict)) or value not in choices:
    _fail(field, f'one of {", ".join(map(str, choices))}', value, source)


def check_text(field, value, source=None, max_length=None):
  """Text that is printable and valid UTF-8 (no lone surrogate, no control character)."""
  if not isinstance(value, str):
    _fail(field, 'a string', value, source)
  try:
    value.encode('utf-8')
    ok = value.isprintable()
  except UnicodeEncodeError:
    ok = False
  if not ok or (max_length and len(value) > max_length):
    what = f'printable text of at most {max_length} characters' if max_length else 'printable text'
    _fail(field, what + ' (no control characters or lone surrogates)', value, source)


def check_texts(config, source=None, prefix=''):
  """Every string field of the dict `config` (and its sections) is printable UTF-8."""
  for name, value in config.items():
    if isinstance(value, dict):
      check_texts(value, source, f'{prefix}{name}.')
    elif isinstance(value, str):
      check_text(prefix + name, value, source)


def check_known(config, defaults, source=None, prefix=''):
  """Fails naming every field of the dict `config` that its kind's `defaults` do not have: a
  misspelt or foreign field would otherwise be ignored without a word."""
  unknown = _unknown(config, defaults, prefix)
  if unknown:
    where = f'{source}: ' if source else ''
    raise ConfigError(f'{where}unknown config field{"s" if len(unknown) > 1 else ""} '
                      f'{", ".join(unknown)} (not a field of a {config.get("experiment")} run); '
                      'remove or correct them')


def _unknown(config, defaults, prefix):
  found = []
  for name, value in config.items():
    if name not in defaults:
      found.append(prefix + name)
    elif isinstance(value, dict) and isinstance(defaults[name], dict):
      found += _unknown(value, defaults[name], f'{prefix}{name}.')
  return found


# ---- types ---------------------------------------------------------------------------------------
def _type_name(default):
  if isinstance(default, bool):
    return 'true or false'
  if isinstance(default, int):
    return 'an integer'
  if isinstance(default, float):
    return 'a number'
  if isinstance(default, str):
    return 'a string'
  return 'a list'


def _type_ok(value, default):
  if isinstance(default, bool):
    return isinstance(value, bool)
  if isinstance(default, int):
    return isinstance(value, int) and not isinstance(value, bool)
  if isinstance(default, float):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  if isinstance(default, str):
    return isinstance(value, str)
  if isinstance(default, (tuple, list)):
    return isinstance(value, (tuple, list))
  return True


def check_types(config, defaults, source=None, prefix=''):
  """Every field of the dict `config` that `defaults` knows has the type of its default (an int
  where a float is expected is fine; None only where the default is None)."""
  for name, default in defaults.items():
    if name not in config:
      continue
    value, field = config[name], prefix + name
    if isinstance(default, dict):
      if not isinstance(value, dict):
        _fail(field, 'a section (JSON object)', value, source)
      check_types(value, default, source, field + '.')
    elif value is None and name in OPTIONAL_FLOATS:
      continue
    elif default is not None and not _type_ok(value, default):
      _fail(field, _type_name(default), value, source)


# ---- ranges --------------------------------------------------------------------------------------
def check_chains(config, source=None):
  for section in CHAIN_SECTIONS:
    cfg = config.get(section)
    if cfg is None:
      continue
    # The training chain needs at least one step (K = 0 would train on the initial state);
    # sampling with K = 0 returns G(Z) + Y0 and stays allowed.
    check_number(f'{section}.steps', cfg.get('steps'), 1 if section == 'langevin' else 0,
                 MAX_CHAIN_STEPS, integer=True, source=source)
    for name, high in (('step_size', MAX_STEP_SIZE), ('latent_step_size', MAX_STEP_SIZE),
                       ('temperature', MAX_SCALE)):
      if name in cfg:
        check_number(f'{section}.{name}', cfg[name], 0, high, strict_low=True, source=source)
    for name in ('max_drift', 'prior_sigma'):  # None: off
      if name in cfg:
        check_number(f'{section}.{name}', cfg[name], 0, MAX_SCALE, strict_low=True,
                     optional=True, source=source)
    if 'init_scale' in cfg:
      check_number(f'{section}.init_scale', cfg.init_scale, 0, MAX_SCALE, source=source)


def check_training(t, source=None):
  """The training section: batch, counts, periods, rollback and runaway guard."""
  def number(key, low, **kw):
    check_number(f'training.{key}', t[key], low, source=source, **kw)

  check_number('training.batch_size', t.get('batch_size'), 1, MAX_BATCH, integer=True,
               source=source)
  for key, high in (('steps_per_loop', MAX_LOOP_STEPS), ('keep_checkpoints', 10_000),
                    ('num_grid_samples', 10_000), ('bank_size', MAX_COUNT), ('n_dis', 1000),
                    ('eval_examples', MAX_COUNT)):
    if key in t:
      number(key, 1, high=high, integer=True)
  for key in ('num_steps', 'log_every', 'checkpoint_every', 'sample_every', 'first_grid',
              'archive_every',
              'max_rollbacks', 'eval_every'):  # periods: 0 is never
    if key in t and t[key] is not None:
      number(key, 0, high=MAX_STEPS, integer=True)
  for key in ('data_eps', 'gen_loss_factor', 'latent_noise', 'recon_factor'):
    if key in t:
      number(key, 0, high=MAX_SCALE)
  if 'gen_ema' in t:
    number('gen_ema', 0, high=1, strict_high=True)
  if 'diffaugment' in t:
    diffaugment_policy(t.diffaugment)
  if 'generator_update' in t:
    _check_choice('training.generator_update', t.generator_update, GENERATOR_UPDATES, source)
  if 'rollback_lr_factor' in t:
    number('rollback_lr_factor', 0, high=1, strict_low=True, strict_high=True)
  g = t.get('guard')
  if g is not None:
    _check_choice('training.guard.action', g.get('action'), GUARD_ACTIONS, source)
    for key, low in (('patience', 1), ('window', 1), ('warmup', 0), ('trend_window', 0),
                     ('early', 0)):
      if key in g or key in ('patience', 'window', 'warmup'):  # trend fields: newer configs
        check_number(f'training.guard.{key}', g.get(key), low, MAX_STEPS, integer=True,
                     source=source)
    for key in ('max_doubling', 'min_rise'):
      if key in g:
        check_number(f'training.guard.{key}', g.get(key), 0, MAX_SCALE, source=source)
    check_number('training.guard.max_abs_energy_diff', g.get('max_abs_energy_diff'), 0,
                 source=source)
    growth = g.get('growth_factor')
    check_number('training.guard.growth_factor', growth, 0, source=source)
    if 0 < growth <= 1:
      _fail('training.guard.growth_factor', '> 1 (or 0: off)', growth, source)


def check_optim(optim, source=None):
  for name, value in optim.items():
    field = f'optim.{name}'
    if name in ('beta1', 'beta2'):
      check_number(field, value, 0, 1, strict_high=True, source=source)
    elif name.endswith('_lr'):
      check_number(field, value, 0, source=source)
    elif name.endswith('_clip_norm'):
      check_number(field, value, 0, strict_low=True, optional=True, source=source)
    elif name.endswith('_lr_values'):
      for i, v in enumerate(value):
        check_number(f'{field}[{i}]', v, 0, source=source)
    elif name.endswith('_lr_boundaries'):
      for i, v in enumerate(value):
        check_number(f'{field}[{i}]', v, 0, MAX_STEPS, integer=True, source=source)
    elif name == 'epsilon':
      check_number(field, value, 0, strict_low=True, source=source)
    elif name.endswith('_clip_mode'):
      _check_choice(field, value, CLIP_MODES, source)
    elif name == 'lr_decay':
      _check_choice(field, value, LR_DECAYS, source)


def check_data_and_model(config, source=None):
  data = config.data
  check_dataset(data.name)
  check_image_size(data.image_size)
  _check_choice('data.channels', data.channels, (1, 3), source)
  if data.name == 'digits' and data.channels != 1:
    raise ConfigError('digits has 1 channel; set --config.data.channels=1')
  if data.get('classes') and (data.name != 'digits' or not set(data.classes) <= set(range(10))):
    _fail('data.classes', 'digit labels 0-9 of the digits dataset (() = all)', data.classes,
          source)
  if 'test_fraction' in data:
    check_number('data.test_fraction', data.test_fraction, 0, 1, strict_low=True,
                 strict_high=True, source=source)
  for key in ('shuffle_buffer', 'seed', 'split_seed'):
    if key in data:
      check_number(f'data.{key}', data[key], 0, MAX_COUNT if key == 'shuffle_buffer' else MAX_SEED,
                   integer=True, source=source)
  for key, choices in (('crop', CROPS), ('resize_method', RESIZE_METHODS)):
    if key in data:
      _check_choice(f'data.{key}', data[key], choices, source)
  if 'features_range' in data:
    low, high = (tuple(data.features_range) + (None, None))[:2]
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and low < high):
      _fail('data.features_range', 'two numbers low < high', data.features_range, source)
  if 'crop_area_range' in data:
    low, high = (tuple(data.crop_area_range) + (None, None))[:2]
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float))
            and 0 < low <= high <= 1):
      _fail('data.crop_area_range', 'two numbers 0 < low <= high <= 1', data.crop_area_range,
            source)
  model = config.get('model') or {}
  for key in ('hat_width', 'gen_width', 'enc_width', 'z_dim'):
    if key in model:
      check_number(f'model.{key}', model[key], 1, MAX_Z_DIM if key == 'z_dim' else MAX_WIDTH,
                   integer=True, source=source)
  if 'disc_width' in model:  # 0: no discriminator (an imported generator)
    check_number('model.disc_width', model.disc_width, 0, MAX_WIDTH, integer=True, source=source)
  if 'out_factor' in model:
    check_number('model.out_factor', model.out_factor, 0, MAX_SCALE, strict_low=True,
                 source=source)
  if 'init' in model:
    _check_choice('model.init', model.init, INITS, source)
  perf = config.get('perf') or {}
  if 'precision' in perf:
    _check_choice('perf.precision', perf.precision, ('auto',) + PRECISIONS, source)
  if 'jit_compile' in perf:
    _check_choice('perf.jit_compile', perf.jit_compile, JIT_COMPILE_SETTINGS, source)


def check_generator(config, source=None):
  gen = config.get('generator')
  if gen is None:
    return
  _check_choice('generator.source', gen.source, GENERATOR_SOURCES, source)
  for i, d in enumerate(gen.get('latent_shape') or ()):
    check_number(f'generator.latent_shape[{i}]', d, 1, MAX_Z_DIM, integer=True, source=source)
  output_range = tuple(gen.get('output_range') or (-1.0, 1.0))
  # Finite and bounded: the map to [-1, 1] divides by high - low (Inf made NaN samples).
  if (len(output_range) != 2
      or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                 and math.isfinite(v) and abs(v) <= MAX_SCALE for v in output_range)
      or not output_range[0] < output_range[1]):
    _fail('generator.output_range', f'two finite numbers low < high, each within +-{MAX_SCALE:g}',
          gen.output_range, source)
  if gen.get('checkpoint') is not None:
    check_number('generator.checkpoint', gen.checkpoint, 0, MAX_STEPS, integer=True,
                 optional=True, source=source)


def validate(config, defaults=None, source=None):
  """All checks of `config` (a ConfigDict): the type of every field against `defaults` (its
  kind's defaults, registry.Kind.defaults(); None: not type-checked), then the ranges; `source`
  (e.g. the config.json path) prefixes errors."""
  as_dict = config.to_dict()
  if defaults is not None:
    check_known(as_dict, defaults.to_dict(), source)
    check_types(as_dict, defaults.to_dict(), source)
  check_texts(as_dict, source)
  check_text('name', config.get('name', ''), source, MAX_NAME)
  check_number('seed', config.get('seed', 0), 0, MAX_SEED, integer=True, source=source)
  check_data_and_model(config, source)
  check_chains(config, source)
  if config.get('training') is not None:
    check_training(config.training, source)
  check_optim(config.get('optim') or {}, source)
  check_generator(config, source)
  return config
