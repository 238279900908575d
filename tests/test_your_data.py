"""A user's own images (folder:<path>, array:<path>): shapes, ranges, splits, each bad input, and a
run trained, sampled, exported and reloaded on a folder of PNGs."""
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from tf_hat_ebm import data
from tf_hat_ebm import image_sources
from tf_hat_ebm import validation

from conftest import FOLDER_IMAGES, run_command, tiny, write_png


def data_cfg(name, **fields):
  cfg = tiny().data
  cfg.name = name
  cfg.update(fields)
  return cfg


def split_pixels(cfg, split):
  """A split's images as uint8 [n, 8, 8, c] (the digits' own size: the resize is left out)."""
  return np.stack([np.round(x.numpy()).astype(np.uint8) for x in image_sources.pixels(cfg, split)])


def test_folder_split_is_seeded_disjoint_and_holds_every_image(digits_folder):
  folder, pixels = digits_folder
  cfg = data_cfg(f'folder:{folder}')
  train, test = split_pixels(cfg, 'train'), split_pixels(cfg, 'test')
  assert len(test) == round(FOLDER_IMAGES * cfg.test_fraction) and len(train) + len(test) == 300
  expected = image_sources.split_indices(FOLDER_IMAGES, cfg, 'test', 'x')
  np.testing.assert_array_equal(test, pixels[expected])  # in the permutation's order
  cfg.split_seed = 1
  assert not np.array_equal(split_pixels(cfg, 'test'), test)


def test_folder_images_are_resized_in_range_and_made_rgb(digits_folder):
  cfg = data_cfg(f'folder:{digits_folder[0]}')
  batch = next(iter(data.train_dataset(cfg, 8))).numpy()
  assert batch.shape == (8, 16, 16, 1) and batch.min() >= -1.0 and batch.max() <= 1.0
  cfg.channels = 3  # grey repeated into three equal channels
  batch = next(iter(data.train_dataset(cfg, 8))).numpy()
  assert batch.shape == (8, 16, 16, 3)
  np.testing.assert_array_equal(batch[..., 0], batch[..., 2])


def test_arrays_give_the_folders_images_whatever_their_range(digits_folder, tmp_path, capsys):
  folder, pixels = digits_folder
  cfg = data_cfg(f'folder:{folder}')
  expected = pixels[np.sort(image_sources.split_indices(len(pixels), cfg, 'test', 'x'))]
  unit = pixels.astype(np.float32) / 127.5 - 1.0
  np.savez(tmp_path / 'uint8.npz', images=pixels)
  np.save(tmp_path / 'symmetric.npy', unit)                 # float in [-1, 1], memory-mapped
  np.save(tmp_path / 'grey.npy', (unit[..., 0] + 1) / 2)    # [n, h, w] float in [0, 1]
  rgba = np.concatenate([np.repeat(pixels, 3, -1), np.zeros_like(pixels)], -1)
  np.save(tmp_path / 'rgba.npy', rgba)                      # alpha dropped, RGB made grey
  for name, assumed in (('uint8.npz', '[0, 255]'), ('symmetric.npy', '[-1, 1]'),
                        ('grey.npy', '[0, 1]'), ('rgba.npy', '[0, 255]')):
    cfg = data_cfg(f'array:{tmp_path / name}')
    got = np.stack([x.numpy() for x in image_sources.pixels(cfg, 'test')])
    np.testing.assert_allclose(got, expected, atol=0.51)
    assert f'pixels assumed in {assumed}' in capsys.readouterr().out
  cfg = data_cfg(f'array:{tmp_path / "symmetric.npy"}', channels=3)
  assert next(iter(data.train_dataset(cfg, 4))).shape == (4, 16, 16, 3)


def test_an_npz_with_its_own_split_keeps_it(tmp_path):
  np.savez(tmp_path / 'split.npz', train=np.zeros([5, 8, 8], np.uint8),
           test=np.full([3, 8, 8], 255, np.uint8))
  cfg = data_cfg(f'array:{tmp_path / "split.npz"}')
  test = [x.numpy() for x in data.images_dataset(cfg, 'test', training=False)]
  assert len(test) == 3 and all(np.all(x == 1.0) for x in test)
  assert len(list(data.images_dataset(cfg, 'train', training=False))) == 5


def digit_pngs(folder, count, shape=(8, 8, 1)):
  for i in range(count):
    write_png(str(folder / f'{i}.png'), np.full(shape, 40 * i, np.uint8))


