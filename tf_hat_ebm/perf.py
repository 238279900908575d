"""How a training step is run, not what it computes: XLA for the whole step (`perf.jit_compile`).

'auto' decides by the platform and the network's size, from benchmarks/step_time.py (measured in
docs/speed.md, "XLA"): on the project's CPUs XLA:CPU's convolutions ran slower than oneDNN's at
the configs' batches, the compile took minutes for CIFAR-10's step, and mixed bfloat16 does not
compile; a TPU strategy compiles the step anyway. So 'auto' turns XLA on only on a single GPU and
for small networks (digits-sized), where it compiles in seconds.
"""
from tf_hat_ebm import validation

# 'auto' on a GPU: networks up to this size compile in seconds (digits: 16x16, hat width 32).
SMALL_IMAGE_SIZE, SMALL_HAT_WIDTH = 32, 64


def choose_jit_compile(setting, platform, precision, replicas, image_size, hat_width):
  """(XLA for the whole training step?, why) for perf.jit_compile `setting` on `platform`
  ('CPU', 'GPU' or 'TPU'), the run's Keras `precision` and number of replicas."""
  if setting not in validation.JIT_COMPILE_SETTINGS:
    raise ValueError(f'perf.jit_compile must be one of '
                     f'{", ".join(validation.JIT_COMPILE_SETTINGS)}, not {setting!r}')
  if setting == 'on':
    if platform == 'CPU' and precision != 'float32':
      raise ValueError(f'perf.jit_compile=on with {precision} does not compile on a CPU '
                       '(XLA:CPU rejects the mixed-precision ReLU gradient); set '
                       'perf.precision=float32 or perf.jit_compile=off')
    return True, 'set by perf.jit_compile'
  if setting == 'off':
    return False, 'set by perf.jit_compile'
  if platform == 'TPU':
    return False, 'auto: the TPU strategy compiles the step anyway'
  if replicas > 1:
    return False, f'auto: {replicas} replicas'
  if platform == 'CPU':
    return False, "auto: XLA:CPU's convolutions are slower than oneDNN's"
  if image_size > SMALL_IMAGE_SIZE or hat_width > SMALL_HAT_WIDTH:
    return False, 'auto: a large network (its compile takes minutes)'
  return True, 'auto: a small network on a GPU'


def jit_compile(config, platform, precision, replicas):
  """choose_jit_compile for a config; a config without perf.jit_compile (SN-GAN, autoencoder,
  older runs) runs its step without XLA."""
  setting = config.get('perf', {}).get('jit_compile')
  if setting is None:
    return False, 'no perf.jit_compile'
  return choose_jit_compile(setting, platform, precision, replicas, config.data.image_size,
                            config.model.get('hat_width', 0))
