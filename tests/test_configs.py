"""Every experiment config loads, validates and carries the paper's settings."""
import os

import pytest

from tf_hat_ebm import registry
from tf_hat_ebm import trainer as trainer_lib

from conftest import CONFIGS
from conftest import load_config as load


@pytest.mark.parametrize('name', sorted(f[:-3] for f in os.listdir(CONFIGS)
                                        if f.endswith('.py') and not f.startswith('_')))
def test_config_loads_and_validates(name):
  config = load(name)
  trainer_lib.validate(config)
  assert config.name == name


def test_paper_settings():
  cifar = load('cifar10_synth')
  assert (cifar.training.num_steps, cifar.training.batch_size, cifar.langevin.steps) == (
      75_000, 128, 50)
  assert (cifar.langevin.step_size, cifar.langevin.temperature) == (5e-4, 1e-3)
  assert cifar.training.bank_size == 10_000 and cifar.training.gen_loss_factor == 1000.0
  assert cifar.training.data_eps == 1e-3 and cifar.langevin.max_drift == 2.5
  celeba = load('celeba_synth')
  assert (celeba.data.image_size, celeba.langevin.temperature) == (64, 1e-8)
  imagenet = load('imagenet128_synth')
  assert imagenet.optim.hat_clip_norm == 50.0 and imagenet.optim.gen_lr == 5e-5
  assert tuple(imagenet.optim.hat_lr_boundaries) == (230_000, 260_000)  # the release's
  assert imagenet.training.num_steps == 300_000
  large = load('imagenet128_synth_large')
  assert large.model.hat_width == large.model.gen_width == 2048
  # the sampling chain for FID follows the release: K=125, T=1e-3, Y0 ~ 0.01 N(0, I)
  assert (cifar.sampling.steps, cifar.sampling.temperature, cifar.sampling.init_scale) == (
      125, 1e-3, 0.01)


def test_tiny_shrinks_each_kind_and_takes_both_override_forms(tiny):
  synth = tiny(training__batch_size=8, **{'model.hat_width': 16})
  assert (synth.training.batch_size, synth.model.hat_width, synth.model.gen_width) == (8, 16, 8)
  assert (synth.training.bank_size, synth.langevin.steps, synth.perf.precision) == (
      16, 2, 'float32')
  assert 'disc_width' not in synth.model and 'ddls' not in synth  # only fields it has are set
  gan = tiny('digits_sngan')
  assert (gan.model.disc_width, gan.training.n_dis, gan.training.num_steps) == (8, 2, 2)
  joint = tiny('digits_refine')
  assert (joint.optim.hat_lr, joint.ddls.steps) == (1e-3, 2) and 'bank_size' not in joint.training
  autoencoder = tiny('digits_autoencoder')
  assert (autoencoder.model.enc_width, autoencoder.training.eval_every) == (8, 2)
  trainer_lib.validate(synth)


CONFIG_FILES = sorted(f[:-3] for f in os.listdir(CONFIGS)
                      if f.endswith('.py') and not f.startswith('_'))


@pytest.mark.slow
def test_config_files_import_no_tensorflow():
  """Reading any config (python -c, a notebook, a launcher) needs ml_collections only."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  from conftest import REPO  # pylint: disable=g-import-not-at-top
  code = ('import runpy, sys\n'
          f'for name in {CONFIG_FILES!r}:\n'
          f'  runpy.run_path({CONFIGS!r} + "/" + name + ".py")["get_config"]()\n'
          'heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras"))\n'
          'print(heavy[:3]); sys.exit(1 if heavy else 0)')
  result = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                          text=True, check=False)
  assert result.returncode == 0, result.stdout + result.stderr


def test_paper_configs_hold_only_their_differences():
  """A paper config is its kind's defaults plus a handful of fields."""

  def flat(tree, prefix=''):
    out = {}
    for key, value in tree.items():
      if isinstance(value, dict):
        out.update(flat(value, f'{prefix}{key}.'))
      else:
        out[prefix + key] = value
    return out

  sizes = {}
  for name in CONFIG_FILES:
    config = load(name)
    defaults = flat(registry.defaults(config.experiment).to_dict())
    mine = flat(config.to_dict())
    assert set(mine) <= set(defaults), (name, set(mine) - set(defaults))
    sizes[name] = sum(mine[k] != defaults[k] for k in mine)
  # the paper's CIFAR-10 run of each kind is the defaults of that kind (and its name)
  for name in ('cifar10_synth', 'cifar10_refine', 'cifar10_sngan', 'cifar10_autoencoder'):
    assert sizes[name] <= 2, (name, sizes[name])
  paper = {k: v for k, v in sizes.items() if not k.startswith('digits')}
  assert max(paper.values()) <= 20, paper
