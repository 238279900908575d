"""The configuration schema shared by every experiment; experiments/configs/ fills in the values.

Each experiment config starts from `base_config()` and sets the paper's settings for its run, so
every field exists (and is type-checked, and overrides are locked) whatever the experiment.
"""
import ml_collections


def langevin_config(**overrides):
  cfg = ml_collections.ConfigDict(dict(
      steps=50, step_size=5e-4, temperature=1e-3, max_drift=2.5, prior_sigma=None,
      noise=True, init_scale=0.0))
  # Optional fields hold None by default; give them a float type so overrides can set them.
  for key in ('max_drift', 'prior_sigma'):
    cfg[key] = ml_collections.FieldReference(cfg[key], field_type=float)
  cfg.update(overrides)
  return cfg


def base_config():
  config = ml_collections.ConfigDict()
  config.name = 'synthesis'
  config.experiment = 'synthesis'
  config.seed = 0

  config.data = data = ml_collections.ConfigDict()
  data.name = 'digits'
  data.image_size = 16
  data.channels = 1
  data.data_dir = ''            # tfds data_dir ('' = tfds default)
  data.download = False         # let tfds download and prepare the dataset
  data.manual_dir = ''          # imagenet2012: directory holding the manually downloaded tars
  data.train_split = 'train'
  data.test_split = 'test'
  data.cache = True
  data.shuffle_buffer = 10_000
  data.seed = 0
  data.random_flip = False
  # Digits upscaling 8 -> 16: bilinear. Nearest-neighbour 2x2 blocks are an exact pixel grid that
  # an EBM learns and no generator reproduces (see digits_synth.py); 'nearest' stays available.
  data.resize_method = 'bilinear'
  # imagenet2012 training crop: 'release' (shorter side to image_size, then a random square crop,
  # as the authors' release) or 'random_resized' (a random crop of crop_area_range, resized).
  data.crop = 'release'
  data.crop_area_range = (0.5, 1.0)

  config.model = model = ml_collections.ConfigDict()
  model.hat_width = 256
  model.gen_width = 256
  model.z_dim = 128
  model.out_factor = 2.0        # G(z) = out_factor * tanh(.)
  # 'glorot': Keras' default initialisation, as the authors' release; 'mimicry': gain sqrt(2) on the
  # residual path's convolutions (Mimicry's SN-GAN).
  model.init = 'glorot'

  # Langevin chain used in training (and, unless `sampling` says otherwise, for samples).
  config.langevin = langevin_config()
  # Chain for evaluation samples (FID, export); the release used K=125, T=1e-3, Y0 ~ 0.01 N(0, I).
  config.sampling = langevin_config(steps=125, temperature=1e-3, init_scale=0.01)

  config.training = training = ml_collections.ConfigDict()
  training.batch_size = 128       # global batch
  training.num_steps = 75_000
  training.steps_per_loop = 10    # training steps per host call
  training.log_every = 50
  training.checkpoint_every = 1000
  training.keep_checkpoints = 3     # resume checkpoints: frequent, the last few kept
  training.archive_every = 10_000   # archived snapshots in checkpoints/archive/: rare, all kept
  training.sample_every = 1000
  training.num_grid_samples = 64
  training.data_eps = 1e-3
  training.bank_size = 10_000
  training.gen_loss_factor = 1000.0
  training.generator_update = 'bank'  # 'bank' (historical, the paper) or 'current' (ablation)
  # Save the input pipeline's position (and shuffle buffer) in checkpoints, for exact resume.
  # Costs shuffle_buffer images per checkpoint: off for ImageNet.
  training.checkpoint_data_iterator = True
  # On a non-finite loss or state: stop (default), or roll back to the last good checkpoint with
  # both learning rates multiplied by rollback_lr_factor, at most max_rollbacks times.
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
  guard.patience = 3                 # suspicious chunks in a row before it fires

  config.optim = optim = ml_collections.ConfigDict()
  optim.hat_lr = 1e-4
  optim.gen_lr = 1e-4
  optim.beta1 = 0.9
  optim.beta2 = 0.999
  optim.hat_clip_norm = ml_collections.FieldReference(None, field_type=float)
  optim.gen_clip_norm = ml_collections.FieldReference(None, field_type=float)
  # 'global': clip the global norm of the replica-summed gradient; 'per_variable_per_replica':
  # clip each variable's gradient on each replica before the sum (the authors' release, ImageNet).
  optim.hat_clip_mode = 'global'
  optim.gen_clip_mode = 'global'
  # Piecewise-constant schedules: <net>_lr up to the first boundary step, <net>_lr_values[i] after
  # step <net>_lr_boundaries[i] (Keras' PiecewiseConstantDecay; ImageNet drops both late).
  optim.hat_lr_boundaries = ()
  optim.hat_lr_values = ()
  optim.gen_lr_boundaries = ()
  optim.gen_lr_values = ()
  optim.ema_decay = ml_collections.FieldReference(None, field_type=float)  # Keras use_ema

  # Speed options; defaults chosen by measurement with benchmarks/step_time.py.
  config.perf = perf = ml_collections.ConfigDict()
  # auto: mixed_bfloat16 where bf16 is native (TPU, GPU of compute capability >= 8.0, CPU with
  # amx_bf16 / avx512_bf16), else float32 (tpu_utils/hardware.py); or float32 / mixed_bfloat16.
  # States, energies, losses and the bank stay float32 in every case.
  perf.precision = 'auto'
  perf.recompute_generator = False  # True: G(Z) inside every Langevin step (release's plain path)
  perf.jit_sampler = False        # XLA-compile the Langevin chain
  return config
