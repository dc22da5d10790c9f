"""The io.envbuild.* image labels: what render writes, what promote adds, what doctor and the registry
side of promotion read. One list, so a writer and a reader can never spell a name two ways.

Spec files may not set labels under PREFIX (spec.validate.label_key): only envbuild writes them.
"""

from __future__ import annotations

PREFIX = "io.envbuild."

# Written into every image by render (the stack it was built for).
VERSION = PREFIX + "version"
TARGET = PREFIX + "target"
STRATEGY = PREFIX + "strategy"
FRAMEWORK = PREFIX + "framework"
FRAMEWORK_VERSION = PREFIX + "framework-version"
VARIANT = PREFIX + "variant"
CUDA = PREFIX + "cuda"
CUDNN = PREFIX + "cudnn"
NCCL = PREFIX + "nccl"
PYTHON = PREFIX + "python"
MIN_DRIVER = PREFIX + "min-driver"
COMPAT = PREFIX + "compat"
GPU_ARCH = PREFIX + "gpu-arch"
SPEC_DIGEST = PREFIX + "spec-digest"
PLATFORM = PREFIX + "platform"  # linux/amd64, linux/arm64: what the image was built, locked and verified for
# ... and one per [smoke] setting of the spec (spec.smokelabels): io.envbuild.spec.smoke.steps=20, so
# `envbuild verify IMAGE` smokes an image with the settings it was rendered for. Not under smoke.: those
# are what promote says about the smoke step that did run.
SPEC_SMOKE = PREFIX + "spec.smoke."

# Added by promote to an image whose smoke step passed (a label-only image on top of the built one).
VERIFIED = PREFIX + "verified"
SMOKE_DEVICE = PREFIX + "smoke.device"
SMOKE_REPORT_DIGEST = PREFIX + "smoke.report-digest"
SMOKE_FRAMEWORK = PREFIX + "smoke.framework"
# ... and one per GPU the audit judged: io.envbuild.audit.sm_90=native|same-major|ptx-only (the worst
# verdict across the framework's libraries; none for a GPU whose libraries have no device code)
AUDIT = PREFIX + "audit."


def spec_smoke_label(key: str) -> str:
    """ "steps" -> "io.envbuild.spec.smoke.steps"."""
    return SPEC_SMOKE + key


def audit_label(gpu_key: str) -> str:
    """ "sm_90" -> "io.envbuild.audit.sm_90"."""
    return AUDIT + gpu_key


# On the throwaway containers verify runs, so they can be found and cleaned up.
ROLE = PREFIX + "role"
