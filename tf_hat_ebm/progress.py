"""Progress that reads in a terminal and in a file, and what a finished run tells its user.

On a terminal `Progress` redraws one bar line (carriage return); anywhere else (a file, nohup,
SLURM, a TPU VM's log) it prints one plain line per interval, as Keras' verbose=2 does: no
backspace or carriage return ever reaches the file. Each line carries the count, elapsed time,
ETA and the values given. (Keras' Progbar redraws with backspaces whenever the `posix` module is
loaded, a file or not.) TensorFlow-free.
"""
import os
import sys
import time

BAR_WIDTH = 24


def duration(seconds):
  """'45s', '3:07', '1:02:03'."""
  seconds = int(round(max(seconds, 0)))
  if seconds < 60:
    return f'{seconds}s'
  minutes, s = divmod(seconds, 60)
  hours, m = divmod(minutes, 60)
  return f'{hours}:{m:02d}:{s:02d}' if hours else f'{m}:{s:02d}'


def _number(value):
  return f'{value:.4g}' if isinstance(value, float) else str(value)


class Progress:
  """Progress of `total` units from `start` (a resumed run's step): a bar on a TTY, else a plain
  line every `every_fraction` of the total or `every_seconds`, whichever comes first, and at the
  first and last update.

    progress = Progress(600, unit='step')
    progress.update(100, {'energy_diff': 0.01})
  """

  def __init__(self, total, unit='step', start=0, stream=None, tty=None, every_fraction=0.1,
               every_seconds=60.0, clock=time.monotonic):
    self.total, self.unit, self.start = int(total), unit, int(start)
    self.stream = stream or sys.stdout
    self.tty = (hasattr(self.stream, 'isatty') and self.stream.isatty()) if tty is None else tty
    self.every_fraction, self.every_seconds, self.clock = every_fraction, every_seconds, clock
    self.t0 = clock()
    self._printed_at = self._printed_time = None
    self._width = 0

  def line(self, current, values=None, now=None):
    """'step 120/600 (20%), 0:24 elapsed, ETA 1:36: energy_diff 0.0123, gen_loss 0.312'."""
    now = self.clock() if now is None else now
    elapsed, done = now - self.t0, current - self.start
    if current >= self.total:
      eta = 'done'
    elif done > 0 and elapsed > 0:
      eta = 'ETA ' + duration((self.total - current) * elapsed / done)
    else:
      eta = 'ETA ?'
    percent = 100 * current // max(self.total, 1)
    text = (f'{self.unit} {current}/{self.total} ({percent}%), {duration(elapsed)} elapsed, '
            f'{eta}')
    values = dict(values or {})
    if values:
      text += ': ' + ', '.join(f'{k} {_number(v)}' for k, v in values.items())
    return text

  def update(self, current, values=None):
    """Shows `current` of the total with {name: value}."""
    now = self.clock()
    if self.tty:
      self._draw(current, values, now)
    elif self._due(current, now):
      self.stream.write(self.line(current, values, now) + '\n')
      self.stream.flush()
      self._printed_at, self._printed_time = current, now

  def finish(self, current, values=None):
    """Ends the progress at `current` (a source that ran out before the total): a last line."""
    if current >= self.total:
      return
    if self.tty:
      self.stream.write('\n')
    else:
      self.stream.write(self.line(current, values) + ' (ended)\n')
    self.stream.flush()

  def _due(self, current, now):
    if self._printed_at is None or current >= self.total:
      return True
    step = max(1, int(self.every_fraction * (self.total - self.start)))
    return (current - self._printed_at >= step
            or now - self._printed_time >= self.every_seconds)

  def _draw(self, current, values, now):
    filled = BAR_WIDTH * min(current, self.total) // max(self.total, 1)
    bar = '[' + '=' * filled + ('>' if filled < BAR_WIDTH else '') + '.' * (
        BAR_WIDTH - filled - 1) + '] '
    text = bar + self.line(current, values, now)
    pad = max(self._width - len(text), 0)
    self._width = len(text)
    self.stream.write('\r' + text + ' ' * pad + ('\n' if current >= self.total else ''))
    self.stream.flush()


def command(script):
  """How the user runs an experiment script: the console command when this process is one
  (tf-hat-ebm-*), else `python experiments/<script>.py`."""
  if os.path.basename(sys.argv[0] if sys.argv else '').startswith('tf-hat-ebm'):
    return 'tf-hat-ebm-' + script.replace('_', '-')
  return f'python experiments/{script}.py'


