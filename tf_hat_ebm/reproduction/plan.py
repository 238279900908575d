"""The reproduction's plan as typed values: a stage, its kind, its commands and its result.

A stage is data built once from the configs (stages.py): what a kind of stage does is a field of
its `StageKind`, what its record holds a `Result`, and each command an `Invocation` that renders
the argv a user runs in --out. The runner asks these types; it never compares a kind's name and
never reads a fact back out of an argv. TensorFlow-free.
"""
import dataclasses
import json
import os
import shlex
from typing import Dict, List, Optional, Tuple

from tf_hat_ebm import results as result_lib

# The commands the project's scripts run where no checkout's experiments/ is (a wheel).
CONSOLE = {'train.py': 'train', 'sample.py': 'sample', 'evaluate_fid.py': 'evaluate-fid',
           'evaluate_ood.py': 'evaluate-ood', 'compare_baselines.py': 'compare',
           'import_release.py': 'import-release', 'calibrate_fid.py': 'calibrate-fid'}
# The plateau rule's checkpoint's FID (plateau.py), beside fid.json.
PLATEAU_FID = 'fid_plateau.json'


@dataclasses.dataclass(frozen=True)
class Invocation:
  """One command: `python <script> [--config=] [--workdir=] <flags> [--checkpoint=] [--output=]
  [--seed=] [--nobaselines] [--overwrite]`, in that order, as a user runs it in --out.

  checkpoint: the step it scores or draws instead of its workdir's latest; `checkpoints` the
  directory under the workdir that holds it ('checkpoints', 'checkpoints/archive'), or None
  for a bare step (--checkpoint=N: the workdir's own checkpoint of that step).
  """
  script: str  # 'experiments/<script>.py', or '-c' (a test's inline program in `flags`)
  workdir: Optional[str] = None
  flags: Tuple[str, ...] = ()
  config: Optional[str] = None  # a config file (with its size), as given to --config
  checkpoint: Optional[int] = None
  checkpoints: Optional[str] = None
  output: Optional[str] = None  # the result file it writes instead of its workdir's
  seed: Optional[int] = None  # its sample sets' latents (a checkpoint's own: its planned step)
  baselines: bool = True  # False: --nobaselines (the Hat EBM's rows alone)
  overwrite: bool = False  # its own earlier output, of another step, written again

  def argv(self, config=None):
    """The argv as recorded (`config`: the config file's path to run instead, see executable)."""
    config = config or self.config
    return (['python', self.script] + ([f'--config={config}'] if config else [])
            + ([f'--workdir={self.workdir}'] if self.workdir else []) + list(self.flags)
            + ([f'--checkpoint={self.checkpoint_path() or self.checkpoint}']
               if self.checkpoint is not None else [])
            + ([f'--output={self.output}'] if self.output else [])
            + ([f'--seed={self.seed}'] if self.seed is not None else [])
            + ([] if self.baselines else ['--nobaselines'])
            + (['--overwrite'] if self.overwrite else []))

  def line(self):
    return shlex.join(self.argv())

  def checkpoint_path(self):
    """The checkpoint it scores (relative to --out), or None (its workdir's latest, or a step)."""
    if self.checkpoint is None or self.checkpoints is None:
      return None
    return f'{self.workdir}/{self.checkpoints}/ckpt-{self.checkpoint}'

  def at(self, step):
    """The same command at another checkpoint step (its latents' seed stays the planned one)."""
    return dataclasses.replace(self, checkpoint=step)

  def overwriting(self):
    return self if '--overwrite' in self.flags else dataclasses.replace(self, overwrite=True)

  def console(self):
    """The script's file name under experiments/ (or None: not a script of the project)."""
    prefix = 'experiments/'
    return self.script[len(prefix):] if self.script.startswith(prefix) else None


# ---- what a stage's record holds ---------------------------------------------------------------
def _read_json(path):
  with open(path) as f:
    try:
      return json.loads(f.read())
    except RecursionError:
      raise ValueError('nested too deeply to be read') from None


class Result:
  """What a stage's record holds and the files (relative to --out) it is read from."""
  name, typed, scored = 'none', False, False

  def files(self, stage, exists):
    del stage, exists
    return []

  def read(self, stage, path):
    del stage, path
    return {}


class FidResult(Result):
  """evaluate_fid.py's fid.json of its workdir (and the plateau rule's checkpoint's, beside it);
  a Hat EBM the guard stopped is scored again at its last healthy checkpoint."""
  name, typed, scored = 'fid', True, True

  def files(self, stage, exists):
    return [f'{stage.workdir}/fid.json'] + [o for o in stage.outputs if o == plateau_file(stage)]

  def read(self, stage, path):
    return result_lib.read(path(f'{stage.workdir}/fid.json')).to_json()


class CompareResult(Result):
  """compare_baselines.py's scores.json (its last output)."""
  name, typed = 'compare', True

  def files(self, stage, exists):
    return [stage.outputs[-1]]

  def read(self, stage, path):
    return result_lib.read(path(stage.outputs[-1])).to_json()


class JsonResult(Result):
  """A stage's whole JSON output (the calibration)."""
  name = 'json'

  def files(self, stage, exists):
    return [stage.outputs[-1]]

  def read(self, stage, path):
    return _read_json(path(stage.outputs[-1]))


