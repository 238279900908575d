"""The config schema and neutral defaults of each experiment kind; TensorFlow-free.

An experiment config (experiments/configs/*.py) is `registry.defaults(kind)` plus only its
differences; registry.py names each kind's defaults function here. The
defaults of every kind are the paper's CIFAR-10 32x32 run of that kind (appendix tables), so a
paper config is a handful of lines. A kind's config holds only the fields its task reads:
  synthesis    hat network and generator trained in tandem (Alg. 1): langevin, sampling, bank
  joint        hat network over a frozen generator (refinement, retrofit): generator, ddls
  sngan        the SN-GAN whose generator a refinement starts from (Mimicry's settings)
  autoencoder  the deterministic autoencoder whose decoder a retrofit starts from
"""
import importlib.util
import os

import ml_collections

from tf_hat_ebm import errors

# Fields that hold None by default need a float type, or overrides could not set them.
OPTIONAL_FLOATS = ('max_drift', 'prior_sigma', 'hat_clip_norm', 'gen_clip_norm', 'disc_clip_norm')


def _optional(cfg):
  for key in OPTIONAL_FLOATS:
    if key in cfg and cfg[key] is None:
      cfg[key] = ml_collections.FieldReference(None, field_type=float)
  return cfg


def chain_config(**fields):
  """One Langevin chain (langevin.ChainSettings): the conditional chain's fields and `fields`.

  Joint chains add latent_step_size, latent_first, use_residual and latent_sphere; the DDLS chain
  (joint configs' `ddls`) has only steps, step_size and noise.
  """
  cfg = ml_collections.ConfigDict(dict(
      steps=50, step_size=5e-4, temperature=1e-3, max_drift=None, prior_sigma=None, noise=True,
      init_scale=0.0))
  cfg.update(fields)
  return _optional(cfg)


def joint_chain_config(**fields):
  # latent_first: each iteration a Y step, then a Z step (paper), or Z first (the authors' release).
  # latent_sphere: Z0 and every Z step projected onto the sphere of radius sqrt(m), for a decoder
  # trained only on such latents (retrofit).
  return chain_config(**dict(dict(latent_step_size=5e-3, latent_first=False, use_residual=True,
                                  latent_sphere=False), **fields))


def _common(kind):
  config = ml_collections.ConfigDict()
  config.name = kind
  config.experiment = kind
  config.seed = 0

  config.data = data = ml_collections.ConfigDict()
  data.name = 'cifar10'
  data.image_size = 32
  data.channels = 3
  data.data_dir = ''            # tfds data_dir ('' = tfds default)
  data.download = False         # let tfds download and prepare the dataset
  data.manual_dir = ''          # imagenet2012: directory holding the manually downloaded tars
  data.train_split = 'train'
  data.test_split = 'test'
  data.cache = True
  data.shuffle_buffer = 10_000
  data.seed = 0
  # Your images (data.name 'folder:<path>' or 'array:<path>') without a split of their own: the
  # fraction held out for test, chosen by a permutation of this seed.
  data.test_fraction = 0.1
  data.split_seed = 0
  # FID, KID, precision/recall features for this data: a SavedModel or Keras model mapping images
  # (of the size its signature says, pixels in features_range) to vectors; '' = the built-in
  # choice (evaluate_fid.py --features overrides it).
  data.features = ''
  data.features_range = (0.0, 1.0)
  data.random_flip = False
  # Digits upscaling 8 -> 16 (bilinear; 'nearest' gives an exact pixel grid that an EBM learns and
  # no generator reproduces, docs/experiments.md).
  data.resize_method = 'bilinear'
  # imagenet2012 training crop: 'release' (shorter side to image_size, then a random square crop,
  # as the authors' release) or 'random_resized' (a random crop of crop_area_range, resized).
  data.crop = 'release'
  data.crop_area_range = (0.5, 1.0)
  # digits only: the labels the run trains and tests on (() = all), e.g. (0, 1, 2, 3, 4) for a
  # model whose OOD set `other_digits` holds the other labels (a semantic near-OOD split).
  data.classes = ()

  config.model = model = ml_collections.ConfigDict()
  # 'glorot': Keras' default initialisation, as the authors' release; 'mimicry': gain sqrt(2) on the
  # residual path's convolutions (Mimicry's SN-GAN).
  model.init = 'glorot'

  config.training = training = ml_collections.ConfigDict()
  training.batch_size = 128       # global batch
  training.num_steps = 75_000
  training.steps_per_loop = 10    # training steps per host call
  training.log_every = 50
  training.checkpoint_every = 1000
  training.keep_checkpoints = 3     # resume checkpoints: frequent, the last few kept
  training.archive_every = 10_000   # archived snapshots in checkpoints/archive/: rare, all kept
  training.sample_every = 1000
  # One grid early as well (0: none), so that a run shows its first samples in minutes.
  training.first_grid = 100
  training.num_grid_samples = 64
  # The PNG figures (sample grids, energy histograms, training curves) and their TensorBoard
  # images; False keeps numbers and checkpoints alone (sweeps of many short runs, the tests).
  training.figures = True
  # Save the input pipeline's position (and shuffle buffer) in checkpoints, for exact resume.
  # Costs shuffle_buffer images per checkpoint: off for ImageNet.
  training.checkpoint_data_iterator = True
  # On a non-finite loss or state: stop (default), or roll back to the last good checkpoint with
  # the learning rates multiplied by rollback_lr_factor, at most max_rollbacks times.
  training.rollback_on_divergence = False
  training.rollback_lr_factor = 0.5
  training.max_rollbacks = 3        # rollback r runs at rollback_lr_factor**r, with a fresh RNG
  # Runaway guard (tf_hat_ebm/guard.py): a finite divergence. action: 'auto' (rollback when
  # rollback_on_divergence, else stop), 'stop', 'rollback', 'warn' or 'off'. Healthy digits runs
  # keep |energy_diff| ~0.01-5; a config with larger energies sets its own band.
  training.guard = guard = ml_collections.ConfigDict()
  guard.action = 'auto'
  guard.max_abs_energy_diff = 100.0  # band on |energy_diff| (0: off)
  guard.growth_metrics = ('hat_grad_norm',)
  guard.growth_factor = 1e3          # x the median of the last `window` quiet steps (0: off)
  guard.window = 250                 # steps
  guard.warmup = 250                 # steps watched before the growth test starts
  # Trend: |m| doubling faster than every max_doubling steps (log-linear fit over trend_window
  # steps) while over min_rise x its early level (median of the first `early` steps; 0: off).
  guard.trend_window = 200           # steps
  guard.max_doubling = 100.0         # steps
  guard.min_rise = 10.0
  guard.early = 100                  # steps
  guard.patience = 3                 # suspicious chunks in a row before it fires

  config.optim = optim = ml_collections.ConfigDict()
  optim.beta1 = 0.9
  optim.beta2 = 0.999
  return config


