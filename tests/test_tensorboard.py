"""TensorBoard as its plugins read it: the HPARAMS tab (one session per run, every config field a
column, the final metrics) and the first screen (the custom-scalars layout, energy/ first)."""
import os

import pytest
import tensorflow as tf

from tf_hat_ebm import summaries


class _Task:
  metric_names = ('energy_diff', 'energy_pos', 'energy_neg', 'gen_loss')


def _write_run(workdir, config, energy_diff):
  writer = tf.summary.create_file_writer(os.path.join(workdir, 'tensorboard'))
  report = summaries.RunReport(_Task(), config, workdir, writer)
  report.start(0)
  report.scalars(config.training.num_steps, dict(energy_diff=energy_diff, energy_pos=1.0,
                                                 energy_neg=1.0 - energy_diff, gen_loss=0.5),
                 {'hat_lr': 1e-4, 'guard_count': 0})
  writer.flush()
  writer.close()


def _context(logdir):
  """The request and backend contexts TensorBoard's hparams plugin answers with."""
  # pylint: disable=g-import-not-at-top
  from tensorboard import context
  from tensorboard.backend.event_processing import data_provider
  from tensorboard.backend.event_processing import plugin_event_multiplexer
  from tensorboard.plugins import base_plugin
  from tensorboard.plugins.hparams import backend_context
  multiplexer = plugin_event_multiplexer.EventMultiplexer()
  multiplexer.AddRunsFromDirectory(logdir)
  multiplexer.Reload()
  provider = data_provider.MultiplexerDataProvider(multiplexer, logdir)
  tb = base_plugin.TBContext(logdir=logdir, data_provider=provider, multiplexer=multiplexer)
  return context.RequestContext(), backend_context.Context(tb)


@pytest.fixture(name='logdir', scope='module')
def logdir_fixture(tmp_path_factory):
  """Two runs of one config that differ only in training.num_steps, under one logdir."""
  from conftest import tiny  # pylint: disable=g-import-not-at-top
  logdir = str(tmp_path_factory.mktemp('logdir'))
  for num_steps, diff in ((300, 0.25), (600, -0.5)):
    config = tiny()
    config.training.num_steps = num_steps
    _write_run(os.path.join(logdir, f'run_{num_steps}'), config, diff)
  return logdir


def test_hparams_tab_has_every_config_field_and_one_session_per_run(logdir):
  # pylint: disable=g-import-not-at-top
  from tensorboard.plugins.hparams import api_pb2
  from tensorboard.plugins.hparams import get_experiment
  from tensorboard.plugins.hparams import list_session_groups
  from conftest import tiny
  request, backend = _context(logdir)
  experiment = get_experiment.Handler(request, backend, '',
                                      api_pb2.GetExperimentRequest()).run()
  columns = {info.name for info in experiment.hparam_infos}
  assert set(summaries.flat_config(tiny())) == columns
  metrics = {info.name.tag for info in experiment.metric_infos}
  assert {'energy/energy_diff', 'train/gen_loss', 'lr/hat_lr'} <= metrics
  groups = list_session_groups.Handler(
      request, backend, '', api_pb2.ListSessionGroupsRequest(
          start_index=0, slice_size=10, allowed_statuses=[
              api_pb2.STATUS_UNKNOWN, api_pb2.STATUS_SUCCESS, api_pb2.STATUS_FAILURE,
              api_pb2.STATUS_RUNNING])).run()
  assert groups.total_size == 2
  rows = {}
  for group in groups.session_groups:
    assert os.path.basename(group.name) in ('run_300', 'run_600')  # the workdir, not the config
    diff = [m.value for m in group.metric_values if m.name.tag == 'energy/energy_diff']
    rows[int(group.hparams['training.num_steps'].number_value)] = diff
  assert rows == {300: [0.25], 600: [-0.5]}


def test_first_screen_puts_the_health_of_the_run_first(logdir):
  # pylint: disable=g-import-not-at-top
  from tensorboard.plugins.custom_scalar import layout_pb2
  from tensorboard.plugins.custom_scalar import metadata
  found = {}
  for path in tf.io.gfile.glob(os.path.join(logdir, 'run_300', 'tensorboard', 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        found[value.tag] = value
  layout = layout_pb2.Layout.FromString(
      tf.make_ndarray(found[metadata.CONFIG_SUMMARY_TAG].tensor).item())
  first = layout.category[0]
  assert first.title == 'health of the run'
  assert [list(c.multiline.tag) for c in first.chart] == [
      [r'^energy/energy_diff$'], [r'^energy/energy_pos$', r'^energy/energy_neg$'],
      [r'^energy/guard_count$', r'^energy/rollbacks$']]
  scalars = sorted(t for t, v in found.items() if v.metadata.plugin_data.plugin_name == 'scalars')
  # Groups sort alphabetically in TensorBoard: energy/ comes first, with the guard in it.
  assert scalars[0].split('/')[0] == 'energy'
  assert {'energy/energy_diff', 'energy/energy_pos', 'energy/energy_neg',
          'energy/guard_count'} <= set(scalars)
  assert 'around 0' in found['energy/energy_diff'].metadata.summary_description


def test_the_custom_scalars_layout_shows_every_scalar_and_every_metric(logdir):
  import re  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.evaluation import metrics  # pylint: disable=g-import-not-at-top
  tags = set()
  for path in tf.io.gfile.glob(os.path.join(logdir, 'run_300', 'tensorboard', 'events.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags |= {v.tag for v in event.summary.value
               if v.metadata.plugin_data.plugin_name == 'scalars'}
  assert 'energy/energy_diff' in tags
  tags |= {f'eval/{m}_{method}' for m in metrics.described() for method in ('hat_ebm', 'generator')}
  tags |= {f'eval/{m}_data_test_vs_train' for m in metrics.described()} | {'eval/ood_auroc_svhn'}
  patterns = [p for _, charts in summaries.LAYOUT for _, chart in charts for p in chart]
  assert sorted(t for t in tags if not any(re.search(p, t) for p in patterns)) == []
