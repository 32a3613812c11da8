"""gpuplan: what can I run, on which GPU, how fast and at what cost."""

__version__ = "0.1.0"
