"""The paper's published numbers and settings, as data (Hill et al., NeurIPS 2022).

Tables are numbered and titled as in the paper: Table 1 refinement of an SN-GAN, Table 2 the
synthesis FID table, Table 3 OOD detection (AUROC). Every FID is Inception FID, mean ± std over
3 runs (the paper's checklist). Numbers are (mean, std); std None where the paper gives none.
The appendix's hyperparameter tables are unnumbered; SETTINGS holds them per experiment.
"""

TABLES = {
    1: dict(label='tab:refine', key='refinement',
            title='Improvement in FID by refining samples from a fixed SN-GAN generator'),
    2: dict(label='tab:fid_table', key='synthesis',
            title='Comparison of FID scores among representative generative models'),
    3: dict(label='tab:ood_table', key='ood',
            title='Comparison of OOD scores (AUROC) among representative models'),
}
# The paper's figures that the reproduction's checks and figures stand for.
FIGURES = {
    'paths': 'Figure 3 (shortrun Langevin paths of each kind)',
    'historical': 'Figure 4, appendix "Historical Generator Update"',
    'stability': 'Figure 5, appendix "Importance of Residual Image for Stability"',
}

# Table 1: FID of the SN-GAN G(Z0), DDLS and the Hat EBM from it.
REFINEMENT = {
    'cifar10': {'generator': (18.58, 0.08), 'ddls': (14.59, 0.07), 'hat_ebm': (14.04, 0.11)},
    'celeba': {'generator': (6.13, 0.03), 'ddls': (6.06, 0.01), 'hat_ebm': (5.98, 0.02)},
}
# Table 2: the Hat EBM's synthesis FID per paper config (the generator alone is not reported).
SYNTHESIS = {'cifar10_synth': (19.30, 0.15), 'celeba_synth': (11.57, 0.04),
             'imagenet128_synth': (40.24, 0.18), 'imagenet128_synth_large': (29.37, 0.15)}
# Table 2's peers the text compares with (no std given).
SYNTHESIS_PEERS = {'cifar10_synth': {'SN-GAN (reimplementation)': 18.6},
                   'celeba_synth': {'SN-GAN': 6.1},
                   'imagenet128_synth': {'SS-GAN': 43.9, 'SN-GAN': 65.7},
                   'imagenet128_synth_large': {'SS-GAN, scaled': 23.4}}
# Section 4.2 (not a table): the retrofit of the CIFAR-10 autoencoder's decoder.
RETROFIT = {'hat_ebm': (26.01, 0.09)}
# Table 3: CIFAR-10 synthesis model, test split vs each set, AUROC (no std).
OOD = {'svhn_cropped': (0.92, None), 'cifar100': (0.87, None), 'celeb_a': (0.94, None)}
# What the paper says of each ablation (no number: a figure or a sentence).
ABLATIONS = {
    'current': 'fails: little diversity, unstable (' + FIGURES['historical'] + ')',
    'coop': 'fails without batch norm (' + FIGURES['historical'] + ')',
    'coop_bn': 'works with batch norm, samples stay similar (' + FIGURES['historical'] + ')',
    'noresidual': 'training becomes unstable (' + FIGURES['stability'] + ')',
}


def relative(new, old):
  """(new - old) / old: -0.24 is a 24% lower FID."""
  return (new - old) / old


def _refinement_effects(rows):
  gen, ddls, hat = rows['generator'][0], rows['ddls'][0], rows['hat_ebm'][0]
  return {'hat_ebm_vs_generator': relative(hat, gen), 'ddls_vs_generator': relative(ddls, gen),
          'hat_ebm_vs_ddls': relative(hat, ddls),
          # how much of the Hat EBM's gain over the SN-GAN DDLS recovers
          'ddls_share_of_gain': (gen - ddls) / (gen - hat)}


# Derived from the tables: CIFAR-10 -24.4% (DDLS -21.5%, 88% of the gain); CelebA -2.4% (DDLS
# -1.1%, 47% of the gain).
EFFECTS = {data: _refinement_effects(rows) for data, rows in REFINEMENT.items()}

# The appendix's hyperparameter tables: config field -> value per experiment (None: "None").
# The digits configs are compared with the CIFAR-10 column of their kind (DIGITS_COLUMN).
SETTING_NAMES = {
    'training.num_steps': 'training steps', 'training.batch_size': 'batch size',
    'training.data_eps': 'data epsilon', 'optim.hat_lr': 'EBM learning rate (Adam)',
    'optim.hat_clip_norm': 'EBM gradient clip', 'langevin.step_size': 'Langevin (image) epsilon',
    'langevin.latent_step_size': 'latent epsilon', 'langevin.steps': 'MCMC steps',
    'langevin.temperature': 'MCMC temperature', 'langevin.prior_sigma': 'prior sigma',
    'training.bank_size': 'persistent bank size', 'optim.gen_lr': 'generator learning rate (Adam)',
    'perf.precision': 'precision',
}
_SYNTH = ('training.num_steps', 'training.batch_size', 'training.data_eps', 'optim.hat_lr',
          'optim.hat_clip_norm', 'langevin.step_size', 'langevin.steps', 'langevin.temperature',
          'training.bank_size', 'optim.gen_lr', 'perf.precision')