def first_error(cfg, split='train'):
  with pytest.raises(ValueError) as info:
    list(image_sources.pixels(cfg, split))
  return str(info.value)


def test_an_empty_folder_or_a_missing_one_is_one_line(tmp_path):
  (tmp_path / 'notes.txt').write_text('no images here')
  message = first_error(data_cfg(f'folder:{tmp_path}'))
  assert message == f'data.name=folder:{tmp_path} holds no PNG or JPEG file (1 other files)'
  with pytest.raises(FileNotFoundError, match='no such folder'):
    image_sources.pixels(data_cfg(f'folder:{tmp_path}/missing'), 'train')


@pytest.mark.parametrize('content,problem', [
    (b'<html>not an image</html>', 'not a PNG or JPEG image (25 bytes)'),
    (None, 'a truncated PNG (no end chunk)')])
def test_a_corrupt_or_truncated_image_is_named(tmp_path, content, problem):
  digit_pngs(tmp_path, 3)
  whole = (tmp_path / '1.png').read_bytes()
  (tmp_path / 'bad.png').write_bytes(content or whole[:len(whole) // 2])
  message = first_error(data_cfg(f'folder:{tmp_path}'))
  assert message == (f'data.name=folder:{tmp_path}: {tmp_path}/bad.png: {problem}; '
                     'remove or replace it')


def test_non_image_files_are_skipped_and_counted(tmp_path, capsys):
  digit_pngs(tmp_path, 4)
  (tmp_path / 'README.md').write_text('my digits')
  (tmp_path / 'labels.csv').write_text('0,1')
  cfg = data_cfg(f'folder:{tmp_path}')
  assert len(list(image_sources.pixels(cfg, 'train'))) + len(
      list(image_sources.pixels(cfg, 'test'))) == 4
  assert f'4 images; skipped 2 non-image file(s), e.g. {tmp_path}/README.md' in (
      capsys.readouterr().out)


def test_mixed_sizes_and_alpha_are_cropped_resized_and_dropped(tmp_path):
  write_png(str(tmp_path / 'a.png'), np.full([8, 8, 1], 10, np.uint8))
  write_png(str(tmp_path / 'b.png'), np.full([30, 20, 3], 200, np.uint8))
  rgba = np.concatenate([np.full([12, 12, 3], 100, np.uint8), np.zeros([12, 12, 1], np.uint8)],
                        axis=-1)
  write_png(str(tmp_path / 'c.png'), rgba)  # fully transparent: alpha dropped, not composited
  cfg = data_cfg(f'folder:{tmp_path}', channels=3, test_fraction=0.34)
  images = [x.numpy() for s in ('train', 'test') for x in data.images_dataset(cfg, s, None, False)]
  assert [x.shape for x in images] == [(16, 16, 3)] * 3
  assert sorted(round(float(x.mean()) * 127.5 + 127.5) for x in images) == [10, 100, 200]


def test_a_one_image_set_is_one_line_and_a_set_smaller_than_a_batch_fills_it(tmp_path):
  digit_pngs(tmp_path, 1)
  assert first_error(data_cfg(f'folder:{tmp_path}')) == (
      f'data.name=folder:{tmp_path} holds 1 image: a train/test split needs at least 2')
  digit_pngs(tmp_path, 3)  # 2 training images, batches of 8: the repeated set fills them
  batch = next(iter(data.train_dataset(data_cfg(f'folder:{tmp_path}'), 8))).numpy()
  assert batch.shape == (8, 16, 16, 1) and len(np.unique(batch.mean(axis=(1, 2, 3)))) == 2


@pytest.mark.parametrize('array,problem', [
    (np.zeros([4, 3, 8, 8], np.float32), 'has shape (4, 3, 8, 8); expected images'),
    (np.full([4, 8, 8], 300.0, np.float32), 'has values in [300, 300]; expected pixels'),
    (np.zeros([4, 8, 8], np.int16), 'has dtype int16; expected uint8 or float')])
def test_a_bad_array_is_one_line(tmp_path, array, problem):
  np.save(tmp_path / 'images.npy', array)
  message = first_error(data_cfg(f'array:{tmp_path}/images.npy'))
  assert message.startswith(f'data.name=array:{tmp_path}/images.npy {problem}')


def test_user_sources_pass_validation_and_a_bare_prefix_does_not():
  validation.check_dataset('folder:/data/faces')
  with pytest.raises(ValueError, match="unknown dataset 'folder:'.*folder:<path>"):
    validation.check_dataset('folder:')


def test_a_folder_run_samples_exports_and_reloads(folder_workdir, tmp_path):
  result = run_command('sample.py', f'--workdir={folder_workdir}', '--num_samples=4',
                       f'--output={tmp_path / "generated"}')
  assert result.returncode == 0, result.stderr
  assert np.load(tmp_path / 'generated' / 'samples.npz')['images'].shape == (4, 16, 16, 1)
  assert os.path.exists(os.path.join(folder_workdir, 'samples', 'samples_0000004.png'))
  assert os.path.exists(os.path.join(folder_workdir, 'samples', 'data.png'))  # real images
  result = run_command('export.py', f'--workdir={folder_workdir}',
                       f'--output={tmp_path / "exported"}')
  assert result.returncode == 0, result.stderr
  model = tf.saved_model.load(str(tmp_path / 'exported'))
  assert model.sample(num_samples=2, seed=1)['images'].shape == (2, 16, 16, 1)
  assert model.dataset.numpy().decode().startswith('folder:')


class Projection(tf.Module):
  """A small feature network: [n, 12, 12, 3] in [0, 1] -> 16 fixed random projections."""

  def __init__(self, seed=0):
    super().__init__()
    self.weights = tf.Variable(tf.random.stateless_normal([12 * 12 * 3, 16], [seed, 1]))

  @tf.function(input_signature=[tf.TensorSpec([None, 12, 12, 3], tf.float32)])
  def __call__(self, images):
    return {'features': tf.tanh(tf.reshape(images, [-1, 12 * 12 * 3]) @ self.weights / 10.0)}


def save_projection(path, seed=0):
  module = Projection(seed)
  tf.saved_model.save(module, str(path), signatures={'serving_default': module.__call__})
  return str(path)


def test_named_features_read_size_and_range_and_are_fingerprinted(tmp_path):
  from tf_hat_ebm.evaluation import named_features  # pylint: disable=g-import-not-at-top
  net = named_features.NamedFeatures(save_projection(tmp_path / 'a'), 16)
  assert (net.size, net.channels, net.range) == ((12, 12), 3, (0.0, 1.0))
  grey = np.linspace(-1, 1, 2 * 16 * 16).reshape([2, 16, 16, 1]).astype(np.float32)
  module = Projection()  # the same network: the images are made RGB, 12x12, [0, 1] first
  rgb = tf.image.resize(tf.image.grayscale_to_rgb(tf.constant(grey)), [12, 12], antialias=True)
  np.testing.assert_allclose(net(grey), module((rgb + 1) / 2)['features'], atol=1e-5)
  other = named_features.NamedFeatures(save_projection(tmp_path / 'b', seed=1), 16, ['-1', '1'])
  assert other.name != net.name and other.range == (-1.0, 1.0)
  assert f'sha256 {net.fingerprint[:12]}' in net.description
  with pytest.raises(ValueError, match='expected two numbers low,high'):
    named_features.NamedFeatures(str(tmp_path / 'a'), 16, ['1', '0'])


def test_folder_data_scores_on_named_features_and_refuses_to_mix_them(
    folder_workdir, tmp_path):
  output = str(tmp_path / 'fid.json')
  flags = [f'--workdir={folder_workdir}', '--num_samples=20', '--runs=1', f'--output={output}']
  result = run_command('evaluate_fid.py', *flags)  # a folder has no default feature network
  assert result.returncode == 1
  assert result.stderr.strip().endswith('has no default feature network: pass --features=PATH '
                                        '(a SavedModel mapping images to vectors; '
                                        '--features_range its input range) or '
                                        '--feature_net=inception with --inception_path=DIR')
  first = save_projection(tmp_path / 'first')
  result = run_command('evaluate_fid.py', *flags, f'--features={first}')
  assert result.returncode == 0, result.stderr
  from tf_hat_ebm import results as result_lib  # pylint: disable=g-import-not-at-top
  saved = result_lib.read(output)
  assert saved.feature_net.startswith('features_') and first in saved.feature_description
  assert set(saved.values) >= {'fid', 'kid', 'precision', 'recall'}
  assert all(np.isfinite(v) for by_method in saved.values.values()
             for sets in by_method.values() for v in sets)
  second = save_projection(tmp_path / 'second', seed=1)
  result = run_command('evaluate_fid.py', *flags, f'--features={second}', '--overwrite')
  assert result.returncode == 1
  assert 'scores on different features are never mixed' in result.stderr
  assert result_lib.read(output).feature_net == saved.feature_net  # kept


def save_generator(path, scale=1.0):
  """A user's generator SavedModel: latents [4] -> sigmoid images [16, 16, 1] times `scale`."""
  from tf_hat_ebm.keras_compat import keras  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  model = keras.Sequential([
      keras.layers.Input([4]), keras.layers.Dense(4 * 4 * 4, activation='relu'),
      keras.layers.Reshape([4, 4, 4]),
      keras.layers.Conv2DTranspose(1, 4, strides=4, activation='sigmoid'),
      keras.layers.Rescaling(scale)])
  model.save(str(path))
  return str(path)


def refine_config(folder, generator, **fields):
  return tiny('digits_refine', **{'data.name': f'folder:{folder}', 'generator.source': 'savedmodel',
                                  'training.figures': True,
                                  'generator.path': generator, 'generator.latent_shape': (),
                                  'generator.output_range': (0.0, 1.0), **fields})


def test_a_refinement_of_your_generator_on_your_folder(digits_folder, tmp_path):
  from tf_hat_ebm.tasks import joint  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  config = refine_config(digits_folder[0], save_generator(tmp_path / 'g'))
  strategy = tf.distribute.get_strategy()
  task = joint.JointTask(config, strategy)
  assert tuple(config.generator.latent_shape) == (4,)  # read from the SavedModel's signature
  metrics = Trainer(task, config, str(tmp_path / 'run'), strategy, verbose=False).train(2)
  assert all(np.isfinite(v) for v in metrics.values())
  assert os.path.exists(tmp_path / 'run' / 'samples' / 'samples_0000002.png')


def test_a_generator_outside_its_stated_range_is_one_line_naming_both(digits_folder, tmp_path):
  from tf_hat_ebm.tasks import joint  # pylint: disable=g-import-not-at-top
  config = refine_config(digits_folder[0], save_generator(tmp_path / 'g255', scale=255.0))
  with pytest.raises(ValueError, match=r'outputs images in \[\d.*, \d.*\]; generator.output_range '
                     r'says \[0, 1\]: set --config.generator.output_range'):
    joint.JointTask(config, tf.distribute.get_strategy())


def page_commands():
  """The four commands of docs/your_data.md's first bash block, as argument lists."""
  import re  # pylint: disable=g-import-not-at-top
  import shlex  # pylint: disable=g-import-not-at-top
  from conftest import REPO  # pylint: disable=g-import-not-at-top
  with open(os.path.join(REPO, 'docs', 'your_data.md')) as f:
    block = re.search(r'```bash\n(.*?)```', f.read(), re.S).group(1)
  return [shlex.split(line) for line in block.strip().splitlines()]


@pytest.mark.slow
def test_the_your_data_page_runs_as_written(digits_folder, tmp_path, monkeypatch):
  import shutil  # pylint: disable=g-import-not-at-top
  from conftest import KIND_SIZES, SMALL, load_config, _has  # pylint: disable=g-import-not-at-top
  monkeypatch.chdir(tmp_path)
  shutil.copytree(digits_folder[0], 'my_images')
  save_projection(tmp_path / 'my_features')
  config = load_config('folder_synth')
  tiny_sizes = {k: v for k, v in {**SMALL, **KIND_SIZES['synthesis']}.items() if _has(config, k)}
  tiny_sizes.update({'data.image_size': 16, 'data.channels': 1})
  # The page's flags first, then the test's sizes (the last of a repeated flag wins).
  extra = {'train.py': [f'--config.{k}={v}' for k, v in tiny_sizes.items()],
           'evaluate_fid.py': ['--num_samples=20', '--runs=1'], 'sample.py': ['--num_samples=8']}
  commands = page_commands()
  assert [c[:2] for c in commands] == [['python', f'experiments/{s}'] for s in (
      'train.py', 'sample.py', 'evaluate_fid.py', 'export.py')]
  for command in commands:
    script = os.path.basename(command[1])
    result = run_command(script, *command[2:], *extra.get(script, []))
    assert result.returncode == 0, (command, result.stderr)
  assert os.path.exists('workdir/folder_synth/generated/samples.npz')
  assert os.path.exists('workdir/folder_synth/fid.json')
  loaded = tf.saved_model.load('exported/folder_synth')
  assert loaded.sample(num_samples=2)['images'].shape == (2, 16, 16, 1)


def test_random_flips_keep_the_input_position_savable(folder_workdir):
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  config = trained_run.load_config(folder_workdir)  # trained with flips: checkpoints saved
  assert config.data.random_flip and not config.data.cache
  assert config.training.checkpoint_data_iterator
  assert os.path.exists(os.path.join(folder_workdir, 'checkpoints', 'ckpt-4.index'))
  config.data.shuffle_buffer = 1  # in order: the first pass beside the images as they are
  images = next(iter(data.eval_dataset(config.data, 'train', 64))).numpy()
  batch = next(iter(data.train_dataset(config.data, 64))).numpy()
  flipped = np.all(batch == images[:, :, ::-1], axis=(1, 2, 3))
  kept = np.all(batch == images, axis=(1, 2, 3))
  assert 10 < flipped.sum() < 54 and np.all(flipped | kept)  # about half of them flipped


def save_decoder(path, size=16, scale=1.0):
  """A user's decoder SavedModel: latents [8] -> tanh images [size, size, 1] in [-1, 1] (the
  data's range), times `scale`."""
  from tf_hat_ebm.keras_compat import keras  # pylint: disable=g-import-not-at-top
  keras.utils.set_random_seed(0)
  model = keras.Sequential([
      keras.layers.Input([8]), keras.layers.Dense(4 * 4 * 4, activation='relu'),
      keras.layers.Reshape([4, 4, 4]),
      keras.layers.Conv2DTranspose(1, size // 4, strides=size // 4, activation='tanh'),
      keras.layers.Rescaling(scale)])
  model.save(str(path))
  return str(path)


def retrofit_flags(decoder, workdir):
  """train_retrofit.py's flags: digits_retrofit at its tiny size over a SavedModel decoder, with
  the tests' small networks and batch."""
  from conftest import CONFIGS  # pylint: disable=g-import-not-at-top
  return [f'--config={os.path.join(CONFIGS, "digits_retrofit.py")}:tiny',
          '--config.generator.source=savedmodel', f'--config.generator.path={decoder}',
          '--config.model.hat_width=8', '--config.training.batch_size=4',
          '--config.training.num_grid_samples=4', f'--workdir={workdir}']


def test_a_retrofit_of_your_decoder_trains_and_samples(tmp_path):
  decoder, workdir = save_decoder(tmp_path / 'decoder'), str(tmp_path / 'retrofit')
  result = run_command('train_retrofit.py', *retrofit_flags(decoder, workdir))
  assert result.returncode == 0, result.stderr
  from tf_hat_ebm import trained_run  # pylint: disable=g-import-not-at-top
  config = trained_run.load_config(workdir)
  assert (config.generator.source, tuple(config.generator.latent_shape)) == ('savedmodel', (8,))
  assert config.sampling.latent_sphere  # the retrofit's chain, over your decoder
  result = run_command('sample.py', f'--workdir={workdir}', '--num_samples=4',
                       f'--generator_path={decoder}')
  assert result.returncode == 0, result.stderr
  saved = np.load(os.path.join(workdir, 'generated', 'samples.npz'))
  assert saved['images'].shape == (4, 16, 16, 1) and np.abs(saved['images']).max() <= 1.0
  assert not np.allclose(saved['images'], saved['generator_images'])  # Y moved X off G(Z)


@pytest.mark.parametrize('size, scale, problem', [
    (16, 255.0, r'outputs images in \[-?\d.*, \d.*\]; generator.output_range says \[-1, 1\]: set '
                r'--config.generator.output_range to the range it outputs'),
    (8, 1.0, r'maps latents \[8\] to images \[8, 8, 1\]; the config expects images '
             r'\[16, 16, 1\]')])
def test_a_decoder_of_another_range_or_size_is_one_line(tmp_path, size, scale, problem):
  decoder = save_decoder(tmp_path / 'decoder', size=size, scale=scale)
  result = run_command('train_retrofit.py', *retrofit_flags(decoder, str(tmp_path / 'run')))
  assert result.returncode == 1
  assert result.stderr.count('\n') == 1 and result.stderr.startswith('error: ')
  assert re.search(problem, result.stderr), result.stderr
  assert not os.path.exists(tmp_path / 'run' / 'checkpoints')  # nothing trained
