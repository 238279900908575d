"""tf_hat_ebm: Hat EBM (Hill et al., NeurIPS 2022) in TensorFlow 2 / Keras."""
__version__ = '0.1.0'