_JOINT = ('training.num_steps', 'training.batch_size', 'training.data_eps', 'optim.hat_lr',
          'langevin.step_size', 'langevin.latent_step_size', 'langevin.steps',
          'langevin.temperature', 'langevin.prior_sigma', 'perf.precision')


def _settings(fields, *values):
  return dict(zip(fields, values))


# The paper and the release trained in float32 (no mixed precision anywhere in the release).
SETTINGS = {
    'celeba_synth': _settings(_SYNTH, 50_000, 128, 1e-3, 1e-4, None, 5e-4, 50, 1e-8, 10_000,
                              1e-4, 'float32'),
    'cifar10_synth': _settings(_SYNTH, 75_000, 128, 1e-3, 1e-4, None, 5e-4, 50, 1e-3, 10_000,
                               1e-4, 'float32'),
    'imagenet128_synth': _settings(_SYNTH, 300_000, 128, 1e-3, 1e-4, 50.0, 5e-4, 50, 1e-8,
                                   10_000, 5e-5, 'float32'),
    'cifar10_retrofit': _settings(_JOINT, 30_000, 128, 1e-3, 1e-4, 5e-4, 1e-3, 100, 1e-3, 0.1,
                                  'float32'),
    'celeba_refine': _settings(_JOINT, 20_000, 128, 1e-3, 1e-5, 1e-4, 5e-3, 100, 1e-6, None,
                               'float32'),
    'cifar10_refine': _settings(_JOINT, 20_000, 128, 1e-3, 1e-5, 1e-4, 5e-3, 250, 1e-3, 0.25,
                                'float32'),
}
SETTINGS['imagenet128_synth_large'] = SETTINGS['imagenet128_synth']  # "scaled": widths only
DIGITS_COLUMN = {'digits_synth': 'cifar10_synth', 'digits_refine': 'cifar10_refine',
                 'digits_retrofit': 'cifar10_retrofit', 'digits_sngan': 'cifar10_sngan'}
# Where the appendix's tables are silent: the release's code (its FID chains, drift clip, latents),
# Mimicry's SN-GAN and Che et al.'s DDLS, as the paper configs of this package carry them.
RELEASE_SETTINGS = {
    'cifar10_synth': {'sampling.steps': 125, 'langevin.max_drift': 2.5,
                      'sampling.max_drift': None, 'sampling.init_scale': 0.01},
    'cifar10_refine': {'sampling.steps': 350, 'langevin.max_drift': 2.5,
                       'sampling.max_drift': None, 'optim.hat_lr_boundaries': (),
                       'ddls.steps': 100, 'ddls.step_size': 0.1},
    'cifar10_retrofit': {'sampling.steps': 125, 'langevin.max_drift': 2.5,
                         'sampling.max_drift': None, 'sampling.init_scale': 0.01,
                         'langevin.latent_sphere': False},
    'cifar10_sngan': {'training.num_steps': 100_000, 'training.batch_size': 64,
                      'optim.lr_decay': 'linear', 'training.n_dis': 5,
                      'model.gen_width': 256, 'model.z_dim': 128, 'training.diffaugment': '',
                      'training.gen_ema': 0.0},
}
SETTING_NAMES.update({
    'sampling.steps': 'MCMC steps of the FID chain', 'langevin.max_drift': 'drift clip (training)',
    'sampling.max_drift': 'drift clip (FID chain)', 'sampling.init_scale': 'FID chain Y0 scale',
    'optim.hat_lr_boundaries': 'EBM learning-rate drops (steps)',
    'langevin.latent_sphere': 'Z kept on the decoder\'s sphere', 'ddls.steps': 'DDLS steps',
    'ddls.step_size': 'DDLS step size', 'optim.lr_decay': 'learning-rate schedule',
    'training.n_dis': 'D steps per G step', 'model.gen_width': 'generator width',
    'model.z_dim': 'latent size', 'training.diffaugment': 'DiffAugment on D\'s inputs',
    'training.gen_ema': 'moving average of G\'s weights (decay)'})


def appendix_settings(config_name, release=False):
  """(appendix column, {field: value}) the config is compared with, or (None, {}); `release`:
  with RELEASE_SETTINGS where the appendix is silent."""
  column = DIGITS_COLUMN.get(config_name, config_name)
  extra = RELEASE_SETTINGS.get(column, {}) if release else {}
  settings = dict(SETTINGS.get(column, {}), **extra)
  return (column, settings) if settings else (None, {})
