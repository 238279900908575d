"""Refinement of your own pretrained generator on your own images, sized for a laptop CPU:
docs/your_data.md.

  python experiments/train.py --config=folder_refine --config.data.name=folder:my_images \
      --config.generator.path=my_generator
The flags to change first: data.name (folder:<path> or array:<path>), data.image_size and
data.channels (what the generator outputs), generator.path (a SavedModel mapping a latent to an
image; its latent shape is read from its signature, or set generator.latent_shape),
generator.output_range (the range of its images, e.g. 0,1 for a sigmoid output) and
training.num_steps. The chain settings are the digits refinement's (digits_refine.py).
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = registry.defaults('joint')
  config.name = 'folder_refine'
  config.data.update(name='folder:my_images', image_size=32, channels=3)
  config.generator.update(source='savedmodel', path='my_generator', latent_shape=(),
                          output_range=(-1.0, 1.0))
  config.model.update(init='mimicry', hat_width=32)
  for name in ('langevin', 'sampling'):
    config[name].update(steps=20, prior_sigma=0.25, max_drift=2.5)
  config.ddls.update(steps=300, step_size=0.3)
  config.optim.hat_lr = 1e-5
  config.training.update(batch_size=32, num_steps=4000, checkpoint_every=500, sample_every=250,
                         num_grid_samples=64)
  return config_lib.sized(config, size)
