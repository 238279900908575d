"""Ready-made digits models shipped with the package, installed as workdirs by one command.

  tf-hat-ebm-pretrained --model=digits_synth --workdir=workdir/digits_synth
  python experiments/pretrained.py --model=digits_refine --workdir=workdir/digits_refine

tf_hat_ebm/models/ holds each model as the smallest workdir the commands load: its config.json and
one checkpoint of its networks alone (no optimizer slots, bank or input position: sample, export,
evaluate and a refinement over it read nothing else). models/manifest.json lists every file with
its sha256, checked before anything is written, and where the model came from (the command and
commit that trained it). A joint model's generator is installed in <workdir>/generator, the path
its config.json is given. `pack` makes a shipped model of a finished training workdir.

Installing is copying files: no TensorFlow (packing loads the networks, and imports it then).
"""
import hashlib
import json
import os
import shutil
import tempfile

from tf_hat_ebm import files

MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'models')
MANIFEST = 'manifest.json'
RECORD = 'pretrained.json'  # the manifest entry, kept in the installed workdir
GENERATOR_DIR = 'generator'  # a joint model's generator, inside its workdir
# config.json's generator.path as shipped: the install writes the generator's absolute path.
GENERATOR_PLACEHOLDER = '<installed generator workdir>'


def read_manifest(models_dir=MODELS_DIR):
  """{name: entry} of the shipped models (empty when none is shipped)."""
  path = os.path.join(models_dir, MANIFEST)
  if not os.path.exists(path):
    return {}
  with open(path) as f:
    return json.load(f)['models']


def names(models_dir=MODELS_DIR):
  return sorted(read_manifest(models_dir))


def entry(name, models_dir=MODELS_DIR):
  """The manifest entry of `name`; an unknown name is one line listing the shipped ones."""
  models = read_manifest(models_dir)
  if name not in models:
    raise ValueError(f'--model={name}: no such shipped model; shipped: '
                     f'{", ".join(sorted(models)) or "none"}')
  return models[name]


def dependencies(name, models_dir=MODELS_DIR):
  """[(name, relative workdir)] of `name` and the generators under it, outermost first."""
  chain, where = [], ''
  while name:
    chain.append((name, where))
    name = entry(name, models_dir).get('generator')
    where = os.path.join(where, GENERATOR_DIR) if name else where
  return chain


def verified_files(name, models_dir=MODELS_DIR):
  """{relative path: bytes} of a shipped model's files, each checked against its manifest sha256;
  a missing or changed file is one line naming it."""
  found = {}
  for rel, meta in entry(name, models_dir)['files'].items():
    path = os.path.join(models_dir, name, rel)
    if not os.path.isfile(path):
      raise FileNotFoundError(f'shipped model {name}: {path} is missing: reinstall tf_hat_ebm')
    with open(path, 'rb') as f:
      content = f.read()
    digest = hashlib.sha256(content).hexdigest()
    if digest != meta['sha256']:
      raise ValueError(f'shipped model {name}: {path} has sha256 {digest[:16]}, its manifest '
                       f'says {meta["sha256"][:16]} (corrupted): reinstall tf_hat_ebm')
    found[rel] = content
  return found


def checkpoint_state(step):
  """The checkpoints' state file naming ckpt-<step> (what tf.train.latest_checkpoint reads)."""
  return f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'


def _workdir_files(name, workdir, models_dir):
  """{absolute path: content} that installing `name` (and its generators) in `workdir` writes."""
  out = {}
  for model, where in dependencies(name, models_dir):
    target = os.path.abspath(os.path.join(workdir, where))
    meta = entry(model, models_dir)
    contents = verified_files(model, models_dir)
    if meta.get('generator'):
      config = json.loads(contents['config.json'])
      config['generator']['path'] = os.path.join(target, GENERATOR_DIR)
      contents['config.json'] = json.dumps(config, indent=2) + '\n'
    contents['checkpoints/checkpoint'] = checkpoint_state(meta['step'])
    contents[RECORD] = json.dumps(dict(name=model, **meta), indent=2) + '\n'
    out.update({os.path.join(target, *rel.split('/')): c for rel, c in contents.items()})
  return out


def install(name, workdir, overwrite=False, models_dir=MODELS_DIR):
  """Writes the shipped model `name` as a workdir at `workdir`; the paths written.

  A directory that is not empty is refused unless `overwrite`, which replaces the files the
  install writes and keeps every other one. Every file is checked before any is written, and all
  are written or none (files.write_all_atomic).
  """
  contents = _workdir_files(name, workdir, models_dir)
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise NotADirectoryError(f'--workdir={workdir} is a file, not a directory')
  if os.path.isdir(workdir) and os.listdir(workdir) and not overwrite:
    raise FileExistsError(f'--workdir={workdir} is not empty: install into a new directory, or '
                          'pass --overwrite to replace the files the install writes there (the '
                          'others are kept)')
  for path in contents:
    os.makedirs(os.path.dirname(path), exist_ok=True)
  try:
    files.write_all_atomic(contents)
  except OSError as e:
    raise PermissionError(files.cannot_write(e.filename or workdir, e)) from None
  return sorted(contents)


# What to run on an installed workdir, by kind (the console commands; experiments/<script> in a
# checkout).
NEXT = dict(
    synthesis=('sample --workdir={w}', 'evaluate-fid --workdir={w}',
               'export --workdir={w} --output=exported/{n}'),
    sngan=('evaluate-fid --workdir={w}',
           'train --config=digits_refine --config.generator.path={w} --workdir=workdir/my_refine'),
    autoencoder=('train --config=digits_retrofit --config.generator.path={w} '
                 '--workdir=workdir/my_retrofit',))
