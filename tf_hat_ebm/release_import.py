"""Loads the authors' published models (Keras `save_weights` checkpoints) into tf_hat_ebm networks.

The release saves its networks with `model.save_weights(path)`: a TF checkpoint whose variables are
named by the release's layer attributes (`conv_1/conv_2/kernel`, `block2/bn_1/gamma`, `lin_1/...`).
`release_variables(model)` maps those names onto the variables of this project's networks (same
layouts: nets.py), and `load_release_weights` copies them over, checking every name
and shape. Two facts of the release matter: its generators reshape the dense output as NCHW
[-1, ngf, 4, 4] before transposing to NHWC (so the dense columns are permuted here), and its batch
norms keep their initial statistics 0 / 1 with epsilon 1e-3 (as ours).

`import_release` writes a workdir that `trained_run.load_run` (and so sample.py, evaluate_fid.py,
evaluate_ood.py, export.py) restores: config.json plus a checkpoint of the run's inference model.
"""
import json
import os
from typing import Literal, Optional

import ml_collections
import tensorflow as tf

from tf_hat_ebm import nets
from tf_hat_ebm import registry
from tf_hat_ebm import workdir as workdir_lib

# A kind's `release` hook (registry.Kind.hooks): the type of the release's model its runs hold.
Release = Literal['conditional', 'joint']
_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
# Sub-layers of a release block -> attribute of ours (nets.DiscriminatorBlock, GeneratorBlock,
# nets.DecoderStemBlock).
_BLOCK_LAYERS = {'conv_1': 'c1', 'conv_2': 'c2', 'sc': 'c_sc', 'bn_1': 'b1', 'bn_2': 'b2'}
_LAYER_VARIABLES = ('kernel', 'bias', 'gamma', 'beta', 'moving_mean', 'moving_variance')


def _layer(prefix, layer):
  return {f'{prefix}/{name}': getattr(layer, name) for name in _LAYER_VARIABLES
          if getattr(layer, name, None) is not None}


def _blocks(names, blocks):
  out = {}
  for prefix, block in zip(names, blocks):
    for theirs, ours in _BLOCK_LAYERS.items():
      if getattr(block, ours, None) is not None:
        out.update(_layer(f'{prefix}/{theirs}', getattr(block, ours)))
  return out


def release_variables(model):
  """{release variable name: our variable} for a built network of this project.

  Release names (EBMSNGAN*, GenSNGAN*, GenDecoder32, InfEncoder32): the hat's stem is `conv_1`,
  its blocks `block2..` and its head `lin_<n+1>`; a generator's dense layer is `lin_1`, its blocks
  `block2..`, then `bn_<n+2>`, `conv_<n+2>`; the decoder's blocks are `block1..`, then `bn_<n+1>`,
  `conv_<n+1>`; the encoder's blocks `block1..`, then `conv2latent`.
  """
  n = len(model.blocks)
  if isinstance(model, nets.HatNetwork):
    names = ['conv_1'] + [f'block{i + 1}' for i in range(1, n)]
    return {**_blocks(names, model.blocks), **_layer(f'lin_{n + 1}', model.head)}
  if isinstance(model, nets.Generator):
    return {**_layer('lin_1', model.dense),
            **_blocks([f'block{i + 2}' for i in range(n)], model.blocks),
            **_layer(f'bn_{n + 2}', model.bn), **_layer(f'conv_{n + 2}', model.to_image)}
  if isinstance(model, nets.Decoder):
    return {**_blocks([f'block{i + 1}' for i in range(n)], model.blocks),
            **_layer(f'bn_{n + 1}', model.bn), **_layer(f'conv_{n + 1}', model.to_image)}
  if isinstance(model, nets.Encoder):
    return {**_blocks([f'block{i + 1}' for i in range(n)], model.blocks),
            **_layer('conv2latent', model.to_latent)}
  raise TypeError(f'no release layout for {type(model).__name__}')


def nchw_to_nhwc_columns(value, channels):
  """Permutes the last axis of the release's dense layer from (C, 4, 4) to ours, (4, 4, C)."""
  lead = value.shape[:-1]
  return value.reshape(*lead, channels, 4, 4).transpose(
      *range(len(lead)), len(lead) + 1, len(lead) + 2, len(lead)).reshape(*lead, -1)