def _perf(config):
  """Speed options of the Hat EBM tasks; defaults chosen with benchmarks/step_time.py."""
  config.perf = perf = ml_collections.ConfigDict()
  # auto: mixed_bfloat16 where bf16 is native (TPU, GPU of compute capability >= 8.0, CPU with
  # amx_bf16 / avx512_bf16), else float32 (tpu_utils/hardware.py); or float32 / mixed_bfloat16.
  # States, energies, losses and the bank stay float32 in every case.
  perf.precision = 'auto'
  # XLA for the whole training step: 'auto' (tf_hat_ebm/perf.py: only small networks on a GPU;
  # off on CPUs, where it was slower), 'on' or 'off'. It changes rounding, not the math.
  perf.jit_compile = 'auto'
  return config


def _network_optim(optim, net, lr, drops=True):
  """Adam settings of one network: rate, piecewise-constant drops, gradient clipping."""
  optim[f'{net}_lr'] = lr
  if drops:
    # <net>_lr up to the first boundary step, <net>_lr_values[i] after step
    # <net>_lr_boundaries[i] (Keras' PiecewiseConstantDecay; ImageNet drops both late).
    optim[f'{net}_lr_boundaries'] = ()
    optim[f'{net}_lr_values'] = ()
  optim[f'{net}_clip_norm'] = None
  # 'global': clip the global norm of the replica-summed gradient; 'per_variable_per_replica':
  # clip each variable's gradient on each replica before the sum (the authors' release, ImageNet).
  optim[f'{net}_clip_mode'] = 'global'
  _optional(optim)


def synthesis_defaults():
  """The paper's CIFAR-10 synthesis (appendix table); chains as the release's configs."""
  config = _common('synthesis')
  model = config.model
  model.hat_width = 256
  model.gen_width = 256
  model.z_dim = 128
  model.out_factor = 2.0        # G(z) = out_factor * tanh(.)
  # Training chain; `sampling` is the chain of evaluation samples (FID, export, sample.py): the
  # release's FID configs ran K=125 from Y0 ~ 0.01 N(0, I) without the drift clip.
  config.langevin = chain_config(steps=50, step_size=5e-4, temperature=1e-3, max_drift=2.5)
  config.sampling = chain_config(steps=125, step_size=5e-4, temperature=1e-3, init_scale=0.01)
  training = config.training
  training.data_eps = 1e-3
  training.bank_size = 10_000
  training.gen_loss_factor = 1000.0
  # 'bank' (historical, the paper), 'current' (ablation), 'cooperative' / 'cooperative_bn'
  # (cooperative learning without / with batch norm in the generator; tasks/synthesis.py)
  training.generator_update = 'bank'
  _network_optim(config.optim, 'hat', 1e-4)
  _network_optim(config.optim, 'gen', 1e-4)
  perf = _perf(config).perf
  perf.recompute_generator = False  # True: G(Z) inside every Langevin step (release's plain path)
  perf.jit_sampler = False        # XLA-compile the Langevin chain
  return config