class OodResult(Result):
  """AUROC per set of evaluate_ood.py's ood.json."""
  name = 'ood'

  def files(self, stage, exists):
    return [stage.outputs[-1]]

  def read(self, stage, path):
    return {k: v['auroc'] for k, v in _read_json(path(stage.outputs[-1]))['sets'].items()}


class WindowResult(Result):
  """{output: its result} of the plateau rule's end window (a stopped run's may be missing)."""
  name = 'window'

  def files(self, stage, exists):
    return [o for o in stage.outputs if exists(o)]

  def read(self, stage, path):
    return {o: result_lib.read(path(o)).to_json()
            for o in self.files(stage, lambda o: os.path.exists(path(o)))}


NONE, FID, COMPARE, JSON, OOD, WINDOW = (
    Result(), FidResult(), CompareResult(), JsonResult(), OodResult(), WindowResult())
RESULTS = {r.name: r for r in (NONE, FID, COMPARE, JSON, OOD, WINDOW)}


def plateau_file(stage):
  return f'{stage.workdir}/{PLATEAU_FID}'


# ---- what a kind of stage does -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class StageKind:
  """What the runner does with a stage of this kind (each a question it asks, never a name)."""
  name: str
  script: Optional[str] = None  # a training's experiments/ script: done at its configured step
  hat_ebm: bool = False  # a Hat EBM: a perf.precision, and the runaway guard watches it
  # Its plateau checkpoint's FID scores the baselines too (an SN-GAN's one row is its generator).
  plateau_baselines: bool = False
  on_config: bool = False  # its record rests on its workdir's config.json (a training, an import)
  # Its outputs count only when this very command and its inputs made them (progress.json): a
  # figure or calibration lying there from an earlier pipeline is drawn again.
  tracked: bool = False
  draws_scored: bool = False  # draws each model at the step its record scored (figures)
  slots: bool = False  # each command one kept checkpoint of a run (the end window)
  runs_last: bool = False  # after every other stage (its `after` is not worth printing)

  @property
  def trains(self):
    return self.script is not None

  def estimate(self, stage, seconds):
    """Estimated idle seconds of `stage` at the scale's ETA `seconds`."""
    if self.slots:
      return seconds['fid'] * len(stage.commands)
    train = seconds[self.name] * stage.length
    if not stage.result.scored:
      return train
    alone = not stage.commands[1].baselines  # no DDLS chain in its FID
    return (train + seconds.get('fid' if alone else f'fid_{self.name}', seconds['fid'])
            + seconds['fid'] * (len(stage.commands) - 2))  # the plateau checkpoint's FID


def _training(name, hat_ebm=True, plateau_baselines=False):
  return StageKind(name, script=f'experiments/train_{name}.py', hat_ebm=hat_ebm,
                   plateau_baselines=plateau_baselines, on_config=True)


KINDS = {k.name: k for k in (
    _training('synthesis'), _training('sngan', hat_ebm=False, plateau_baselines=True),
    _training('refinement'), _training('autoencoder', hat_ebm=False), _training('retrofit'),
    StageKind('release', on_config=True), StageKind('ood'), StageKind('window', slots=True),
    StageKind('figures', tracked=True, draws_scored=True, runs_last=True),
    StageKind('calibration', tracked=True))}
TRAINED = tuple(k for k, v in KINDS.items() if v.trains)


@dataclasses.dataclass
class Stage:
  """A named step: commands run in order in --out; its record goes to <name>/done.json.

  outputs[i] is the file (relative to --out) command i writes last, so a rerun skips it once it
  exists; None marks a training, done only when its workdir reached the configured step.
  `reference`: an ablation arm's reference stage (a guard stop counts only when it is healthy).
  """
  name: str
  kind: StageKind
  part: str
  commands: List[Invocation]
  outputs: List[Optional[str]]
  workdir: Optional[str] = None
  after: Tuple[str, ...] = ()
  result: Result = NONE
  reference: Optional[str] = None
  # A guard stop is recorded and its last healthy checkpoint scored (every scored Hat EBM, a
  # seed sweep's run), not an error.
  guard_stop_is_result: bool = False
  keep_going: bool = False  # a failed command does not stop the next (figures of failed runs)
  config: Optional[str] = None  # the training's config file (with its size), as in the command
  overrides: Dict[str, object] = dataclasses.field(default_factory=dict)
  label: Optional[str] = None  # how the report names the stage's model, where it differs
  # Files of other stages it reads (relative to --out): its record holds their hashes, and a
  # change of any of them makes the stage run again (the calibration's samples).
  inputs: List[str] = dataclasses.field(default_factory=list)
  # Its training's steps as a share of its config's (an arm the scale shortens): the ETA's.
  length: float = 1.0

  def command_lines(self):
    return [c.line() for c in self.commands]

  @property
  def argvs(self):
    return [c.argv() for c in self.commands]

  def result_files(self, exists):
    """The files (relative to --out) the record's numbers are read from."""
    return self.result.files(self, exists)

  def record_files(self, exists):
    """What the record rests on: its config.json, its result files, its inputs."""
    on_config = [f'{self.workdir}/config.json'] if self.workdir and self.kind.on_config else []
    return on_config + self.result_files(exists) + list(self.inputs)
