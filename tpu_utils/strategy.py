"""Resolves the tf.distribute strategy a run uses.

--tpu NAME|local -> TPUStrategy; several GPUs -> MirroredStrategy; otherwise the default strategy.
"""
import json
import os

import tensorflow as tf


def use_logical_cpus(num):
  """Splits the host CPU into `num` logical devices (tests of MirroredStrategy without GPUs).

  Must run before TensorFlow initialises its devices.
  """
  cpus = tf.config.list_physical_devices('CPU')
  tf.config.set_logical_device_configuration(
      cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num)])
  return [f'/cpu:{i}' for i in range(num)]


def multi_worker_cluster():
  """The TF_CONFIG cluster when it names more than one task, else None."""
  raw = os.environ.get('TF_CONFIG')
  if not raw:
    return None
  try:
    cluster = json.loads(raw).get('cluster', {})
  except ValueError as e:
    raise ValueError(f'TF_CONFIG is not valid JSON: {e}') from e
  return cluster if sum(len(v) for v in cluster.values()) > 1 else None


def tpu_strategy(tpu):
  """TPUStrategy over the TPU `tpu` (a name, or 'local' on a TPU VM); a TPU that cannot be
  reached is one ValueError saying what to check, not the resolver's network traceback."""
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
        tpu='' if tpu == 'local' else tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  except (OSError, ValueError, RuntimeError, tf.errors.OpError) as e:  # URLError is an OSError
    lines = str(getattr(e, 'reason', None) or e).strip().splitlines()
    reason = lines[0][:200] if lines else type(e).__name__
    raise ValueError(
        f'--tpu={tpu}: the TPU could not be reached ({reason}); '
        'check the TPU name and that it is up (gcloud compute tpus list), that this VM runs in '
        "the TPU's project and zone and can reach the GCE metadata server, or on a TPU VM use "
        '--tpu=local') from None
  return tf.distribute.TPUStrategy(resolver)


def make_strategy(tpu=None, devices=None):
  """The strategy for a run. `devices` forces a MirroredStrategy over those devices.

  --tpu -> TPUStrategy (pods included: each host feeds its own replicas through the input
  context); TF_CONFIG with several tasks -> MultiWorkerMirroredStrategy; several local GPUs ->
  MirroredStrategy; one GPU -> OneDeviceStrategy; else the default strategy.
  """
  if tpu:
    return tpu_strategy(tpu)
  if devices:
    return tf.distribute.MirroredStrategy(devices)
  if multi_worker_cluster():
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices('GPU')
  if len(gpus) > 1:
    return tf.distribute.MirroredStrategy()
  if len(gpus) == 1:
    return tf.distribute.OneDeviceStrategy('/gpu:0')
  return tf.distribute.get_strategy()


def check_batch_split(global_batch_size, strategy):
  replicas = strategy.num_replicas_in_sync
  if not isinstance(global_batch_size, int) or global_batch_size < 1:
    raise ValueError(f'training.batch_size must be an integer >= 1; got {global_batch_size!r}')
  if global_batch_size % replicas:
    raise ValueError(f'global batch {global_batch_size} cannot be split evenly over {replicas} '
                     'replicas')
  return global_batch_size // replicas


def worker_info(strategy):
  """(number of workers, this worker's index, is chief) of a strategy; (1, 0, True) if local."""
  resolver = getattr(strategy, 'cluster_resolver', None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None:
    return 1, 0, True
  spec = resolver.cluster_spec().as_dict()
  workers, chiefs = len(spec.get('worker', [])), len(spec.get('chief', []))
  if workers + chiefs <= 1:
    return 1, 0, True
  task_type, task_id = resolver.task_type, int(resolver.task_id or 0)
  is_chief = task_type == 'chief' or (task_type == 'worker' and task_id == 0 and not chiefs)
  index = task_id + (chiefs if task_type == 'worker' else 0)
  return workers + chiefs, index, is_chief
