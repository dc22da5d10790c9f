"""`envbuild matrix refresh`: read PyPI, the PyTorch indexes and the nvidia/cuda tag list, and propose
matrix rows (and, with --write, edit the files).
"""
