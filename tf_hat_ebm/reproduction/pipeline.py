"""The reproduction in one call: check the options, claim --out, run the stages, write the report.

--out belongs to reproduce.py once it holds its marker (.reproduce.json, listing the entries it
writes). A non-empty directory without one is refused unless --overwrite, and even then an entry
of the name of one of reproduce.py's own that it did not write is refused, never replaced.
"""
import math
import os
import re
import shutil
import tempfile

from tf_hat_ebm import config as config_lib
from tf_hat_ebm import interrupts
from tf_hat_ebm import outputs
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.errors import one_line
from tf_hat_ebm.reproduction import plan
from tf_hat_ebm.reproduction import records as records_lib
from tf_hat_ebm.reproduction import report as report_lib
from tf_hat_ebm.reproduction import runner as runner_lib
from tf_hat_ebm.reproduction import stages as stages_lib

MARKER = '.reproduce.json'
LOCK = 'reproduce.lock'
FIGURES_MANIFEST = '.figures.json'  # what reproduce.py wrote into figures/, by content
# reproduce.py's own entries in --out besides the stages' directories.
OWN = (MARKER, LOCK, 'report.md', 'report.json', 'figures', 'samples', 'tensorboard',
       'feature_cache', 'release_refinement', FIGURES_MANIFEST)


PATH_FLAGS = ('data_dir', 'inception_path', 'release_sngan')  # made absolute (check_options)


def check_options(o):
  """One-line errors for options that cannot run; --out and the path flags made absolute."""
  if o.scale not in stages_lib.SCALES:
    raise ValueError(f'--scale={o.scale}: known scales are {", ".join(stages_lib.SCALES)}')
  if not o.seeds or min(o.seeds) < 0:
    raise ValueError('--seeds needs at least one seed >= 0')
  repeated = sorted({s for s in o.seeds if list(o.seeds).count(s) > 1})
  if repeated:
    raise ValueError(f'--seeds repeats {", ".join(map(str, repeated))}: each seed once')
  unknown = sorted(set(o.parts) - set(stages_lib.PARTS))
  if unknown or not o.parts:
    raise ValueError(f'--parts: unknown {", ".join(unknown) or "(none given)"}; known: '
                     f'{", ".join(stages_lib.PARTS)}')
  if o.size and o.size not in config_lib.SIZES:
    raise ValueError(f'--size={o.size}: known sizes are {", ".join(config_lib.SIZES)}')
  if not o.out or not o.out.strip():
    raise ValueError('--out is empty: give a directory (or leave the flag out for '
                     f'reproduce/{o.scale})')
  if '://' in o.out:
    # Locks, logs and records are local files, and subprocess logs need a real file handle.
    raise ValueError(f'--out must be a local directory (it holds the stages\' logs, locks and '
                     f'records), not {o.out}')
  runner_lib.resolve_jobs(o.jobs, o.scale)
  o.out = os.path.abspath(o.out)
  # The stages run in --out: a path given on the command line means one from here.
  for flag in PATH_FLAGS:
    value = getattr(o, flag)
    if value and '://' not in value:
      setattr(o, flag, os.path.abspath(os.path.expanduser(value)))
  return o


def own_entries(stages):
  return sorted(set(OWN) | {s.name for s in stages}
                | {s.workdir.split('/')[0] for s in stages if s.workdir})


def read_marker(out):
  path = os.path.join(out, MARKER)
  if not os.path.lexists(path):
    return None
  try:
    with open(path) as f:
      marker = workdir_lib.parse_json(f.read())
    return list(marker['entries'])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ValueError(f'{path} is not reproduce.py\'s marker ({one_line(e)}): this --out was '
                     'not made by reproduce.py as it stands; choose another --out') from None


def claim(out, entries, overwrite):
  """Checks that reproduce.py may write `entries` in `out`; the entries it owns there."""
  outputs.refuse_dangling_link(out, 'out')
  if os.path.lexists(out) and not os.path.isdir(out):
    raise ValueError(f'--out={out} is a file; give a directory')
  if outputs.in_checkpoints(out):  # resolved through links, as every command's output
    raise ValueError(f'--out={out} lies in the training checkpoints {outputs.in_checkpoints(out)}:'
                     ' give a directory of its own')
  present = sorted(os.listdir(out)) if os.path.isdir(out) else []
  mine = read_marker(out)
  if mine is None and present and not overwrite:
    shown = ', '.join(present[:3]) + (', ...' if len(present) > 3 else '')
    raise ValueError(f'--out={out} is not empty ({shown}) and was not made by reproduce.py: '
                     'choose a new directory, or pass --overwrite to write beside what is there '
                     '(only reproduce.py\'s own files are ever written)')
  foreign = sorted(set(present) & set(entries) - set(mine or ()) - {MARKER})
  if foreign:
    raise ValueError(f'{os.path.join(out, foreign[0])} exists and was not written by '
                     'reproduce.py: move it away, or choose another --out')
  return sorted(set(mine or ()) | set(entries))


