r"""A screenshot of a run's TensorBoard by headless Chromium (for the docs; tests never need it).

  apt-get install chromium     # Debian; any Chrome or Chromium on PATH does
  python experiments/screenshot_tensorboard.py --logdir=workdir/digits_synth/tensorboard \
      --out=docs/tensorboard.png --overwrite

Starts TensorBoard on --port, waits until it answers, lets Chromium render --tab (filtered by
--tag_filter) for --wait_ms of virtual time, writes the PNG and stops TensorBoard.
"""
import os
import shutil
import subprocess
import sys
import time
import urllib.request

from absl import app
from absl import flags

flags.DEFINE_string('logdir', None, 'TensorBoard directory of a run.', required=True)
flags.DEFINE_string('out', 'docs/tensorboard.png', 'Output PNG.')
flags.DEFINE_integer('port', 6123, 'Port for the TensorBoard server.')
flags.DEFINE_string('tab', 'timeseries', 'TensorBoard tab (timeseries, scalars, hparams, ...).')
flags.DEFINE_string('tag_filter', '', 'Tag filter of the tab (e.g. energy/).')
flags.DEFINE_string('size', '1400,1400', 'Window size in pixels: width,height.')
flags.DEFINE_integer('wait_ms', 20000, 'Virtual time Chromium gives the page to render.')
flags.DEFINE_bool('overwrite', False, 'Replace an existing --out.')
FLAGS = flags.FLAGS


def browser():
  for name in ('chromium', 'chromium-browser', 'google-chrome'):
    if shutil.which(name):
      return shutil.which(name)
  raise ValueError('no chromium on PATH: apt-get install chromium')


def wait_for(url, seconds=120):
  deadline = time.time() + seconds
  while time.time() < deadline:
    try:
      with urllib.request.urlopen(url, timeout=5):
        return
    except OSError:
      time.sleep(1)
  raise ValueError(f'TensorBoard did not answer at {url} within {seconds} s')


def screenshot():
  if os.path.exists(FLAGS.out) and not FLAGS.overwrite:
    raise ValueError(f'{FLAGS.out} exists: pass --overwrite to replace it')
  if not os.path.isdir(FLAGS.logdir):
    raise ValueError(f'--logdir={FLAGS.logdir} is not a directory')
  chromium = browser()
  server = subprocess.Popen(
      [sys.executable, '-m', 'tensorboard.main', f'--logdir={FLAGS.logdir}',
       f'--port={FLAGS.port}', '--host=127.0.0.1'],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    base = f'http://127.0.0.1:{FLAGS.port}/'
    wait_for(base)
    url = f'{base}?darkMode=false&tagFilter={FLAGS.tag_filter}#{FLAGS.tab}'
    subprocess.run([chromium, '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars',
                    f'--window-size={FLAGS.size}', f'--virtual-time-budget={FLAGS.wait_ms}',
                    f'--screenshot={os.path.abspath(FLAGS.out)}', url],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
  finally:
    server.terminate()
    server.wait(timeout=30)
  print(f'wrote {FLAGS.out} ({FLAGS.tab}, tags {FLAGS.tag_filter!r})')


def main(argv):
  del argv
  try:
    screenshot()
  except (ValueError, subprocess.SubprocessError) as e:
    print(f'error: {e}', file=sys.stderr)
    sys.exit(1)


if __name__ == '__main__':
  app.run(main)
