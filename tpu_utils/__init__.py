"""Distribution strategy and TPU/cluster setup from command-line flags."""
from tpu_utils.strategy import make_strategy, use_logical_cpus  # noqa: F401
