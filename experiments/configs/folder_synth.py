"""Synthesis Hat EBM on your own images, sized for a laptop CPU: docs/your_data.md.

  python experiments/train.py --config=folder_synth --config.data.name=folder:my_images
The flags to change first: data.name (folder:<path> of PNG/JPEG files, or array:<path> of an
.npy/.npz), data.image_size (16, 32, 64 or 128) and data.channels (1 or 3), training.num_steps.
A folder larger than memory: --config.data.cache=False (the images are then decoded as read).
The settings are the digits synthesis's (digits_synth.py) at 32x32 RGB: 20-step chains at
T 1e-8, a 1,000-entry bank, batch 32, a grid every 250 steps.
"""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config(size=None):
  config = registry.defaults('synthesis')
  config.name = 'folder_synth'
  config.data.update(name='folder:my_images', image_size=32, channels=3, random_flip=True)
  config.model.update(init='mimicry', hat_width=32, gen_width=64)
  config.langevin.update(steps=20, temperature=1e-8, max_drift=0.5)
  config.sampling.update(steps=20, temperature=1e-8, max_drift=0.5, init_scale=0.0)
  config.training.update(batch_size=32, num_steps=10_000, data_eps=0.03, bank_size=1000,
                         checkpoint_every=500, sample_every=250, num_grid_samples=64)
  return config_lib.sized(config, size)
