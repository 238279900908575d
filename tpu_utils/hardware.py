"""What the run computes on, and the precision `perf.precision='auto'` picks for it.

bfloat16 pays off only where the hardware computes it natively: TPUs, GPUs of compute capability
8.0 or higher (Ampere on), and CPUs with AMX-BF16 or AVX512-BF16 (oneDNN's bf16 kernels). Elsewhere
TensorFlow emulates it, many times slower than float32, so 'auto' picks float32 there.
The decision is a pure function of (platform, CPU flags, GPU compute capabilities), so it can be
tested on facts injected for any machine; `detect` reads them from this one.
"""
import platform as platform_lib

import tensorflow as tf

BF16 = 'mixed_bfloat16'
F32 = 'float32'
# /proc/cpuinfo flags of x86 CPUs whose bf16 matmuls and convolutions oneDNN runs natively.
NATIVE_BF16_CPU_FLAGS = ('amx_bf16', 'avx512_bf16')
MIN_BF16_COMPUTE_CAPABILITY = (8, 0)


def cpu_flags(cpuinfo_text):
  """Feature flags of the first CPU in a /proc/cpuinfo text ('flags' on x86, 'Features' on ARM)."""
  for line in cpuinfo_text.splitlines():
    key, sep, value = line.partition(':')
    if sep and key.strip() in ('flags', 'Features'):
      return frozenset(value.split())
  return frozenset()


def read_cpuinfo(path='/proc/cpuinfo'):
  """The text of /proc/cpuinfo; '' where there is none (macOS, Windows: no native-bf16 claim)."""
  try:
    with open(path) as f:
      return f.read()
  except OSError:
    return ''


def cpu_model(cpuinfo_text):
  for line in cpuinfo_text.splitlines():
    key, sep, value = line.partition(':')
    if sep and key.strip() == 'model name':
      return value.strip()
  return platform_lib.processor() or platform_lib.machine()


def compute_platform(strategy=None):
  """'TPU', 'GPU' or 'CPU': the device type the strategy's replicas run on."""
  if isinstance(strategy, tf.distribute.TPUStrategy):
    return 'TPU'
  try:
    devices = strategy.extended.worker_devices if strategy is not None else ()
  except RuntimeError:  # the default strategy names no devices: ops go to a GPU if there is one
    devices = ()
  if devices:
    return 'GPU' if any('GPU' in d.upper().rsplit('/', 1)[-1] for d in devices) else 'CPU'
  return 'GPU' if tf.config.list_physical_devices('GPU') else 'CPU'


def gpu_compute_capabilities():
  """(major, minor) of every visible GPU (GPUs that do not report one are left out)."""
  caps = []
  for gpu in tf.config.list_physical_devices('GPU'):
    cap = tf.config.experimental.get_device_details(gpu).get('compute_capability')
    if cap:
      caps.append(tuple(int(c) for c in cap))
  return tuple(caps)


def detect(strategy=None, cpuinfo_text=None):
  """The facts `choose_precision` decides on, read from this machine."""
  text = read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
  return dict(platform=compute_platform(strategy), cpu_flags=cpu_flags(text),
              gpu_capabilities=gpu_compute_capabilities())


# pylint: disable-next=redefined-outer-name
def choose_precision(platform, cpu_flags=(), gpu_capabilities=()):
  """(precision, reason) of 'auto' for a platform 'TPU' / 'GPU' / 'CPU' and its details."""
  if platform == 'TPU':
    return BF16, 'TPU (native bf16)'
  if platform == 'GPU':
    caps = ', '.join(f'{a}.{b}' for a, b in gpu_capabilities) or 'unknown'
    if gpu_capabilities and min(gpu_capabilities) >= MIN_BF16_COMPUTE_CAPABILITY:
      return BF16, f'GPU with native bf16 (compute capability {caps})'
    return F32, f'GPU without native bf16 (compute capability {caps}, below 8.0)'
  native = [f for f in NATIVE_BF16_CPU_FLAGS if f in cpu_flags]
  if native:
    return BF16, f'CPU with native bf16 ({", ".join(native)})'
  return F32, f'CPU without native bf16 (neither {" nor ".join(NATIVE_BF16_CPU_FLAGS)})'


def resolve_precision(precision, strategy=None, facts=None):
  """(Keras policy, reason): 'auto' decided by `choose_precision` on `facts` (default: detected)."""
  if precision != 'auto':
    return precision, 'set by perf.precision'
  chosen, reason = choose_precision(**(facts if facts is not None else detect(strategy)))
  return chosen, f'auto: {reason}'


def describe(strategy=None, cpuinfo_text=None):
  """What a run records of its hardware: the platform, the CPU and its bf16 flags, the GPUs."""
  text = read_cpuinfo() if cpuinfo_text is None else cpuinfo_text
  flags = cpu_flags(text)
  return dict(platform=compute_platform(strategy), cpu=cpu_model(text),
              cpu_bf16_flags=[f for f in NATIVE_BF16_CPU_FLAGS if f in flags],
              gpu_compute_capabilities=[f'{a}.{b}' for a, b in gpu_compute_capabilities()],
              tensorflow=tf.__version__)