def joint_defaults():
  """The paper's CIFAR-10 refinement of a pretrained SN-GAN (appendix table)."""
  config = _common('joint')
  model = config.model
  model.hat_width = 256
  # The frozen SN-GAN's networks, read for generator.source 'sngan' (must match its checkpoint;
  # disc_width 0: no discriminator); retrofit configs replace them by the decoder's (`retrofit`).
  model.gen_width = 256
  model.disc_width = 128
  model.z_dim = 128
  model.out_factor = 1.0        # the SN-GAN's tanh in [-1, 1]
  model.gen_batch_stats = True  # SN-GAN generators normalise with (moving) batch statistics
  # The frozen generator; any Keras model or SavedModel mapping latents to images will do:
  #   sngan        path = workdir of experiments/train_sngan.py (also gives D for DDLS)
  #   autoencoder  path = workdir of experiments/train_autoencoder.py (its decoder)
  #   savedmodel   path = a SavedModel directory (Keras, or tf.Module with __call__)
  #   factory      path = 'package.module:function'; function() returns a Keras model
  config.generator = gen = ml_collections.ConfigDict()
  gen.source = 'sngan'
  gen.path = ''
  gen.latent_shape = ()               # savedmodel / factory: e.g. (128,); () = its signature's
  gen.output_range = (-1.0, 1.0)      # savedmodel / factory only: mapped linearly to [-1, 1]
  # The pin, recorded at a run's first start (generators.load): the step of the sngan /
  # autoencoder checkpoint (None: the latest, then recorded) and a hash of G's weights.
  gen.checkpoint = ml_collections.FieldReference(None, field_type=int)
  gen.fingerprint = ''
  # The release's prior sigma 0.25 acts only in its sampling chain (the paper's table: both).
  config.langevin = joint_chain_config(steps=250, step_size=1e-4, latent_step_size=5e-3,
                                       temperature=1e-3, max_drift=2.5)
  config.sampling = joint_chain_config(steps=350, step_size=1e-4, latent_step_size=5e-3,
                                       temperature=1e-3, prior_sigma=0.25)
  # DDLS baseline (Che et al. 2020) of the comparison: eps 0.1 is their step 0.01 in
  # z <- z - (eps/2) grad + sqrt(eps) noise.
  config.ddls = ml_collections.ConfigDict(dict(steps=100, step_size=0.1, noise=True))
  config.training.num_steps = 20_000
  config.training.data_eps = 1e-3
  _network_optim(config.optim, 'hat', 1e-5)
  _perf(config)  # H, the frozen G and DDLS's D compute in it; SavedModel generators in their own
  return config


def sngan_defaults():
  """SN-GAN with Mimicry's CIFAR-10 settings (ndf 128, ngf 256, 100k G steps, batch 64)."""
  config = _common('sngan')
  model = config.model
  model.init = 'mimicry'        # Mimicry's SN-GAN: gain sqrt(2) on the residual path
  model.gen_width = 256
  model.disc_width = 128
  model.z_dim = 128
  model.out_factor = 1.0        # tanh in [-1, 1]
  # Mimicry's generator normalises with batch statistics in training; with the Hat EBM's fixed
  # statistics the adversarial updates killed every ReLU of the digits generator within 100 steps.
  model.gen_batch_stats = True
  training = config.training
  training.batch_size = 64
  training.num_steps = 100_000  # generator steps
  training.n_dis = 5            # discriminator steps per generator step
  training.checkpoint_every = 5000
  training.sample_every = 5000
  # Small-data GAN training (off in Mimicry's CIFAR-10 recipe): DiffAugment's policy on D's inputs
  # (augment.py; e.g. 'translation,cutout'), and the decay of an exponential moving average of G's
  # weights that sampling, refinement and DDLS then use (0: off, G as trained).
  training.diffaugment = ''
  training.gen_ema = 0.0
  optim = config.optim
  optim.beta1 = 0.0
  optim.beta2 = 0.9
  _network_optim(optim, 'gen', 2e-4, drops=False)
  _network_optim(optim, 'disc', 2e-4, drops=False)
  # Mimicry: both rates decay linearly to 0 over the run ('constant': the rates as they are).
  optim.lr_decay = 'linear'
  return config


