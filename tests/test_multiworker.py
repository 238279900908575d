"""Two worker processes on loopback train with MultiWorkerMirroredStrategy and checkpoint once."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import REPO

TINY = ['--config.model.hat_width=8', '--config.model.gen_width=8', '--config.model.z_dim=4',
        '--config.langevin.steps=2', '--config.training.batch_size=4',
        '--config.training.bank_size=16', '--config.training.steps_per_loop=2',
        '--config.training.checkpoint_every=2', '--config.training.log_every=2',
        '--config.training.sample_every=4', '--config.training.num_grid_samples=4']


def free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(('127.0.0.1', 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


def run_workers(workdir, steps):
  workers = [f'127.0.0.1:{p}' for p in free_ports(2)]
  procs = []
  for index in range(2):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', TF_CONFIG=json.dumps(
        {'cluster': {'worker': workers}, 'task': {'type': 'worker', 'index': index}}))
    procs.append(subprocess.Popen(
        [sys.executable, os.path.join(REPO, 'experiments', 'train_synthesis.py'),
         f'--workdir={workdir}', f'--config.training.num_steps={steps}', *TINY],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  outputs = [p.communicate(timeout=400)[0] for p in procs]
  return [p.returncode for p in procs], outputs


@pytest.mark.slow
@pytest.mark.long
def test_two_workers_train_and_write_one_consistent_checkpoint(tmp_path):
  codes, outputs = run_workers(tmp_path, 4)
  assert codes == [0, 0], outputs
  ckpt_dir = tmp_path / 'checkpoints'
  latest = tf.train.latest_checkpoint(str(ckpt_dir))
  assert latest is not None and latest.endswith('ckpt-4')
  assert not any(n.startswith('.tmp_worker') for n in os.listdir(ckpt_dir))  # non-chief cleaned
  names = dict(tf.train.list_variables(latest))
  assert tf.train.load_variable(latest, 'step/.ATTRIBUTES/VARIABLE_VALUE') == 4
  for name in names:
    if 'data_iterator' not in name:
      value = tf.train.load_variable(latest, name)
      if isinstance(value, np.ndarray) and value.dtype.kind == 'f':
        assert np.all(np.isfinite(value)), name
  # each worker keeps its own part of the bank, at the same step
  banks = []
  for worker in ('worker0', 'worker1'):
    local = tf.train.latest_checkpoint(str(ckpt_dir / 'local' / worker))
    assert local is not None and local.endswith('ckpt-4')
    banks.append(tf.train.load_variable(local, 'bank_z_replica0/.ATTRIBUTES/VARIABLE_VALUE'))
  assert banks[0].shape == (16 // 2, 4) and not np.array_equal(banks[0], banks[1])
  # only the chief writes summaries and samples
  assert len(os.listdir(tmp_path / 'tensorboard')) == 1
  assert os.path.exists(tmp_path / 'samples' / 'samples_0000004.png')
  # and both resume from it
  codes, outputs = run_workers(tmp_path, 6)
  assert codes == [0, 0], outputs
  assert tf.train.latest_checkpoint(str(ckpt_dir)).endswith('ckpt-6')
  assert all('Resumed from' in o for o in outputs[:1])
