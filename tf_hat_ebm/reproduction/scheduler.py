"""Runs a plan's ready stages (every stage of its `after` done) in `jobs` slots, a thread each.

Knows nothing of what a stage does: `work(stage, side_by_side)` runs one and returns its record
(None when stopped), `finished(i, stage, record, error)` takes it back in the main thread and
says whether the plan goes on (after a failure nothing new starts; the running ones finish).
"""
import queue
import threading


class Scheduler:
  """Starts each ready stage while fewer than `jobs` run; `done(name)`: a stage is finished."""

  def __init__(self, jobs, done, work, started, finished):
    self.jobs, self.done, self.work = jobs, done, work
    self.started, self.finished = started, finished
    self.running, self.failed = {}, False

  def ready(self, pending):
    return [(i, s) for i, s in pending if all(self.done(a) for a in s.after)]

  def run(self, pending):
    """Runs `pending` ([(index, stage)]) until none can start; leaves the ones that wait for a
    stage that failed in `pending`."""
    results = queue.Queue()
    while pending or self.running:
      starting = [] if self.failed else self.ready(pending)[:self.jobs - len(self.running)]
      side_by_side = len(self.running) + len(starting)
      for i, stage in starting:
        pending.remove((i, stage))
        self.started(i, stage)
        self.running[stage.name] = threading.Thread(
            target=self._work, args=(i, stage, results, side_by_side), daemon=True)
        self.running[stage.name].start()
      if not self.running:
        break  # the rest waits for a stage that failed
      i, stage, record, error = self._next(results)
      self.running.pop(stage.name).join()
      self.failed |= not self.finished(i, stage, record, error)

  def _work(self, i, stage, results, side_by_side):
    try:
      results.put((i, stage, self.work(stage, side_by_side), None))
    except Exception as e:  # pylint: disable=broad-except
      results.put((i, stage, None, e))  # raised again in the main thread

  @staticmethod
  def _next(results):
    while True:
      try:
        return results.get(timeout=0.2)  # short: signals reach the main thread
      except queue.Empty:
        continue

  def join(self):
    for thread in self.running.values():
      thread.join()
