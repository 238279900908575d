r"""Packs a finished training workdir as a ready-made model shipped in tf_hat_ebm/models/.

  python benchmarks/make_pretrained.py --from=runs/repro/sngan_s0 --name=digits_sngan \
      --summary='SN-GAN on the digits' --commit=$(git rev-parse HEAD)
  python benchmarks/make_pretrained.py --from=runs/repro/refinement_s0 --name=digits_refine \
      --generator=digits_sngan --summary='...' --commit=...

Keeps the networks at --checkpoint (default: the latest) and config.json; records every file's
sha256, the training command (from the reproduction stage's done.json beside the workdir, or
--command) and --commit in tf_hat_ebm/models/manifest.json. A joint run's generator is packed
first, under the name given as --generator. The source workdir is only read.
"""
import json
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from absl import app  # noqa: E402
from absl import flags  # noqa: E402

flags.DEFINE_string('from', None, 'A finished training workdir.', required=True)
flags.DEFINE_string('name', None, 'The shipped model\'s name (--model of tf-hat-ebm-pretrained).',
                    required=True)
flags.DEFINE_string('summary', None, 'What the model is, in a few words.', required=True)
flags.DEFINE_string('commit', None, 'The commit of the code that trained it.', required=True)
flags.DEFINE_string('command', None, 'The command that trained it (default: the training '
                    'command in <from>/done.json, which must exist then).')
flags.DEFINE_string('generator', None, 'A joint run: the shipped model its generator is.')
flags.DEFINE_integer('checkpoint', None, 'The step to ship (default: the latest).')
flags.DEFINE_string('models_dir', None, 'Where the models go (default: tf_hat_ebm/models).')
FLAGS = flags.FLAGS


def training_command(workdir):
  """The training command of the reproduction stage that made `workdir`, from its done.json."""
  path = os.path.join(workdir, 'done.json')
  if not os.path.exists(path):
    raise SystemExit(f'error: {path} does not exist: the run is not finished (or pass --command)')
  with open(path) as f:
    record = json.load(f)
  trains = [c for c in record['commands'] if ' experiments/train' in c]
  if not trains:
    raise SystemExit(f'error: {path} names no training command: pass --command')
  return f'{trains[0]} (stage {record["stage"]} of experiments/reproduce.py, finished ' \
         f'{record["finished"]})'


def main(_):
  from tf_hat_ebm import pretrained  # pylint: disable=g-import-not-at-top
  source = dict(command=FLAGS.command or training_command(FLAGS['from'].value),
                commit=FLAGS.commit)
  meta = pretrained.pack(FLAGS['from'].value, FLAGS.name, FLAGS.summary, source,
                         FLAGS.models_dir or pretrained.MODELS_DIR, FLAGS.checkpoint,
                         FLAGS.generator)
  size = sum(f['bytes'] for f in meta['files'].values())
  print(f'packed {FLAGS.name}: {meta["kind"]} step {meta["step"]}, {len(meta["files"])} files, '
        f'{size:,} bytes')


if __name__ == '__main__':
  app.run(main)