def load_release_weights(model, path):
  """Copies the release checkpoint at `path` into `model` (built); one-line ValueError on mismatch.

  Every variable of the model must be in the checkpoint with the same shape, and every network
  variable of the checkpoint must have found a place in the model.
  """
  try:
    reader = tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    raise ValueError(f'cannot read a checkpoint at {path}: {str(e).strip().splitlines()[0]}') from e
  shapes = reader.get_variable_to_shape_map()
  wanted = release_variables(model)
  missing = sorted(name for name in wanted if name + _SUFFIX not in shapes)
  if missing:
    raise ValueError(f'{path} has no variable {missing[0]} (shape '
                     f'{wanted[missing[0]].shape.as_list()}) of a {type(model).__name__}: is it '
                     'the right network?')
  for name, variable in wanted.items():
    value = reader.get_tensor(name + _SUFFIX)
    if isinstance(model, nets.Generator) and name.startswith('lin_1/'):
      if value.shape[-1] == variable.shape[-1]:  # (another size is reported just below)
        value = nchw_to_nhwc_columns(value, model.width)
    if tuple(value.shape) != tuple(variable.shape):
      raise ValueError(f'{path}: {name} has shape {list(value.shape)}; the config\'s '
                       f'{type(model).__name__} expects {variable.shape.as_list()}')
    variable.assign(value.astype(variable.dtype.as_numpy_dtype))
  unused = sorted(k[:-len(_SUFFIX)] for k in shapes
                  if k.endswith(_SUFFIX) and k[:-len(_SUFFIX)] not in wanted
                  and 'OPTIMIZER_SLOT' not in k)
  if unused:
    raise ValueError(f'{path} holds variables a {type(model).__name__} of this config does not '
                     f'have ({", ".join(unused[:3])}{", ..." if len(unused) > 3 else ""})')
  return model


# ---- workdirs ----------------------------------------------------------------------------------
# Each imported workdir records what it was imported from; a rerun of the same import after a kill
# keeps a workdir so recorded (it is complete: a workdir only appears once complete).
RECORD = 'import.json'


def _request(config, step, files):
  """What identifies an import: the config, the step and the release files (absolute)."""
  return dict(config=json.loads(config.to_json_best_effort()), step=step,
              files={k: os.path.abspath(v) for k, v in files.items() if v})


def _imported(workdir, request):
  """True when `workdir` is this very import, finished earlier; raises when it holds another
  run; False when there is nothing (or an empty directory) to replace."""
  if not tf.io.gfile.exists(workdir):
    return False
  try:
    with tf.io.gfile.GFile(os.path.join(workdir, RECORD)) as f:
      done = workdir_lib.parse_json(f.read()) == request
  except (tf.errors.OpError, ValueError):
    done = False
  if tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints')):
    if done:
      return True
    raise ValueError(f'workdir {workdir} already holds a checkpoint; import into a new --workdir')
  if tf.io.gfile.listdir(workdir):
    raise ValueError(f'workdir {workdir} is not empty; import into a new --workdir')
  return False


def _staging(workdir):
  """A fresh staging directory beside `workdir` (a killed import's leftover removed)."""
  parent, name = os.path.split(os.path.normpath(workdir))
  staging = os.path.join(parent, f'.{name}.import-staging')
  if tf.io.gfile.exists(staging):
    tf.io.gfile.rmtree(staging)
  return staging


def _write_workdir(workdir, config, step, items, request):
  """config.json, checkpoints/ckpt-<step> of `items` (as the trainer writes them) and the import's
  record, in `workdir` (a staging directory)."""
  tf.io.gfile.makedirs(workdir)
  with tf.io.gfile.GFile(os.path.join(workdir, 'config.json'), 'w') as f:
    f.write(config.to_json_best_effort(indent=2))
  checkpoint = tf.train.Checkpoint(step=tf.Variable(step, dtype=tf.int64, trainable=False), **items)
  tf.train.CheckpointManager(checkpoint, os.path.join(workdir, 'checkpoints'),
                             max_to_keep=1).save(checkpoint_number=step)
  with tf.io.gfile.GFile(os.path.join(workdir, RECORD), 'w') as f:
    json.dump(request, f, indent=2)


def _move_in(staging, workdir):
  """Puts the complete `staging` at `workdir` in one rename (an empty directory there goes)."""
  if tf.io.gfile.isdir(workdir):
    tf.io.gfile.rmtree(workdir)  # empty (_imported)
  tf.io.gfile.makedirs(os.path.dirname(os.path.normpath(workdir)) or '.')
  tf.io.gfile.rename(staging, workdir)


def _require(path, flag, what):
  if not path:
    raise ValueError(f'{what} needs --{flag}')
  return path


def _joint_generator(config, generator, decoder, encoder, generator_workdir):
  """(joint config, generator workdir's config, its checkpoint items) for config.generator."""
  config = ml_collections.ConfigDict(config.to_dict())  # unlocked copy: fields are removed below
  gcfg, data = config.generator, config.data
  gcfg.path = os.path.abspath(generator_workdir)
  if gcfg.source == 'sngan':
    _require(generator, 'generator', 'a refinement config')
    # The release's generators keep batch-norm statistics 0 / 1 (epsilon 1e-3) and come without
    # a discriminator, so DDLS is not available on an imported refinement run.
    config.model.gen_batch_stats = False
    config.model.disc_width = 0  # no discriminator (0 survives the defaults of load_config)
    model = load_release_weights(
        nets.make_generator(config.model, data.image_size, data.channels), generator)
    gen_config = registry.defaults('sngan')
    gen_config.name = f'{config.name}_generator'
    gen_config.data = ml_collections.ConfigDict(config.data.to_dict())
    gen_config.model = ml_collections.ConfigDict(config.model.to_dict())
    return config, gen_config, dict(generator=model)
  if gcfg.source == 'autoencoder':
    _require(decoder, 'decoder', 'a retrofit config')
    ae_config = registry.defaults('autoencoder')
    ae_config.name = f'{config.name}_autoencoder'
    ae_config.data = ml_collections.ConfigDict(config.data.to_dict())
    for key in ('gen_width', 'out_factor', 'init'):
      ae_config.model[key] = config.model[key]
    items = dict(decoder=load_release_weights(nets.make_decoder(ae_config), decoder))
    if encoder:
      ae_config.model.enc_width = config.model.gen_width
      items['encoder'] = load_release_weights(nets.make_encoder(ae_config), encoder)
    return config, ae_config, items
  raise ValueError(f'generator.source {gcfg.source!r}: only sngan and autoencoder generators '
                   'are imported; point generator.path at your own model instead')


