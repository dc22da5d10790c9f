"""The golden CI files' cases, which several test modules read: each golden file's spec and the generator's
keyword arguments (tests/unit/test_github_workflow.py and test_gitlab_ci.py compare the files byte for
byte; test_ci_gates.py reads the gates of each back)."""

from __future__ import annotations

from tests.helpers.paths import EXAMPLES, GOLDEN
from tests.helpers.specs import TORCH_EXAMPLE as TORCH

GITHUB_CASES = {  # golden file -> (spec, keyword arguments)
    "torch": (TORCH, {}),
    "tf": (EXAMPLES / "tensorflow-base-image" / "envbuild.toml", {}),
    "jax": (EXAMPLES / "jax-conda" / "envbuild.toml", {}),
    "two": (GOLDEN / "ci" / "two.toml", {}),
    "two-labels": (GOLDEN / "ci" / "two.toml", {"gpu_labels": ["gpu-pool", "a b"]}),
    "two-nolabels": (GOLDEN / "ci" / "two.toml", {"gpu_labels": []}),
    "two-staging": (GOLDEN / "ci" / "two.toml", {"staging": "docker.io/acme/staging"}),
    "cpu": (GOLDEN / "ci" / "cpu.toml", {"spec_path": "ci/env build.toml"}),
    "hub": (GOLDEN / "ci" / "hub.toml", {"staging": "quay.io/acme/stage"}),
    "platforms": (GOLDEN / "ci" / "platforms.toml", {}),  # issue 19: arm64 builds on arm64 runners
    "platforms-qemu": (GOLDEN / "ci" / "platforms.toml", {"qemu": True}),
    # issue 20: envbuild's attestations, signed with a key from a repository secret
    "two-signed": (GOLDEN / "ci" / "two.toml", {"sign_key_secret": "ENVBUILD_SIGN_KEY"}),
    "platforms-signed": (GOLDEN / "ci" / "platforms.toml", {"sign_key_secret": "ENVBUILD_SIGN_KEY"}),
    "sealed-pinned": (
        GOLDEN / "ci" / "sealed" / "envbuild.toml",
        {
            "spec_path": "ci/sealed/envbuild.toml",
            "action_pins": str(GOLDEN / "ci" / "action-pins.txt"),
            "base_image": "registry.local:5000/mirror/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
            "matrix_path": "ci/matrix",
            "install": "envbuild==0.1.0",
        },
    ),
}

SEALED = GOLDEN / "ci" / "sealed" / "envbuild.toml"
GITLAB_CASES = {  # golden file -> (spec, keyword arguments)
    "gitlab-torch": (TORCH, {}),
    "gitlab-two": (GOLDEN / "ci" / "two.toml", {}),
    "gitlab-cpu": (GOLDEN / "ci" / "cpu.toml", {"spec_path": "ci/env build.toml"}),
    "gitlab-sealed": (
        SEALED,
        {
            "spec_path": "ci/sealed/envbuild.toml",
            "gpu_tags": ["nvidia", "k8s pool"],
            "base_image": "registry.local:5000/mirror/cuda:12.4.1-cudnn-runtime-ubuntu22.04",
            "matrix_path": "ci/matrix",
            "install": "envbuild==0.1.0",
            "staging": "ghcr.io/acme/staging",
        },
    ),
}