NEXT['joint'] = NEXT['synthesis'] + ('compare --workdir={w}',)


def install_command(model, workdir, overwrite=False):
  """tf-hat-ebm-pretrained: `install` of the flags' values, and what to run next."""
  meta = entry(model)
  install(model, workdir, overwrite)
  source = meta['source']
  print(f'Installed {model} ({meta["summary"]}, step {meta["step"]}) in {workdir}\n'
        f'  trained by: {source["command"]} (commit {source["commit"][:12]})\n  next:')
  for line in NEXT.get(meta['kind'], ()):
    print('    tf-hat-ebm-' + line.format(w=workdir, n=model))


# ---- packing a finished training workdir --------------------------------------------------------
def _networks(workdir, checkpoint):
  """(config, step, {name: network}) of the workdir's run restored from `checkpoint` (None: the
  latest): a Hat EBM's inference model, an SN-GAN's G and D, an autoencoder's decoder."""
  from tf_hat_ebm import checkpoints  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import config as config_lib  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import generators  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import workdir as workdir_lib  # pylint: disable=g-import-not-at-top
  kind = trained_run.load_config(workdir).experiment
  if kind in ('synthesis', 'joint'):
    run = trained_run.load_run(workdir, checkpoint=checkpoint)
    return run.config, run.step, run.model.checkpoint_items(), run.checkpoint
  defaults = dict(sngan=config_lib.sngan_defaults, autoencoder=config_lib.autoencoder_defaults)
  if kind not in defaults:
    raise ValueError(f'{workdir} holds a {kind!r} run: shipped models are synthesis, joint, '
                     'sngan and autoencoder runs')
  config = workdir_lib.load_config(workdir, lambda _: defaults[kind]())
  path = checkpoints.resolve_checkpoint(workdir, checkpoint)
  if kind == 'sngan':
    g, d = generators.load_sngan(workdir, config, path)
    items = dict(generator=g, **({'discriminator': d} if d is not None else {}))
  else:
    items = dict(decoder=generators.load_decoder(workdir, config, path))
  return config, generators.checkpoint_step(path), items, path


def check_copy(packed, source):
  """Fails unless every network variable of the checkpoint `packed` is in the checkpoint
  `source` with the same value: the packed networks are the trained ones, bit for bit."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  new, old = tf.train.load_checkpoint(packed), tf.train.load_checkpoint(source)
  keys = [k for k in new.get_variable_to_shape_map()
          if not k.startswith(('_CHECKPOINTABLE', 'step/', 'save_counter/'))]
  differ = [k for k in keys if not old.has_tensor(k)
            or not np.array_equal(new.get_tensor(k), old.get_tensor(k))]
  if differ or not keys:
    raise ValueError(f'{packed} differs from {source} in {differ[:3] or "all"}')
  return len(keys)


def pack(workdir, name, summary, source, models_dir=MODELS_DIR, checkpoint=None, generator=None):
  """Adds the run in `workdir` to the shipped models as `name`: its networks at `checkpoint`
  (default: the latest) in models_dir/<name>/, and its manifest entry. `source`: {'command',
  'commit'} that trained it; `generator`: the shipped model a joint run's generator is (packed
  first, at the checkpoint the run pinned). Returns the entry."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  config, step, items, path = _networks(workdir, checkpoint)
  with open(os.path.join(workdir, 'config.json')) as f:
    saved = json.load(f)
  if 'generator' in saved:
    if not generator:
      raise ValueError(f'{workdir} is a joint run: name its generator\'s shipped model')
    pinned, shipped = saved['generator'].get('checkpoint'), entry(generator, models_dir)['step']
    if pinned != shipped:
      raise ValueError(f'{workdir} was trained over ckpt-{pinned} of its generator; the shipped '
                       f'{generator} is ckpt-{shipped}')
    saved['generator']['path'] = GENERATOR_PLACEHOLDER
  target = os.path.join(models_dir, name)
  staging = tempfile.mkdtemp(prefix=f'.{name}.', dir=models_dir)
  try:
    with open(os.path.join(staging, 'config.json'), 'w') as f:
      f.write(json.dumps(saved, indent=2) + '\n')
    # As the trainer saves (save_counter included: a restore that checks its objects wants it);
    # the state file the manager writes beside it is the install's to write.
    ckpt = tf.train.Checkpoint(step=tf.Variable(step, dtype=tf.int64), **items)
    check_copy(tf.train.CheckpointManager(ckpt, os.path.join(staging, 'checkpoints'), 1).save(
        checkpoint_number=step), path)
    os.remove(os.path.join(staging, 'checkpoints', 'checkpoint'))
    rels = sorted(os.path.relpath(os.path.join(root, n), staging).replace(os.sep, '/')
                  for root, _, found in os.walk(staging) for n in found)
    meta = dict(summary=summary, kind=config.experiment, config=saved.get('name'), step=step,
                generator=generator, source=dict(source),
                files={r: dict(sha256=files.sha256(os.path.join(staging, r)),
                               bytes=os.path.getsize(os.path.join(staging, r))) for r in rels})
    if os.path.isdir(target):
      shutil.rmtree(target)  # the earlier packing of this name, replaced as a whole
    os.replace(staging, target)
  finally:
    if os.path.isdir(staging):
      shutil.rmtree(staging)
  models = read_manifest(models_dir)
  models[name] = meta
  files.write_atomic(os.path.join(models_dir, MANIFEST),
                     json.dumps(dict(models=dict(sorted(models.items()))), indent=2) + '\n')
  return meta
