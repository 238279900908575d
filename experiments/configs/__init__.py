"""The experiments: one file each, `get_config()` = its kind's defaults (tf_hat_ebm/config.py)
plus only what differs. Files load by path (`--config=experiments/configs/<name>.py`) and import
nothing but tf_hat_ebm.config, so reading a config never imports TensorFlow."""
