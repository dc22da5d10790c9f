"""Real services on loopback that the tests and the benchmarks share: a Python package index built from
wheels (pyindex), a server of recorded HTTP answers (upstream), and the recorded PyPI, PyTorch-index and
nvidia/cuda answers of `envbuild matrix refresh` (recorded).

Standard library and envbuild only. Not part of the installed tool: the wheel leaves this package out
(pyproject.toml), and nothing in envbuild imports it.
"""
