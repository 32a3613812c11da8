"""The builders: each reads one group of families' config.json into parameter tensors, as the
reference implementation (transformers) creates them. The family table (families.py) names each
model_type's builder."""
