"""One writer per output, only a tool's own files replaced, no output through a link into a
workdir's checkpoints/, a reader that survives checkpoint rotation, and no code from a workdir
(a SavedModel generator, an empty fingerprint, a moved generator's pin)."""
import os
import shutil

import pytest
import tensorflow as tf

from tf_hat_ebm import checkpoints
from tf_hat_ebm import generators
from tf_hat_ebm import outputs
from tf_hat_ebm import trained_run
from tf_hat_ebm import workdir as workdir_lib
from tf_hat_ebm.evaluation import calibration
from tf_hat_ebm.evaluation import evaluate

from conftest import run_command, tiny


@pytest.fixture
def workdir(trained_workdir, tmp_path):
  """A copy of the trained workdir (ckpt-2), free to damage."""
  path = str(tmp_path / 'w')
  shutil.copytree(trained_workdir, path)
  return path


def state(ckpt_dir, step):
  """The `checkpoint` state file naming ckpt-<step> the latest, as a CheckpointManager writes."""
  with open(os.path.join(ckpt_dir, 'checkpoint'), 'w') as f:
    f.write(f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n')


def one_line_error(result, text):
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith('error: '), (
      result.stderr[-2000:])
  assert text in lines[0], lines[0]


def test_a_second_evaluation_of_one_workdir_at_once_is_refused(workdir, monkeypatch):
  def started(*args, **kwargs):
    raise RuntimeError('the second evaluation started')
  monkeypatch.setattr(evaluate, 'load_for_eval', started)
  path = os.path.join(workdir, 'fid.json')
  with outputs.ResultWriter([path], False, 'evaluate_fid.py'):  # the first, still running
    with pytest.raises(workdir_lib.WorkdirLockedError, match='in use by another evaluate_fid.py '
                       'run writing fid.json'):
      evaluate.evaluate_run(workdir, num_samples=20, runs=1, seed=1)
  assert not os.path.exists(path) and not os.path.exists(os.path.join(workdir, '.fid.json.lock'))


def test_an_evaluation_to_another_output_locks_that_file_not_fid_json(tmp_path, monkeypatch):
  # The plateau rule's checkpoint is scored to fid_plateau.json (--output) beside fid.json.
  def started(*args, **kwargs):
    raise RuntimeError('the evaluation started')
  monkeypatch.setattr(evaluate, 'load_for_eval', started)
  workdir, path = str(tmp_path), str(tmp_path / 'fid_plateau.json')
  with outputs.ResultWriter([path], False, 'evaluate_fid.py'):
    with pytest.raises(workdir_lib.WorkdirLockedError, match='writing fid_plateau.json'):
      evaluate.evaluate_run(workdir, output=path)
  with outputs.ResultWriter([os.path.join(workdir, 'fid.json')], False, 'evaluate_fid.py'):
    with pytest.raises(RuntimeError, match='the evaluation started'):
      evaluate.evaluate_run(workdir, output=path)
  assert sorted(os.listdir(workdir)) == []


def test_a_symlink_never_carries_an_output_into_a_workdirs_checkpoints(workdir, tmp_path):
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  before = sorted(os.listdir(ckpt_dir))
  link = tmp_path / 'L'
  os.symlink(ckpt_dir, link)
  for script, flag in (('export.py', 'output'), ('sample.py', 'output')):
    result = run_command(script, f'--workdir={workdir}', f'--{flag}={link}', '--overwrite')
    one_line_error(result, 'is a training workdir or one of its own directories')
  assert sorted(os.listdir(ckpt_dir)) == before


def test_overwrite_replaces_only_a_tools_own_kind_of_file_never_a_checkpoint(workdir, tmp_path):
  index = os.path.join(workdir, 'checkpoints', 'ckpt-2.index')
  with open(index, 'rb') as f:
    saved = f.read()
  link = tmp_path / 'gallery.png'
  os.symlink(index, link)
  for out in (index, str(link)):
    result = run_command('gallery.py', f'--workdir={workdir}', f'--out={out}', '--overwrite')
    one_line_error(result, 'lies in the training checkpoints')
  with open(index, 'rb') as f:
    assert f.read() == saved
  notes = tmp_path / 'notes.png'
  notes.write_text('my notes, not a figure')
  result = run_command('gallery.py', f'--workdir={workdir}', f'--out={notes}', '--overwrite')
  one_line_error(result, 'exists and is not a PNG image, so not a file this command wrote')
  assert notes.read_text() == 'my notes, not a figure'
  mine = tmp_path / 'fid.json'
  mine.write_text('[1, 2]')
  with pytest.raises(ValueError, match='is not a JSON object'):
    outputs.check_result_file(str(mine), overwrite=True)
  mine.write_text('{"hat_ebm": [1.0]}')
  outputs.check_result_file(str(mine), overwrite=True)  # its own kind: may be replaced


def test_a_checkpoint_rotated_away_while_it_is_read_gives_way_to_the_new_latest(
    workdir, monkeypatch, caplog):
  ckpt_dir = os.path.join(workdir, 'checkpoints')
  latest = checkpoints.list_checkpoints(ckpt_dir)[-1]
  newer = latest + 2
  restore = checkpoints.restore

  def rotating(path, items, what, hint='', **keywords):
    if path.endswith(f'ckpt-{latest}'):  # the training saves ckpt-<newer>, deletes this one
      for name in os.listdir(ckpt_dir):
        if name.startswith(f'ckpt-{latest}.'):
          os.rename(os.path.join(ckpt_dir, name),
                    os.path.join(ckpt_dir, name.replace(f'ckpt-{latest}.', f'ckpt-{newer}.')))
      state(ckpt_dir, newer)
    return restore(path, items, what, hint, **keywords)

  monkeypatch.setattr(checkpoints, 'restore', rotating)
  run = trained_run.load_run(workdir)
  assert run.checkpoint == os.path.join(ckpt_dir, f'ckpt-{newer}')
  assert f'ckpt-{latest} was deleted while it was read' in caplog.text


def savedmodel_generator(path, marker):
  """A SavedModel generator whose graph writes `marker` each time it runs."""
  class Generator(tf.Module):

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def __call__(self, z):
      tf.io.write_file(marker, 'ran')
      return tf.zeros([tf.shape(z)[0], 16, 16, 1])

  tf.saved_model.save(Generator(), path)


def joint_workdir(workdir, steps=(2,), **generator):
  """A refinement workdir's config.json naming `generator`, with (empty) checkpoint files."""
  config = tiny('digits_refine', **{f'generator.{k}': v for k, v in generator.items()})
  os.makedirs(os.path.join(workdir, 'checkpoints'))
  workdir_lib.write_config(workdir, config)
  for step in steps:
    open(os.path.join(workdir, 'checkpoints', f'ckpt-{step}.index'), 'w').close()
  state(os.path.join(workdir, 'checkpoints'), steps[-1])
  return workdir


def test_a_savedmodel_generator_named_only_by_a_workdir_never_runs(tmp_path):
  marker, saved = str(tmp_path / 'written'), str(tmp_path / 'g')
  savedmodel_generator(saved, marker)
  assert not os.path.exists(marker)
  workdir = joint_workdir(str(tmp_path / 'w'), source='savedmodel', path=saved,
                          latent_shape=(4,), fingerprint='0123456789abcdef')
  with pytest.raises(ValueError, match=f'names the SavedModel generator {saved}, a graph whose '
                     f'ops loading this run would run; pass --generator_path={saved} if it is '
                     'yours, or --trust_workdir_code'):
    trained_run.load_run(workdir)
  assert not os.path.exists(marker)
  with pytest.raises(ValueError):  # named on the command line: loaded (then the fake checkpoint)
    trained_run.load_run(workdir, generator_path=saved, allow_other_generator=True)
  assert os.path.exists(marker)


def test_an_empty_fingerprint_is_refused_not_taken_as_no_pin(tmp_path):
  workdir = joint_workdir(str(tmp_path / 'w'), path=str(tmp_path / 'gan'), checkpoint=2,
                          fingerprint='')
  for load in (trained_run.load_run, workdir_lib.load_config):
    with pytest.raises(ValueError, match='config.json: generator.fingerprint is empty, but this '
                       'run recorded the weights of its generator there'):
      load(workdir)


def test_a_resume_over_a_moved_generator_keeps_its_pinned_checkpoint(tmp_path, capsys):
  workdir = joint_workdir(str(tmp_path / 'refine'), path=str(tmp_path / 'gan'), checkpoint=2,
                          fingerprint='0123456789abcdef')
  moved = str(tmp_path / 'moved')
  os.makedirs(os.path.join(moved, 'checkpoints'))
  for step in (2, 4):  # trained on after the move: the newest is not the pinned one
    open(os.path.join(moved, 'checkpoints', f'ckpt-{step}.index'), 'w').close()
  config = tiny('digits_refine', **{'generator.path': moved})
  generators.adopt_pin(config, workdir, allow_change=True)
  assert config.generator.checkpoint == 2
  assert f'moved to {moved}: continuing with its pinned ckpt-2' in capsys.readouterr().out
  os.remove(os.path.join(moved, 'checkpoints', 'ckpt-2.index'))
  with pytest.raises(generators.PinnedGeneratorGone, match='ckpt-2 .* is gone .*ckpt-4'):
    generators.adopt_pin(tiny('digits_refine', **{'generator.path': moved}), workdir,
                         allow_change=True)
  # A checkpoint asked for is the user's choice: pinned anew.
  config = tiny('digits_refine', **{'generator.path': moved, 'generator.checkpoint': 4})
  generators.adopt_pin(config, workdir, allow_change=True)
  assert config.generator.checkpoint == 4


def test_a_repeated_calibration_label_is_refused(tmp_path):
  with pytest.raises(ValueError, match='--samples repeats the label synthesis: give each model '
                     'once'):
    calibration.calibrate_command(workdir=str(tmp_path), output=str(tmp_path / 'c.json'),
                                  samples=['synthesis=a.npz', 'retrofit=b.npz',
                                           'synthesis=c.npz'])
  assert not (tmp_path / 'c.json').exists()
