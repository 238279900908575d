"""Every config check, in one place, run wherever a config is built or read back; TensorFlow-free.

`validate(config)` checks the type of every field against its experiment kind's defaults (a
config.json edited to `"hat_width": "8"` fails here, not deep inside Keras) and the range of every
number a run reads: signs and bounds of step sizes, drift clips, temperatures, Adam's betas,
counts and sizes. Training, resume, sampling, export, evaluation and import all call it, so a
value that would reverse the sampler (a negative step size) or break the optimizer never runs.
Each error is one ValueError naming the field (and the file, for a config read back).
"""
import math

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import guard as guard_lib

OPTIONAL_FLOATS = config_lib.OPTIONAL_FLOATS  # None: off
FLOAT32_MAX = 3.4028234663852886e38
CHAIN_SECTIONS = ('langevin', 'sampling', 'ddls')
# Kept here (not imported from data.py / nets.py) so that checking a config needs no TensorFlow.
DATASETS = ('digits', 'cifar10', 'cifar100', 'svhn_cropped', 'celeb_a', 'imagenet2012')
SUPPORTED_IMAGE_SIZES = (16, 32, 64, 128)
GENERATOR_SOURCES = ('sngan', 'autoencoder', 'savedmodel', 'factory')


class ConfigError(ValueError):
  """A config field of the wrong type or out of range."""


def check_dataset(name):
  if name not in DATASETS:
    raise ConfigError(f'unknown dataset {name!r}; known datasets: {", ".join(DATASETS)}')


def check_image_size(image_size):
  if image_size not in SUPPORTED_IMAGE_SIZES:
    raise ConfigError(f'image size {image_size} has no SN-GAN network; supported sizes are '
                      f'{", ".join(map(str, SUPPORTED_IMAGE_SIZES))}')


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
      bounds.append(f'{">" if strict_low else ">="} {low:g}')
    if high is not None:
      bounds.append(f'{"<" if strict_high else "<="} {high:g}')
    requirement = f'{kind} {" and ".join(bounds)}'.strip()
    _fail(field, requirement + (' (or None)' if optional else ''), value, source)


def _check_choice(field, value, choices, source):
  if value not in choices:
    _fail(field, f'one of {", ".join(map(str, choices))}', value, source)


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
                 integer=True, source=source)
    for name in ('step_size', 'latent_step_size', 'temperature'):
      if name in cfg:
        check_number(f'{section}.{name}', cfg[name], 0, strict_low=True, source=source)
    for name in ('max_drift', 'prior_sigma'):  # None: off
      if name in cfg:
        check_number(f'{section}.{name}', cfg[name], 0, strict_low=True, optional=True,
                     source=source)
    if 'init_scale' in cfg:
      check_number(f'{section}.init_scale', cfg.init_scale, 0, source=source)


def check_training(t, source=None):
  """The training section: batch, counts, periods, rollback and runaway guard."""
  def number(key, low, **kw):
    check_number(f'training.{key}', t[key], low, source=source, **kw)

  check_number('training.batch_size', t.get('batch_size'), 1, integer=True, source=source)
  for key in ('steps_per_loop', 'keep_checkpoints', 'num_grid_samples', 'bank_size', 'n_dis',
              'eval_examples'):
    if key in t:
      number(key, 1, integer=True)
  for key in ('num_steps', 'log_every', 'checkpoint_every', 'sample_every', 'archive_every',
              'max_rollbacks', 'eval_every'):  # periods: 0 is never
    if key in t and t[key] is not None:
      number(key, 0, integer=True)
  for key in ('data_eps', 'gen_loss_factor', 'latent_noise', 'recon_factor'):
    if key in t:
      number(key, 0)
  if 'rollback_lr_factor' in t:
    number('rollback_lr_factor', 0, high=1, strict_low=True, strict_high=True)
  g = t.get('guard')
  if g is not None:
    _check_choice('training.guard.action', g.get('action'), guard_lib.ACTIONS, source)
    for key, low in (('patience', 1), ('window', 1), ('warmup', 0), ('trend_window', 0),
                     ('early', 0)):
      if key in g or key in ('patience', 'window', 'warmup'):  # trend fields: newer configs
        check_number(f'training.guard.{key}', g.get(key), low, integer=True, source=source)
    for key in ('max_doubling', 'min_rise'):
      if key in g:
        check_number(f'training.guard.{key}', g.get(key), 0, source=source)
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
    elif name == 'epsilon':
      check_number(field, value, 0, strict_low=True, source=source)


def check_data_and_model(config, source=None):
  data = config.data
  check_dataset(data.name)
  check_image_size(data.image_size)
  _check_choice('data.channels', data.channels, (1, 3), source)
  if data.name == 'digits' and data.channels != 1:
    raise ConfigError('digits has 1 channel; set --config.data.channels=1')
  if 'shuffle_buffer' in data:
    check_number('data.shuffle_buffer', data.shuffle_buffer, 0, integer=True, source=source)
  if 'crop_area_range' in data:
    low, high = (tuple(data.crop_area_range) + (None, None))[:2]
    if not (isinstance(low, (int, float)) and isinstance(high, (int, float))
            and 0 < low <= high <= 1):
      _fail('data.crop_area_range', 'two numbers 0 < low <= high <= 1', data.crop_area_range,
            source)
  model = config.get('model') or {}
  for key in ('hat_width', 'gen_width', 'enc_width', 'z_dim'):
    if key in model:
      check_number(f'model.{key}', model[key], 1, integer=True, source=source)
  if 'disc_width' in model:  # 0: no discriminator (an imported generator)
    check_number('model.disc_width', model.disc_width, 0, integer=True, source=source)
  if 'out_factor' in model:
    check_number('model.out_factor', model.out_factor, 0, strict_low=True, source=source)


def check_generator(config, source=None):
  gen = config.get('generator')
  if gen is None:
    return
  _check_choice('generator.source', gen.source, GENERATOR_SOURCES, source)
  for i, d in enumerate(gen.get('latent_shape') or ()):
    check_number(f'generator.latent_shape[{i}]', d, 1, integer=True, source=source)
  output_range = tuple(gen.get('output_range') or (-1.0, 1.0))
  if (len(output_range) != 2 or not all(isinstance(v, (int, float)) for v in output_range)
      or not output_range[0] < output_range[1]):
    _fail('generator.output_range', 'two numbers low < high', gen.output_range, source)
  if gen.get('checkpoint') is not None:
    check_number('generator.checkpoint', gen.checkpoint, 0, integer=True, optional=True,
                 source=source)


def validate(config, defaults=None, source=None):
  """All checks of `config` (a ConfigDict): the type of every field against `defaults` (its
  kind's defaults, registry.Kind.defaults(); None: not type-checked), then the ranges; `source`
  (e.g. the config.json path) prefixes errors."""
  if defaults is not None:
    check_types(config.to_dict(), defaults.to_dict(), source)
  check_number('seed', config.get('seed', 0), 0, integer=True, source=source)
  check_data_and_model(config, source)
  check_chains(config, source)
  if config.get('training') is not None:
    check_training(config.training, source)
  check_optim(config.get('optim') or {}, source)
  check_generator(config, source)
  return config