def mark(out, entries):
  try:
    os.makedirs(out, exist_ok=True)
  except OSError as e:
    raise PermissionError(f'cannot create --out={out}: {e.strerror}') from None
  runner_lib.write_json(os.path.join(out, MARKER), dict(tool='reproduce.py', entries=entries))


def dry_run(stages, options, print_fn=print):
  """Prints each stage's commands and the resolved config of its training; writes nothing."""
  for i, stage in enumerate(stages):
    after = f' (after {", ".join(stage.after)})' if stage.after and not stage.kind.runs_last else ''
    print_fn(f'# [{i + 1}/{len(stages)}] {stage.name}{after}')
    for line in stage.command_lines():
      print_fn(line)
    if stage.config:
      config = stages_lib.resolved_config(stage)
      if options.data_dir and not stage.config.startswith('experiments/configs/digits'):
        config.data.data_dir = options.data_dir
      print_fn(f'# config: {config.to_json_best_effort(sort_keys=True)}')


def sample_figures(out, stages):
  """[(source, name)] of the figures stage's first sample grid and Langevin path per model, and
  its baselines side by side (compare_baselines.py: each method's grid from the same Z0); only
  of the directories the figures stage of `stages` writes."""
  source, pairs = os.path.join(out, 'samples'), []
  ours = {os.path.basename(os.path.dirname(o)) for st in stages if st.kind.draws_scored
          for o in st.outputs if o}
  for model in sorted(set(os.listdir(source)) & ours) if os.path.isdir(source) else []:
    for name in sorted(os.listdir(os.path.join(source, model))):
      if name in ('langevin_path.png', 'samples_grid_000.png') or (
          model.endswith('_baselines') and name == 'side_by_side.png'):
        pairs.append((os.path.join(source, model, name), f'{model}_{name}'))
  return pairs


def stage_figures(out, stages):
  """[(source, name)] of each training's curves and each OOD stage's energy histograms."""
  pairs = []
  for stage in stages:
    if stage.kind.trains and stage.workdir:
      pairs.append((os.path.join(out, stage.workdir, 'training_curves.png'),
                    f'{stage.name}_training_curves.png'))
    if stage.result is plan.OOD:
      pairs.append((os.path.join(out, os.path.dirname(stage.outputs[-1]), 'ood_energies.png'),
                    f'{stage.name}_ood_energies.png'))
  return pairs


TRAINING_GRID = re.compile(r'^samples_(\d+)\.png$')  # summaries.py's fixed-seed training grids
# The paper's four arms: cooperative learning without batch norm is the 'current' update (one run).
HISTORICAL_ARMS = (('historical bank (the paper)', 'synthesis'),
                   ('current samples = cooperative, no batch norm', 'current'),
                   ('cooperative, batch-norm generator', 'coop_bn'))


def historical_figure(out, seed, path):
  """The generator-update arms' training grids (the paper's four arms in three runs) side by side
  at HISTORICAL_STEP (else the last step all reached); the figure's metadata, or None without
  their runs."""
  dirs = [os.path.join(out, f'{arm}_s{seed}', 'samples') for _, arm in HISTORICAL_ARMS]
  if not all(os.path.isdir(d) for d in dirs):
    return None
  steps = set.intersection(*[{int(m.group(1)) for m in map(TRAINING_GRID.match, os.listdir(d))
                              if m} for d in dirs])
  if not steps:
    return None
  step = stages_lib.HISTORICAL_STEP if stages_lib.HISTORICAL_STEP in steps else max(steps)
  from tf_hat_ebm import figures  # pylint: disable=g-import-not-at-top
  panels = [(label, os.path.join(d, f'samples_{step:07d}.png'))
            for (label, _), d in zip(HISTORICAL_ARMS, dirs)]
  return figures.montage(panels, f'The generator update: fixed-seed training samples X = G(Z) + '
                         f'Y of each arm at step {step} (seed {seed})', path)


def check_figures_dir(out):
  """figures/ must be a directory of reproduce.py's own: a link (to a user's directory) would
  carry the report's copies into it, over the user's files of the same names."""
  target = os.path.join(out, 'figures')
  if os.path.islink(target) or (os.path.lexists(target) and not os.path.isdir(target)):
    raise ValueError(f'{target} is {"a symbolic link" if os.path.islink(target) else "a file"}: '
                     'reproduce.py writes its figures only into a directory of its own; move it '
                     'away (a link\'s target is kept) and rerun')
  return target


