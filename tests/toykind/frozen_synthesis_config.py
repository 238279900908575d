"""The frozen-generator synthesis kind's config: the digits synthesis run without a generator
update (no bank)."""
from tf_hat_ebm import config as config_lib
from tf_hat_ebm import registry


def get_config():
  config = config_lib.digits(registry.defaults('synthesis'), 'frozen_synthesis', steps=400)
  config.experiment = 'toykind.frozen_synthesis'
  for field in ('bank_size', 'gen_loss_factor', 'generator_update'):
    del config.training[field]
  return config
