"""Specs: typed, validated inputs in SI units (GPUs, precisions, models)."""
