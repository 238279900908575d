"""A kind defined outside tf_hat_ebm: synthesis whose generator stays at its initial weights.

Only the hat network trains (HatTask.ebm_step); the chain is the conditional one of synthesis.
config.experiment = 'toykind.frozen_synthesis' names this module, whose KIND the registry reads.
"""
from tf_hat_ebm import flops as flops_lib
from tf_hat_ebm import optim
from tf_hat_ebm import registry
from tf_hat_ebm.tasks import base
from tf_hat_ebm.tasks import synthesis


class FrozenGeneratorSynthesisTask(base.HatTask):
  metric_names = ('energy_diff', 'ebm_loss', 'hat_grad_norm', 'residual_grad_norm',
                  'residual_abs', 'energy_pos', 'energy_neg')

  def build(self):
    self.hat, self.generator, self.precision, self.precision_reason = synthesis.networks(
        self.config, self.strategy)
    self.networks = dict(hat=self.hat, generator=self.generator)  # G saved, never updated
    self.adam('hat', self.hat.trainable_variables,
              optim.network_schedule(self.config.optim, 'hat'))

  def replica_step(self, images):
    return self.ebm_step(images)[2]


def step_flops(config, h, g, batch, steps):  # a flops.StepFlops
  """The conditional chain with one G(Z), then the EBM update: no generator update."""
  del config
  chain = flops_lib.sampler_flops(h, g, batch, steps)
  return chain + 6 * batch * h, chain


KIND = registry.Kind(
    'toykind.frozen_synthesis', 'toykind.frozen_synthesis_config:get_config',
    'toykind.frozen_synthesis:FrozenGeneratorSynthesisTask',
    inference='tf_hat_ebm.tasks.synthesis:inference_model',
    export='tf_hat_ebm.export:ConditionalHatEBMModule', structural=('langevin.temperature',),
    # What the tools ask of it, each typed by its tool (registry.Kind lists them).
    hooks=dict(flops='toykind.frozen_synthesis:step_flops',  # flops.StepFlops
               samplers='tf_hat_ebm.evaluation.samplers:synthesis'))  # samplers.Samplers
