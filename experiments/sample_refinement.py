r"""Side-by-side samples of a joint Hat EBM run: the generator alone, DDLS and the Hat EBM.

  python experiments/sample_refinement.py                       # digits_refine: SN-GAN, DDLS, Hat EBM
  python experiments/sample_refinement.py --config=experiments/configs/digits_retrofit.py
                                           # decoder of N(0, I) latents and Hat EBM (no D: no DDLS)

All three start from the same latents Z0 ~ N(0, I): G(Z0); DDLS (Langevin in z on
||z||^2/2 - D(G(z)), config.ddls); the Hat EBM's joint chain (config.sampling), X = G(Z_K) + Y_K.
Writes <workdir>/compare/{generator,ddls,hat_ebm,side_by_side}.png; for the digits also prints and
writes scores.json (classifier confidence, digit Inception-Score analogue, nearest-train distance).
"""
import json
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # keep the console for progress and errors

from absl import app
from absl import flags
from ml_collections import config_flags
import numpy as np
import tensorflow as tf

from tf_hat_ebm import images as images_lib
from tf_hat_ebm import langevin
from tf_hat_ebm import run_lib
from tf_hat_ebm.refinement import JointTask

_CONFIGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'configs')
config_flags.DEFINE_config_file('config', os.path.join(_CONFIGS, 'digits_refine.py'),
                                'Config of the joint Hat EBM run.', lock_config=True)
flags.DEFINE_string('workdir', None, 'Run directory (default: workdir/<config name>).')
flags.DEFINE_string('out', None, 'Output directory (default: <workdir>/compare).')
flags.DEFINE_integer('num', 100, 'Samples per method.')
flags.DEFINE_integer('seed', 0, 'Seed of Z0 and of the chains.')
FLAGS = flags.FLAGS


def sample_all(config, workdir, num, seed):
  """{'generator', 'ddls' (when the generator comes with a discriminator), 'hat_ebm'} numpy."""
  task = JointTask(config, tf.distribute.get_strategy())
  latest = tf.train.latest_checkpoint(os.path.join(workdir, 'checkpoints'))
  if latest is None:
    raise FileNotFoundError(f'no checkpoint in {workdir}/checkpoints; train the Hat EBM first')
  tf.train.Checkpoint(hat=task.hat).restore(latest).expect_partial()
  rng = tf.random.Generator.from_seed(seed)
  z0 = rng.normal([num, *task.generator.latent_shape])
  out = {'generator': langevin.generate(task.generator, z0).numpy()}
  if task.discriminator is not None:
    ddls = langevin.DDLSSettings.from_config(config.ddls)
    out['ddls'] = tf.function(lambda z: langevin.sample_ddls(
        task.discriminator, task.generator, rng, ddls, z0=z)[1])(z0).numpy()
  out['hat_ebm'] = tf.function(lambda z: task.replica_sample(
      rng, num, task.sampling_settings, z0=z)[0])(z0).numpy()
  return out, int(latest.rsplit('-', 1)[-1])


def write(samples, out_dir):
  grids = {name: images_lib.grid(images_lib.to_uint8(x)) for name, x in samples.items()}
  for name, image in grids.items():
    images_lib.write_png(os.path.join(out_dir, f'{name}.png'), image)
  gap = np.full([next(iter(grids.values())).shape[0], 6, grids['generator'].shape[2]], 255,
                np.uint8)
  row = [part for image in grids.values() for part in (image, gap)][:-1]
  images_lib.write_png(os.path.join(out_dir, 'side_by_side.png'), np.concatenate(row, axis=1))


def main(argv):
  del argv
  config = FLAGS.config
  workdir = FLAGS.workdir or os.path.join('workdir', config.name)
  out_dir = FLAGS.out or os.path.join(workdir, 'compare')

  def run():
    samples, step = sample_all(config, workdir, FLAGS.num, FLAGS.seed)
    write(samples, out_dir)
    print(f'{config.name} at step {step}: wrote {", ".join(samples)} and side_by_side.png '
          f'(left to right) to {out_dir}')
    if config.data.name == 'digits':
      from tf_hat_ebm import digits_eval  # pylint: disable=g-import-not-at-top
      table = {name: digits_eval.scores(x) for name, x in samples.items()}
      table['test digits'] = digits_eval.scores(digits_eval.test_digits(config.data.image_size))
      for name, s in table.items():
        print(f'  {name:12s} ' + '  '.join(f'{k} {v:.3f}' for k, v in s.items()))
      with open(os.path.join(out_dir, 'scores.json'), 'w') as f:
        json.dump(table, f, indent=2)

  run_lib.main_guard(run)


if __name__ == '__main__':
  app.run(main)