def import_release(config, workdir, hat, generator=None, decoder=None, encoder=None,
                   generator_workdir=None, step=None):
  """Writes a workdir of `config` holding the release's networks; returns its path.

  Synthesis: --hat and --generator go into the workdir. Joint runs: the hat goes into the
  workdir, the generator (refinement) or decoder (retrofit) into `generator_workdir` (default
  <workdir>/generator), which the written config.generator.path names. The step recorded is
  `step` (default: the config's training.num_steps). Every network is loaded and checked before
  anything is written; each workdir is written beside its place and renamed into it complete, so
  an interrupted import leaves no partial workdir, and the same command finishes it.
  """
  _require(hat, 'hat', 'every import')
  step = int(config.training.num_steps if step is None else step)
  release: Optional[Release] = registry.for_config(config).hook('release')
  if release is None:
    raise ValueError(f'config.experiment {config.experiment!r}: the release publishes synthesis, '
                     'refinement and retrofit models only')
  request = _request(config, step, dict(hat=hat, generator=generator, decoder=decoder,
                                        encoder=encoder))
  if release == 'conditional':
    if not _imported(workdir, request):
      config, model = _conditional(config, hat, generator)
      staging = _staging(workdir)
      _write_workdir(staging, config, step, model.checkpoint_items(), request)
      _move_in(staging, workdir)
    return workdir
  generator_workdir = generator_workdir or os.path.join(workdir, 'generator')
  if os.path.abspath(generator_workdir) == os.path.abspath(workdir):
    raise ValueError(f'--generator_workdir={generator_workdir} is the --workdir: give the '
                     'generator its own directory')
  request['generator_workdir'] = os.path.abspath(generator_workdir)
  _joint(config, step, hat, request, workdir, generator, decoder, encoder, generator_workdir)
  return workdir


def import_command(config, workdir, hat, generator=None, decoder=None, encoder=None,
                   generator_workdir=None, step=None):
  """tf-hat-ebm-import-release: `import_release` of the flags' values, its workdir printed."""
  print('wrote ' + import_release(config, workdir, hat, generator, decoder, encoder,
                                  generator_workdir, step))


def _conditional(config, hat, generator):
  """(config, inference model) of a synthesis run holding the release's H and G."""
  _require(generator, 'generator', 'a synthesis config')
  model = registry.for_config(config).inference_model(config)
  load_release_weights(model.hat, hat)
  load_release_weights(model.generator, generator)
  return config, model


def _joint(config, step, hat, request, workdir, generator, decoder, encoder, generator_workdir):
  """Writes the release's H in `workdir` and its generator (refinement) or decoder (retrofit) in
  `generator_workdir`. When the latter lies inside the former both appear in one rename;
  otherwise the hat's workdir is moved in first, the generator's last (a rerun keeps either once
  complete)."""
  inside = os.path.relpath(os.path.abspath(generator_workdir), os.path.abspath(workdir))
  nested = not inside.startswith(os.pardir) and inside != os.curdir
  hat_done = _imported(workdir, request)
  gen_done = hat_done if nested else _imported(generator_workdir, request)
  if hat_done and gen_done:
    return
  config, gen_config, gen_items = _joint_generator(config, generator, decoder, encoder,
                                                   generator_workdir)
  data = config.data
  hat_model = load_release_weights(
      nets.make_hat(config.model, data.image_size, data.channels), hat)
  staging = None if hat_done else _staging(workdir)
  gen_staging = (os.path.join(staging, inside) if nested else
                 None if gen_done else _staging(generator_workdir))
  if gen_staging:
    _write_workdir(gen_staging, gen_config, step, gen_items, request)
  if staging:
    # The hat's model loads the generator from where it is now (staged or in place); its
    # config.json names where it will be.
    here = ml_collections.ConfigDict(config.to_dict())
    here.generator.path = os.path.abspath(gen_staging or generator_workdir)
    model = registry.for_config(config).inference_model(here)
    model.hat.set_weights(hat_model.get_weights())
    # The pin the load recorded (its checkpoint, the weights' fingerprint), as a training would.
    config.generator.checkpoint = here.generator.get('checkpoint')
    config.generator.fingerprint = here.generator.get('fingerprint', '')
    _write_workdir(staging, config, step, model.checkpoint_items(), request)
    _move_in(staging, workdir)
  if gen_staging and not nested:
    _move_in(gen_staging, generator_workdir)