def run_outputs(workdir, written=(), hat_ebm=True, fid=True):
  """The lines a finished training run ends with: where its outputs are, what to run next.
  `written`: paths of the figures it wrote; hat_ebm: the run holds an energy to sample, export
  and score; fid: evaluate_fid.py has samplers for it."""
  figures = sorted(written)
  lines = [f'Outputs in {workdir}:',
           f'  checkpoints  {os.path.join(workdir, "checkpoints")}',
           f'  TensorBoard  {os.path.join(workdir, "tensorboard")}',
           f'  config       {os.path.join(workdir, "config.json")}']
  curves = [p for p in figures if os.path.basename(p) == 'training_curves.png']
  grids = [p for p in figures if p not in curves]
  if curves:
    lines.append(f'  curves       {curves[0]}')
  if grids:
    lines.append(f'  samples      {os.path.dirname(grids[-1])} (latest: '
                 f'{os.path.basename(grids[-1])})')
  lines += ['Next:', f'  tensorboard --logdir={workdir}']
  if fid:
    lines.append(f'  {command("evaluate_fid")} --workdir={workdir}')
  if hat_ebm:
    lines += [f'  {command("evaluate_ood")} --workdir={workdir}',
              f'  {command("sample")} --workdir={workdir}    # into '
              f'{os.path.join(workdir, "generated")}',
              f'  {command("export")} --workdir={workdir}    # a SavedModel in '
              f'{os.path.join(workdir, "saved_model")}']
  return '\n'.join(lines)


# ---- Output is a side channel -------------------------------------------------------------------
class SideChannel:
  """sys.stdout / sys.stderr that goes quiet when its reader leaves, instead of raising.

  A closed pipe (`... | head`), a closed descriptor (`1>&-`, some daemons and cron) or a closed
  file must never stop a run or cost it a checkpoint: the first failed write turns the stream off,
  and its descriptor is pointed at /dev/null so that Python's flush at exit, TensorFlow's C++ logs
  and later child processes write nowhere instead of failing.
  """

  def __init__(self, stream):
    self._stream = self._raw = stream  # _raw kept: its garbage collection would close the fd
    self.failed = stream is None

  def _off(self):
    stream, self._stream, self.failed = self._stream, None, True
    try:
      fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
      return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)

  def _call(self, name, *args):
    if self._stream is None:
      return None
    try:
      return getattr(self._stream, name)(*args)
    except (OSError, ValueError):  # EPIPE, EBADF, EIO; ValueError: I/O on a closed file
      self._off()
      return None

  def write(self, text):
    self._call('write', text)
    return len(text)

  def flush(self):
    self._call('flush')

  def isatty(self):
    return bool(self._call('isatty'))

  def __getattr__(self, name):  # encoding, fileno, buffer, ... of the stream while it is on
    if self._stream is None:
      raise AttributeError(f'{name} of a closed output')
    return getattr(self._stream, name)


def _open_standard_descriptors():
  """Descriptors 0-2 that were closed are opened on /dev/null: otherwise the next file opened
  (a checkpoint, a sample file) would take the number and receive whatever is printed."""
  for fd in (0, 1, 2):
    try:
      os.fstat(fd)
    except OSError:
      opened = os.open(os.devnull, os.O_RDWR)
      if opened != fd:
        os.dup2(opened, fd)
        os.close(opened)


def guard_output():
  """Makes sys.stdout and sys.stderr side channels (once per process; commands call it first)."""
  _open_standard_descriptors()
  for name in ('stdout', 'stderr'):
    # Only the process's own streams: a caller's replacement (a test's capture) is left as it is.
    if getattr(sys, name) is getattr(sys, f'__{name}__'):
      setattr(sys, name, SideChannel(getattr(sys, name)))
  # Log handlers made before (absl's, Python's) hold the raw streams: give them the guarded ones.
  import logging  # pylint: disable=g-import-not-at-top
  handlers = logging.getLogger().handlers + logging.getLogger('absl').handlers
  if 'absl.logging' in sys.modules:
    handlers.append(sys.modules['absl.logging'].get_absl_handler().python_handler)
  for handler in handlers:
    for raw, guarded in ((sys.__stdout__, sys.stdout), (sys.__stderr__, sys.stderr)):
      if raw is not None and getattr(handler, 'stream', None) is raw:
        handler.stream = guarded
