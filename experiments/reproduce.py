r"""The paper in one command: every table and figure as resumable stages, and a report.

  python experiments/reproduce.py                        # digits, 3 seeds, on a CPU
  python experiments/reproduce.py --dry_run              # every stage's commands and configs
  python experiments/reproduce.py --scale=paper --tpu=my-tpu --data_dir=gs://bucket/tfds \
      --inception_path=/data/inception --out=/data/reproduce   # the paper configs, float32

Stages (each in <out>/<stage>/, the experiment scripts run in subprocesses from <out>, so each is
exactly what a user runs): synthesis per seed (Table 2); SN-GAN, then refinement with its SN-GAN,
DDLS and Hat EBM rows (Table 1; --release_sngan imports the published CIFAR-10 SN-GAN instead of
retraining it); autoencoder, then retrofit; OOD AUROC of the synthesis model (Table 3; at the
digits scale also a model of digits 0-4 scored on the others); the ablations (generator trained on
the current samples, which is cooperative learning without batch norm, cooperative learning with
it, refinement without the residual Y); figures (Langevin paths, sample grids, the baselines
beside the Hat EBM); at the digits scale the FID's calibration at its sample size. A finished
stage leaves <stage>/done.json and is skipped on the next run; an interrupted one resumes.
Independent stages run --jobs at a time. The report: <out>/report.md, report.json, figures/
(docs/reproduce.md).
The same program as tf-hat-ebm-reproduce: tf_hat_ebm.reproduction.pipeline.reproduce_command.
"""
from tf_hat_ebm import cli  # TensorFlow-free: --help before TensorFlow loads, quiet TF logs

if __name__ == '__main__':
  cli.main('reproduce')
