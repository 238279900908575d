"""Output is a side channel: a closed or broken stdout/stderr never stops a run (progress.py)."""
import io
import os
import subprocess
import sys

import numpy as np
import pytest

from tf_hat_ebm import progress

from conftest import REPO

TRAIN = ['--config.model.hat_width=8', '--config.model.gen_width=8', '--config.model.z_dim=4',
         '--config.langevin.steps=2', '--config.training.batch_size=4',
         '--config.training.bank_size=16', '--config.training.steps_per_loop=1',
         '--config.training.checkpoint_every=2', '--config.training.log_every=1',
         '--config.training.sample_every=1000', '--config.training.num_steps=6',
         '--config.perf.precision=float32']


class Broken(io.StringIO):
  def write(self, text):
    raise BrokenPipeError(32, 'Broken pipe')


def test_a_broken_or_missing_stream_goes_quiet_and_progress_goes_on():
  for stream in (Broken(), None):
    channel = progress.SideChannel(stream)
    bar = progress.Progress(3, stream=channel, tty=False)
    for step in range(1, 4):
      bar.update(step)
    assert channel.write('more\n') == 5 and channel.failed
    channel.flush()


def test_a_closed_pipe_is_pointed_at_devnull_so_later_writes_succeed():
  read, write = os.pipe()
  os.close(read)
  channel = progress.SideChannel(os.fdopen(write, 'w'))
  channel.write('x' * 100_000)  # more than the buffer: written, EPIPE
  channel.flush()
  assert channel.failed
  assert os.write(write, b'C++ log line\n') == 13  # the descriptor now leads to /dev/null
  os.close(write)


def script(name, *args, shell_suffix=''):
  """experiments/<name> under bash (for a redirection such as 1>&-), stdout a pipe we hold."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO)
  command = ' '.join(['exec', '"$0"', '"$@"', shell_suffix])
  return subprocess.Popen(['bash', '-c', command, sys.executable,
                           os.path.join(REPO, 'experiments', name), *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_training_piped_into_head_finishes_and_checkpoints(tmp_path):
  proc = script('train_synthesis.py', f'--workdir={tmp_path}', *TRAIN)
  lines = [proc.stdout.readline(), proc.stdout.readline()]
  proc.stdout.close()  # `| head -n 2`: the reader is gone after two lines
  _, err = proc.communicate(timeout=600)
  assert all(lines) and proc.returncode == 0, err[-2000:]
  assert {'checkpoint', 'ckpt-6.index'} <= set(os.listdir(tmp_path / 'checkpoints'))
  assert 'BrokenPipe' not in err and 'Exception ignored' not in err, err[-2000:]


@pytest.mark.slow
def test_sample_with_stdout_closed_exits_0_with_its_output(trained_workdir, tmp_path):
  out = tmp_path / 'out'
  proc = script('sample.py', f'--workdir={trained_workdir}', f'--output={out}',
                '--num_samples=4', shell_suffix='1>&-')
  _, err = proc.communicate(timeout=600)
  assert proc.returncode == 0, err[-2000:]
  assert np.load(out / 'samples.npz')['images'].shape[0] == 4
  assert 'Traceback' not in err, err[-2000:]
