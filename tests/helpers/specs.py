"""Spec files several test modules read."""

from __future__ import annotations

from tests.helpers.paths import EXAMPLES

TORCH_EXAMPLE = EXAMPLES / "torch-wheels" / "envbuild.toml"  # H100 and L4, one target

TWO_TARGETS = """\
[stack]
driver = "550"
framework = "torch"
strategy = "wheels"
os = "ubuntu22.04"

[image]
repository = "registry.example.com:5000/team/train"

[[target]]
name = "h100"
gpus = ["H100"]

[[target]]
name = "l4.infer"
gpus = ["L4"]
"""