def _read_figures_manifest(out):
  """{name: identity} of the figures the manifest lists, and why it is unreadable (or None)."""
  path = os.path.join(out, FIGURES_MANIFEST)
  if not os.path.lexists(path):
    return {}, None
  try:
    with open(path) as f:
      files = workdir_lib.parse_json(f.read())['files']
    return {str(k): v for k, v in files.items() if '/' not in str(k)}, None
  except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
    # Nothing there is known to be reproduce.py's; the error that follows says why.
    return {}, f'{path}, the list of its figures, is unreadable ({one_line(e)})'


def figure_identity(path):
  """What a figure is, for the manifest: its content's sha256, which a copy (`cp -a`, rsync,
  tar, a backup's restore, a move across filesystems) keeps and an inode does not. A link or a
  directory is never one of reproduce.py's figures: it keeps its lstat, which no file matches."""
  if os.path.islink(path) or not os.path.isfile(path):
    return outputs.stat_of(path)
  return ['sha256', runner_lib.file_sha256(path)]


def own_figures(target, written):
  """The listed figures still as reproduce.py wrote them (by content; a manifest of an earlier
  version recorded lstat, still honoured where it matches)."""
  return {n for n, recorded in written.items()
          if recorded in (figure_identity(os.path.join(target, n)),
                          outputs.stat_of(os.path.join(target, n)))}


def collect_figures(out, stages, seed):
  """Copies the report's figures into out/figures/ (and draws the historical-update montage);
  their names. figures/ holds reproduce.py's files beside any of the user's: it replaces or
  removes only the files its manifest (.figures.json) lists that are still as it wrote them, and
  a user's file of the name of one of its figures is an error, never replaced. A figure an
  earlier report left there that this one does not have (a stage no longer in the pipeline) is
  removed, so the report shows only its own stages' figures."""
  target = check_figures_dir(out)
  os.makedirs(target, exist_ok=True)
  for name in os.listdir(out):  # a killed run's (this one holds reproduce.lock)
    if name.startswith('.figures-staging-'):
      outputs.remove(os.path.join(out, name))
      print(f'Removed {os.path.join(out, name)}, left by a killed reproduce.py.', flush=True)
  staging = tempfile.mkdtemp(prefix='.figures-staging-', dir=out)
  try:
    for source, name in sample_figures(out, stages) + stage_figures(out, stages):
      if os.path.exists(source):
        shutil.copyfile(source, os.path.join(staging, name))
    historical_figure(out, seed, os.path.join(staging, 'historical_generator_update.png'))
    names = sorted(n for n in os.listdir(staging) if n.endswith('.png'))
    written, unreadable = _read_figures_manifest(out)
    mine = own_figures(target, written)
    for name in names:
      if os.path.lexists(os.path.join(target, name)) and name not in mine:
        if unreadable:
          raise ValueError(f'{unreadable}: no file in {target} is known to be reproduce.py\'s; '
                           'move that directory away, delete the list and rerun; the stages are '
                           'done')
        raise ValueError(f'{os.path.join(target, name)} was not written by reproduce.py (or was '
                         'changed since): move it away and rerun; the stages are done')
    for name in names:  # renamed in: a new file, never written through the old one
      os.replace(os.path.join(staging, name), os.path.join(target, name))
    for name in sorted(mine - set(names)):
      os.remove(os.path.join(target, name))
    if names or written:
      runner_lib.write_json(os.path.join(out, FIGURES_MANIFEST), dict(files={
          n: figure_identity(os.path.join(target, n)) for n in names}))
  finally:
    shutil.rmtree(staging, ignore_errors=True)
  return names


def run_configs(stages, seed):
  """{config name: resolved config} of the first seed's trainings (not the ablation arms)."""
  configs = {}
  for stage in stages:
    if stage.config and stage.reference is None and stage.name.endswith(f'_s{seed}'):
      name = os.path.basename(stage.config.partition(':')[0])[:-len('.py')]
      configs.setdefault(name, stages_lib.resolved_config(stage))
  return configs


def read_previous_reports(paths):
  """The earlier report.json files --previous_reports names, as dicts; a one-line error for a
  missing or garbled one."""
  out = []
  for path in paths:
    try:
      with open(path) as f:
        data = workdir_lib.parse_json(f.read())
      data['checks']  # pylint: disable=pointless-statement
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise ValueError(f'--previous_reports: {path} is not a readable report.json '
                       f'({one_line(e)})') from None
    out.append(dict(data, path=path))
  return out