def autoencoder_defaults():
  """The CIFAR-10 autoencoder of the retrofit: latent 16x16x1 on a sphere, 100 epochs."""
  config = _common('autoencoder')
  model = config.model
  model.enc_width = 256
  model.gen_width = 256         # decoder width
  model.out_factor = 2.0        # as the synthesis / retrofit generators
  training = config.training
  steps_per_epoch = 50_000 // 128  # 390 full batches
  training.num_steps = 100 * steps_per_epoch
  training.eval_every = steps_per_epoch    # train/test reconstruction error
  training.checkpoint_every = 10 * steps_per_epoch
  training.sample_every = 10 * steps_per_epoch
  training.eval_examples = 10_000  # of the train split, for the per-epoch train error
  # The decoder is trained on sphere(E(x) + latent_noise * N(0, I)) (the release: noise on the
  # latent, not on the image).
  training.latent_noise = 2e-2
  training.recon_factor = 1000.0
  config.optim.ae_lr = 1e-4
  return config


def digits(config, name, steps, batch_size=32, every=None):
  """The embedded digits (16x16x1) with a run sized for a 2-core CPU: `steps` steps of
  `batch_size`, a log line and checkpoint / grid every `every` steps (default steps / 4)."""
  config.name = name
  config.data.name = 'digits'
  config.data.image_size = 16
  config.data.channels = 1
  config.model.init = 'mimicry'   # the digits runs were tuned with Mimicry's initialisation
  t = config.training
  t.batch_size = batch_size
  t.num_steps = steps
  t.checkpoint_every = t.sample_every = every or steps // 4
  t.num_grid_samples = 100
  return config


# The SN-GAN's fields of a joint config, which a decoder has none of.
RETROFIT_LEFT_OUT = ('z_dim', 'disc_width', 'gen_batch_stats')

# Every digits run shrunk to seconds with its own networks: the tests' reproduction pipeline.
TINY = {'training.num_steps': 2, 'training.steps_per_loop': 1, 'training.log_every': 1,
        'training.checkpoint_every': 2, 'training.sample_every': 2, 'training.eval_every': 2,
        'training.bank_size': 64, 'training.n_dis': 1,
        'langevin.steps': 2, 'sampling.steps': 2, 'ddls.steps': 2}
SIZES = {'tiny': TINY}


def sized(config, size=None):
  """`config` at `size`, the argument of a config file's `get_config(size=None)` (as
  `--config=FILE.py:tiny`): None is the config itself, 'tiny' its run in seconds (SIZES). Only
  the fields the config has are set."""
  if size in (None, ''):
    return config
  if size not in SIZES:
    raise ValueError(f'config size {size!r}: known sizes are {", ".join(SIZES)} (or none)')
  for path, value in SIZES[size].items():
    section, name = field_parent(config, path)
    if section is not None:
      section[name] = value
  return config


def field_parent(config, path):
  """(the section holding the dotted field `path`, its last name), or (None, name) when the
  config has no such field."""
  *sections, name = path.split('.')
  section = config
  for key in sections:
    section = section.get(key) if key in section else None
    if section is None:
      return None, name
  return (section, name) if name in section else (None, name)


def retrofit(config, path):
  """A joint config over the decoder of the autoencoder run in `path` (retrofit)."""
  config.generator.update(source='autoencoder', path=path)
  config.model.out_factor = 2.0   # the decoder's
  for field in RETROFIT_LEFT_OUT:
    del config.model[field]
  return config


def left_out(config):
  """The dotted fields the dict `config` leaves out of its kind's defaults on purpose: never
  filled in when a config.json is read back (a resume would see them as a config change)."""
  generator = config.get('generator')
  if isinstance(generator, dict) and generator.get('source') == 'autoencoder':
    return tuple(f'model.{field}' for field in RETROFIT_LEFT_OUT)
  return ()


def configs_dir():
  """The shipped configs: tf_hat_ebm/configs in a wheel, experiments/configs in a checkout."""
  here = os.path.dirname(os.path.abspath(__file__))
  for path in (os.path.join(here, 'configs'),
               os.path.join(os.path.dirname(here), 'experiments', 'configs')):
    if os.path.isfile(os.path.join(path, 'digits_synth.py')):
      return path
  errors.fail('the shipped configs are not found beside the tf_hat_ebm package; reinstall it')


def load_file(path, *args):
  """get_config(*args) of the config file at `path` (config files load by path, as --config)."""
  spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-len('.py')], path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(*args)


def sibling(config_file, name, *args):
  """get_config(*args) of the config file `name`.py beside `config_file` (a config's __file__):
  a config that builds on another."""
  return load_file(os.path.join(os.path.dirname(os.path.abspath(config_file)), f'{name}.py'),
                   *args)
