r"""Step rate of a folder source against the same images from an array: one run, as a ratio.

  python benchmarks/folder_vs_array.py                          # 50,000 32x32 RGB images
  python benchmarks/folder_vs_array.py --num_images=2000 --steps=40   # a quick look

Writes --num_images 32x32 RGB images (the digits, upscaled and tinted, so they compress as real
images do) once as PNG files in a folder and once as an .npy, then trains folder_synth on each
for --steps steps from the same start and prints the steps/s of both, their ratio, and the input
pipeline's own images/s for each (no training). data.cache is off: every image is read and
decoded from its source at every use, the streaming case.
"""
import os
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_integer('num_images', 50_000, 'Images in the folder and in the array.')
flags.DEFINE_integer('steps', 200, 'Training steps timed per source (after a warm-up chunk).')
flags.DEFINE_integer('pipeline_batches', 200, 'Batches read to time the input pipeline alone.')
flags.DEFINE_string('dir', None, 'Where the images go (default: a temporary directory).')
FLAGS = flags.FLAGS
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_images(directory, count):
  """count 32x32 RGB uint8 images, as PNG files in directory/folder and as directory/images.npy;
  (folder, array path)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import data  # pylint: disable=g-import-not-at-top
  digits, _ = data.digits_arrays('train')
  rng = np.random.RandomState(0)
  picks = digits[rng.randint(len(digits), size=count)]
  grey = tf.image.resize(picks, [32, 32]).numpy()
  tint = rng.uniform(0.3, 1.0, size=[count, 1, 1, 3])
  images = np.round((np.clip(grey, -1, 1) + 1) * 127.5 * tint).astype(np.uint8)
  folder, array = os.path.join(directory, 'folder'), os.path.join(directory, 'images.npy')
  if not os.path.exists(array):
    for i, image in enumerate(images):
      path = os.path.join(folder, f'{i // 1000:03d}', f'{i:06d}.png')
      os.makedirs(os.path.dirname(path), exist_ok=True)
      tf.io.write_file(path, tf.io.encode_png(image))
    np.save(array, images)
  return folder, array


def config_for(name):
  from tf_hat_ebm import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.load_file(os.path.join(ROOT, 'experiments', 'configs', 'folder_synth.py'))
  config.data.update(name=name, cache=False)
  config.training.update(log_every=10**6, checkpoint_every=10**6, sample_every=10**6,
                         steps_per_loop=10)
  return config


def step_rate(name, steps):
  """Training steps/s of folder_synth on data `name`, after one warm-up chunk."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm import registry  # pylint: disable=g-import-not-at-top
  from tf_hat_ebm.trainer import Trainer  # pylint: disable=g-import-not-at-top
  config = config_for(name)
  strategy = tf.distribute.get_strategy()
  with tempfile.TemporaryDirectory() as workdir:
    trainer = Trainer(registry.for_config(config).make_task(config, strategy), config, workdir,
                      strategy, verbose=False)
    warm = config.training.steps_per_loop
    trainer.train(warm)
    start = time.perf_counter()
    trainer.train(warm + steps)
    return steps / (time.perf_counter() - start)


def pipeline_rate(name, batches):
  """Images/s of the training input pipeline alone."""
  from tf_hat_ebm import data  # pylint: disable=g-import-not-at-top
  config = config_for(name)
  iterator = iter(data.train_dataset(config.data, config.training.batch_size))
  next(iterator)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  return batches * config.training.batch_size / (time.perf_counter() - start)


def main(argv):
  del argv
  directory = FLAGS.dir or tempfile.mkdtemp(prefix='folder_vs_array_')
  folder, array = write_images(directory, FLAGS.num_images)
  sources = {'folder': f'folder:{folder}', 'array': f'array:{array}'}
  pipeline = {k: pipeline_rate(v, FLAGS.pipeline_batches) for k, v in sources.items()}
  steps = {k: step_rate(v, FLAGS.steps) for k, v in sources.items()}
  print(f'{FLAGS.num_images} images 32x32x3, folder_synth batch 32, {os.cpu_count()} CPUs')
  for k in sources:
    print(f'{k:7s} input pipeline {pipeline[k]:9.0f} images/s   training {steps[k]:.3f} steps/s')
  print(f'folder / array: input pipeline {pipeline["folder"] / pipeline["array"]:.3f}, '
        f'training steps {steps["folder"] / steps["array"]:.3f}')


if __name__ == '__main__':
  app.run(main)