def non_finite(value, where=''):
  """The dotted path of the first NaN or Inf in a JSON value (a record edited by hand), or None."""
  if isinstance(value, float) and not math.isfinite(value):
    return where
  items = value.items() if isinstance(value, dict) else (
      enumerate(value) if isinstance(value, list) else ())
  for key, item in items:
    found = non_finite(item, f'{where}.{key}' if where else str(key))
    if found:
      return found
  return None


def write_report(records, options, stages):
  """report.md, report.json, figures/ and the markdown in TensorBoard's text tab: all or none."""
  out, seed = options.out, options.seeds[0]
  by_name = {s.name: s for s in stages}
  for name, record in sorted(records.items()):
    field = non_finite(record, '')
    if field and field.split('.')[0] in records_lib.NUMBERS and name in by_name:
      # Its numbers are its result files' (written without NaN by the scripts): one was not.
      files = by_name[name].result_files(lambda f: os.path.exists(os.path.join(out, f)))
      raise ValueError(f'stage {name}: field {field} of its result '
                       f'({", ".join(os.path.join(out, f) for f in files)}) is not a finite '
                       'number; delete that file to evaluate the stage again (no report written)')
    if field:  # a record is written without NaN (result_files.write_json): this one was edited
      raise ValueError(f'{os.path.join(out, name, "done.json")}: field {field} is not a finite '
                       f'number; delete that file to evaluate stage {name} again (no report '
                       'written)')
  markdown, data = report_lib.build_report(records, options, collect_figures(out, stages, seed),
                                           run_configs(stages, seed),
                                           read_previous_reports(options.previous_reports))
  field = non_finite(data)
  if field:
    raise ValueError(f'the report\'s field {field} is not a finite number: report.md and '
                     'report.json not written')
  runner_lib.write_text(os.path.join(out, 'report.md'), markdown)
  runner_lib.write_json(os.path.join(out, 'report.json'), data)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  writer = tf.summary.create_file_writer(os.path.join(out, 'tensorboard'))
  with writer.as_default():
    tf.summary.text('report', markdown, step=0)
  writer.close()
  return markdown, data


def reproduce(options, run_command=None, print_fn=print):
  """Runs (or with dry_run prints) every stage of `options` and writes the report; the records.

  Errors are one-line ValueErrors / PermissionErrors (errors.main_guard: exit 1); Ctrl-C and
  SIGTERM stop the running stages' children and leave a state the same command resumes.
  """
  check_options(options)
  read_previous_reports(options.previous_reports)  # before any stage runs
  stages = stages_lib.build(options)
  if options.dry_run:
    dry_run(stages, options, print_fn)
    return {}
  entries = claim(options.out, own_entries(stages), options.overwrite)
  check_figures_dir(options.out)  # before any stage runs, not after hours
  with interrupts.sigterm_as_interrupt():  # SIGTERM at any moment: as Ctrl-C, the lock released
    mark(options.out, entries)
    with workdir_lib.WorkdirLock(options.out, log=print_fn, name=LOCK,
                                 what='another reproduce.py'):
      records = runner_lib.Runner(stages, options, run_command, print_fn).run_all()
      markdown, _ = write_report(records, options, stages)
  print_fn(markdown)
  print_fn(f'\nreport: {os.path.join(options.out, "report.md")} (and report.json, figures/, '
           f'TensorBoard text in {os.path.join(options.out, "tensorboard")})')
  return records


def reproduce_command(scale='digits', seeds=None, out=None, parts=stages_lib.PARTS, size=None,
                      tpu=None, data_dir=None, inception_path=None, precision=None,
                      release_sngan=None, jobs='auto', dry_run=False, overwrite=False,
                      previous_reports=()):
  """tf-hat-ebm-reproduce: the flags as Options, then `reproduce`. Ctrl-C or SIGTERM stops the
  running stages (exit 130); the same command resumes."""
  try:
    seeds = tuple(int(s) for s in seeds) if seeds else tuple(stages_lib.SCALES[scale].seeds)
  except ValueError:
    raise ValueError(f'--seeds must be comma-separated integers, not {",".join(seeds)}')
  options = stages_lib.Options(
      out=out if out is not None else os.path.join('reproduce', scale), scale=scale, seeds=seeds,
      parts=tuple(parts), size=size or None, tpu=tpu, data_dir=data_dir,
      inception_path=inception_path, precision=precision, release_sngan=release_sngan,
      jobs=jobs, dry_run=dry_run, overwrite=overwrite,
      previous_reports=tuple(previous_reports or ()))
  try:
    return reproduce(options)
  except KeyboardInterrupt as e:
    raise KeyboardInterrupt('interrupted: the running stages were stopped; rerun the same '
                            'command to resume') from e
