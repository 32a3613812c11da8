"""A model as gpuplan sees it: its parameter tensors, read from a Hugging Face config.json.

- spec.py: ModelSpec (with ParamGroup, AttentionLayer), what the estimators read;
- reader.py: model_from_config, config.json -> ModelSpec;
- families.py: the family table, one record per model_type (record.py: what a record holds);
- builders/: how each family's config becomes parameter tensors;
- config.py: typed access to a config and the bounds on it; groups.py: what a builder collects.
"""

from gpuplan.specs.model.families import FAMILIES, SUPPORTED_MODEL_TYPES, family_of
from gpuplan.specs.model.reader import model_from_config
from gpuplan.specs.model.record import Family
from gpuplan.specs.model.spec import ROLES, AttentionLayer, ModelSpec, ParamGroup

__all__ = [
    "FAMILIES",
    "ROLES",
    "SUPPORTED_MODEL_TYPES",
    "AttentionLayer",
    "Family",
    "ModelSpec",
    "ParamGroup",
    "family_of",
    "model_from_config",
]
