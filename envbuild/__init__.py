"""envbuild: a working, reproducible CUDA training stack from the driver your nodes already run."""

__version__ = "0.1.0"
