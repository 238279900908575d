"""Evaluation of trained Hat EBMs: FID (Inception or a dataset-trained classifier), OOD AUROC."""
