"""experiments/reproduce.py: the paper's commands, and a whole tiny pipeline that resumes."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, 'experiments', 'reproduce.py')


def reproduce(*args, timeout=1200, cwd=REPO, env=None):
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                        cwd=cwd, env=env or dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
                        timeout=timeout)


def test_paper_dry_run_lists_every_paper_command(tmp_path):
  result = reproduce('--scale=paper', '--dry_run', '--tpu=my-tpu', f'--out={tmp_path}')
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  stages = [line.split('] ')[1] for line in lines if line.startswith('# [')]
  assert stages == ['synth_s0', 'synth_celeba_s0', 'synth_imagenet128_s0',
                    'synth_imagenet128_large_s0', 'sngan_s0', 'refine_s0', 'sngan_celeba_s0',
                    'refine_celeba_s0', 'autoencoder_s0', 'retrofit_s0', 'ood_s0', 'current_s0',
                    'coop_s0', 'noresidual_s0', 'samples']
  commands = [line for line in lines if not line.startswith('#')]
  trainings = [c for c in commands if '/train_' in c]
  for config in ('cifar10_synth', 'celeba_synth', 'imagenet128_synth', 'imagenet128_synth_large',
                 'cifar10_sngan', 'cifar10_refine', 'celeba_sngan', 'celeba_refine',
                 'cifar10_autoencoder', 'cifar10_retrofit'):
    assert any(f'configs/{config}.py ' in c for c in trainings), config
  assert all('--tpu=my-tpu' in c for c in trainings)
  refine = next(c for c in trainings if 'configs/celeba_refine.py' in c)
  assert f'--config.generator.path={tmp_path}/sngan_celeba_s0' in refine
  assert sum('/evaluate_fid.py' in c and '--runs=3' in c for c in commands) == 12
  assert any('/evaluate_ood.py' in c for c in commands)
  assert not os.listdir(tmp_path)  # a dry run writes nothing


def test_bad_parts_is_one_line_error(tmp_path):
  result = reproduce('--parts=synth,bogus', f'--out={tmp_path}')
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1].endswith(
      'unknown bogus; known: synth, refine, retrofit, ood, ablations, figures')


def test_remote_out_is_one_line_error(tmp_path):
  result = reproduce('--scale=paper', '--out=gs://bucket/repro', cwd=tmp_path)
  assert result.returncode == 2
  assert result.stderr.strip().splitlines()[-1].endswith(
      '--out must be a local directory (it holds the stages\' logs, locks and done markers), '
      'not gs://bucket/repro')
  assert not os.listdir(tmp_path)  # no local 'gs:' directory either


@pytest.mark.slow
@pytest.mark.long
def test_tiny_pipeline_reports_skips_when_done_and_resumes(tmp_path):
  out = str(tmp_path)
  args = ('--scale=tiny', '--seeds=0,1', '--parts=synth', f'--out={out}')
  first = reproduce(*args)
  assert first.returncode == 0, first.stderr[-3000:]
  assert '[1/2] synth_s0: running' in first.stdout and '[2/2] synth_s1: done in' in first.stdout
  with open(os.path.join(out, 'report.json')) as f:
    report = json.load(f)
  per_seed = [json.load(open(os.path.join(out, f'synth_s{s}', 'done.json')))['result']['hat_ebm']
              for s in (0, 1)]
  row = report['tables']['synthesis'][0]
  assert row['per_seed'] == per_seed
  np.testing.assert_allclose([row['mean'], row['std']], [np.mean(per_seed), np.std(per_seed)])
  with open(os.path.join(out, 'report.md')) as f:
    markdown = f.read()
  assert (f'| Hat EBM X = G(Z) + Y | {np.mean(per_seed):.2f} ± {np.std(per_seed):.2f} | '
          'synth_s* |') in markdown
  assert '| SN-GAN G(Z0) | – |' in markdown  # a part not run is a dash, not a number
  assert 'train_synthesis.py' in markdown and '--config.seed=1' in markdown
  assert os.listdir(os.path.join(out, 'tensorboard'))

  # All done: nothing runs again.
  second = reproduce(*args)
  assert second.returncode == 0, second.stderr[-3000:]
  assert '[1/2] synth_s0: done (skipped)' in second.stdout
  assert '[2/2] synth_s1: done (skipped)' in second.stdout

  # Interrupted after training and scoring, before its done marker: the training resumes at its
  # last checkpoint and the finished evaluation is kept.
  os.remove(os.path.join(out, 'synth_s1', 'done.json'))
  fid_time = os.path.getmtime(os.path.join(out, 'synth_s1', 'fid.json'))
  third = reproduce(*args)
  assert third.returncode == 0, third.stderr[-3000:]
  assert '[2/2] synth_s1: running' in third.stdout and 'synth_s0: done (skipped)' in third.stdout
  with open(os.path.join(out, 'synth_s1', 'log.txt')) as f:
    log = f.read()
  assert log.count('/train_synthesis.py') == 2 and log.count('/evaluate_fid.py') == 1
  assert os.path.getmtime(os.path.join(out, 'synth_s1', 'fid.json')) == fid_time
  with open(os.path.join(out, 'report.json')) as f:
    assert json.load(f)['tables']['synthesis'][0]['per_seed'] == per_seed


@pytest.mark.slow
@pytest.mark.long
def test_sigkill_mid_stage_then_rerun_finishes_the_stage(tmp_path):
  """SIGKILL of reproduce.py and its children once the stage's training has checkpointed (while
  it scores): the rerun takes over the dead run's lock, resumes the stage and finishes it."""
  import glob  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  out = str(tmp_path)
  args = ('--scale=tiny', '--seeds=0', '--parts=synth', f'--out={out}')
  proc = subprocess.Popen([sys.executable, SCRIPT, *args], cwd=REPO, start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
  deadline = time.time() + 600
  while not glob.glob(os.path.join(out, 'synth_s0', '**', 'ckpt-2.index'), recursive=True):
    assert proc.poll() is None and time.time() < deadline, 'the stage never checkpointed'
    time.sleep(0.2)
  os.killpg(proc.pid, signal.SIGKILL)
  proc.wait()
  assert not os.path.exists(os.path.join(out, 'synth_s0', 'done.json'))  # killed mid-stage

  rerun = reproduce(*args)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert '[1/1] synth_s0: running' in rerun.stdout
  with open(os.path.join(out, 'synth_s0', 'done.json')) as f:
    assert np.isfinite(json.load(f)['result']['hat_ebm'])
  with open(os.path.join(out, 'report.json')) as f:
    assert len(json.load(f)['tables']['synthesis'][0]['per_seed']) == 1


def load_reproduce():
  import importlib.util
  spec = importlib.util.spec_from_file_location('reproduce_script', SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_report_checks_signs_per_seed_and_against_the_spread(tmp_path):
  module = load_reproduce()
  args = module.parse_args(['--seeds=0,1,2', f'--out={tmp_path}'])
  fids = {  # stage prefix -> per-seed results
      'synth': [dict(hat_ebm=10.0, generator=20.0)] * 3,
      'sngan': [dict(generator=40.0)] * 3,
      'refine': [dict(hat_ebm=h, generator=40.0, ddls=d) for h, d in
                 ((14.0, 39.0), (12.0, 11.0), (16.0, 41.0))],
      'retrofit': [dict(hat_ebm=15.0, generator=200.0)] * 3,
      'current': [dict(hat_ebm=30.0)] * 3,
      'noresidual': [dict(hat_ebm=h) for h in (13.0, 12.5, 15.0)],
  }
  records = {f'{prefix}_s{seed}': dict(result=r, commands=['cmd'], seconds=1.0)
             for prefix, rows in fids.items() for seed, r in enumerate(rows)}
  records.update({f'coop_s{seed}': dict(failed=True, exit_code=1, commands=['cmd'])
                  for seed in (0, 1)})
  records['coop_s2'] = dict(result=dict(hat_ebm=90.0), commands=['cmd'])
  markdown, report = module.build_report(records, args)
  verdicts = {c['check'].split(' (')[0]: c['verdict'] for c in report['checks']}
  assert verdicts['Hat EBM beats its SN-GAN'] == 'yes (14.00 vs 40.00; on 3 of 3 seeds)'
  # Means 14.00 vs 30.33, but seed 1 goes the other way.
  assert verdicts['Hat EBM beats DDLS'] == 'yes (14.00 vs 30.33; on 2 of 3 seeds)'
  assert verdicts['historical bank beats cooperative learning'] == (
      'yes: the ablation failed for seeds [0, 1]')
  assert verdicts['the residual helps refinement'] == (
      'NO (14.00 vs 13.50; on 1 of 3 seeds; the gap is within one std over seeds)')
  assert '| Hat EBM X = G(Z_K) + Y_K | 14.00 ± 1.63 | refine_s* |' in markdown
  assert report['tables']['refinement'][2]['per_seed'] == [14.0, 12.0, 16.0]
  # The progress line of a finished stage carries its numbers.
  assert module.result_line(dict(hat_ebm=13.213, hat_ebm_runs=[13.213], generator=23.0,
                                 data=2.96)) == '; hat_ebm 13.21, generator 23.00'
  assert module.result_line({}) == module.result_line(None) == ''


def test_finished_pipeline_only_rewrites_the_report_quietly(tmp_path):
  out = tmp_path / 'out'
  (out / 'synth_s0').mkdir(parents=True)
  done = dict(stage='synth_s0', commands=['train', 'fid'], seconds=60.0,
              result=dict(hat_ebm=11.0, generator=25.0, data=3.0))
  (out / 'synth_s0' / 'done.json').write_text(json.dumps(done))
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  result = reproduce('--scale=tiny', '--seeds=0', '--parts=synth', f'--out={out}', env=env,
                     timeout=120)
  assert result.returncode == 0, result.stderr
  assert '[1/1] synth_s0: done (skipped); hat_ebm 11.00, generator 25.00\n' in result.stdout
  assert '| Hat EBM X = G(Z) + Y | 11.00 ± 0.00 | synth_s* |' in result.stdout
  # Not one line of TensorFlow's C++ start-up (its E lines about CUDA factories, I, W lines).
  assert not re.search(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] ', result.stderr, re.M)
  assert sorted(os.listdir(out)) == ['figures', 'report.json', 'report.md', 'synth_s0',
                                     'tensorboard']
  # The same markdown in TensorBoard's text tab.
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  texts = [tf.make_ndarray(v.tensor).item().decode()
           for path in (out / 'tensorboard').iterdir()
           for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator()
           for v in tf.compat.v1.Event.FromString(record).summary.value if v.tag == 'report']
  assert texts == [(out / 'report.md').read_text()]
