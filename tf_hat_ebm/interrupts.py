"""Ctrl-C and SIGTERM honoured within a fraction of a second while a compiled chain runs.

A chain is one TensorFlow call (a `tf.while_loop` of up to 10,000 steps): Python's signal
handlers run only when it returns, a minute later. `interruptible` runs such a call in a worker
thread while the main thread waits in Python, so the KeyboardInterrupt is raised at once and
the command unwinds as usual (its output's staging removed, its lock released, its one line);
the abandoned call ends with the process (`abandoned`: the error guard exits at once, as
TensorFlow's threads may still run the chain). The
compiled chain itself is unchanged: as fast as before, and the same samples. TensorFlow-free.
"""
import signal
import threading

POLL_SECONDS = 0.1
_ABANDONED = []


def _raise_interrupt(signum, frame):
  del signum, frame
  raise KeyboardInterrupt


class sigterm_as_interrupt:  # pylint: disable=invalid-name
  """Inside, SIGTERM is handled as Ctrl-C (a KeyboardInterrupt in the main thread), so a command
  killed politely cleans up as an interrupted one does."""

  def __enter__(self):
    self.previous = None
    if threading.current_thread() is threading.main_thread():
      self.previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    return self

  def __exit__(self, *exc):
    if self.previous is not None:
      signal.signal(signal.SIGTERM, self.previous)
    return False


def interruptible(fn, *args, **kwargs):
  """fn(*args, **kwargs), run in a worker thread while the main thread waits in Python: Ctrl-C
  or SIGTERM raise KeyboardInterrupt here within POLL_SECONDS (see the module)."""
  if threading.current_thread() is not threading.main_thread():
    return fn(*args, **kwargs)
  result = {}

  def work():
    try:
      result['value'] = fn(*args, **kwargs)
    except BaseException as e:  # pylint: disable=broad-except  (re-raised in the main thread)
      result['error'] = e

  thread = threading.Thread(target=work, name='interruptible', daemon=True)
  # The signals only flag the request; the KeyboardInterrupt is raised from this loop. Raised by
  # the handler, it could land in a destructor the main thread runs, be printed and be ignored.
  requested = []
  taken = [s for s in (signal.SIGINT, signal.SIGTERM)
           if s == signal.SIGTERM or signal.getsignal(s) is signal.default_int_handler]
  previous = {s: signal.signal(s, lambda signum, frame: requested.append(signum)) for s in taken}
  try:
    thread.start()
    while thread.is_alive():
      thread.join(POLL_SECONDS)
      if requested:
        _ABANDONED.append(thread)
        raise KeyboardInterrupt
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
  if 'error' in result:
    raise result['error']
  return result['value']


def interruptible_iter(iterable):
  """The items of `iterable`, each one drawn by `interruptible` (a generator of chain batches)."""
  iterator = iter(iterable)
  while True:
    try:
      item = interruptible(next, iterator)
    except StopIteration:
      return
    yield item


def abandoned():
  """Whether a call was interrupted: its work may still run, in its worker thread or in
  TensorFlow's own threads even once that thread returned, and would crash the interpreter's
  exit; the process must end now (os._exit)."""
  return bool(_ABANDONED)
