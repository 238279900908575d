"""SIGKILL at random moments always leaves an intact checkpoint; SIGTERM checkpoints and exits."""
import os
import signal
import sys

import pytest
import tensorflow as tf

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, 'benchmarks'))
import fault_drill  # noqa: E402  pylint: disable=g-import-not-at-top

# Checkpoint every 2 steps so that kills land during writes as well as between them.
TINY = ['--config.model.hat_width=8', '--config.model.gen_width=8', '--config.model.z_dim=4',
        '--config.langevin.steps=2', '--config.training.batch_size=4',
        '--config.training.bank_size=16', '--config.training.steps_per_loop=1',
        '--config.training.checkpoint_every=2', '--config.training.log_every=1',
        '--config.training.sample_every=1000', '--config.training.num_steps=100000']


# fault_drill runs the training script in a subprocess.
@pytest.mark.slow
@pytest.mark.long
def test_sigkill_at_random_moments_always_resumes_from_an_intact_checkpoint(tmp_path):
  records, failures = fault_drill.drill(str(tmp_path), 3, TINY, min_delay=0.0, max_delay=3.0,
                                        seed=1)
  assert failures == [] and len(records) == 3
  assert all(r['exit_code'] == -signal.SIGKILL for r in records)
  steps = [r['checkpoint'] for r in records]
  assert steps[-1] > 0 and steps == sorted(steps)  # progress is kept across kills
  assert all(r['steps_lost'] <= 2 + 1 for r in records)  # at most a checkpoint interval (+1 step)


@pytest.mark.slow
def test_sigterm_writes_a_checkpoint_at_the_current_step(tmp_path):
  # periodic checkpoints every 5 steps; SIGTERM lands some steps after the first one
  args = [a.replace('checkpoint_every=2', 'checkpoint_every=5') for a in TINY]
  out, code = fault_drill.run_until(str(tmp_path), args, 2, signal.SIGTERM)
  assert code == 0, out
  assert 'Stopped by SIGTERM at step' in out
  stopped = int(out.split('Stopped by SIGTERM at step')[1].split(';')[0])
  latest = tf.train.latest_checkpoint(str(tmp_path / 'checkpoints'))
  assert latest.endswith(f'ckpt-{stopped}') and stopped > 5
  assert fault_drill.checkpoint_step(str(tmp_path)) == stopped
