"""`envbuild doctor --image`: what the image's own preflight guard would decide on this host.

The guard (envbuild.preflight) runs inside the image at every Python start; doctor runs the same judge
on the host, before anything is started, with the facts the image's labels carry (the driver floor,
the compiled architectures, the compat mode, the platform) and this envbuild's GPU catalogue for that
platform (the part render puts in the image), fed with what nvidia-smi says: the driver, and each GPU's
name and compute capability. So doctor and the image cannot disagree about a node.
"""

from __future__ import annotations

from envbuild._util.record import TYPE_CHECKING
from envbuild.host.check import Check
from envbuild.oci import labels as L
from envbuild.plan.preflight import catalogue_for
from envbuild.preflight import facts_document, judge

if TYPE_CHECKING:
    from envbuild.host.nvsmi import SmiReport
    from envbuild.matrix.model import Matrix


def image_facts_from_labels(matrix: Matrix, labels: dict[str, str]) -> dict | None:
    """The guard's facts for an envbuild image, from its labels; None for an image without them."""
    min_driver, cuda = labels.get(L.MIN_DRIVER), labels.get(L.CUDA)
    if not min_driver or not cuda:
        return None
    platform = labels.get(L.PLATFORM) or "linux/amd64"
    stack = (
        f"{labels.get(L.FRAMEWORK, 'the framework')} {labels.get(L.FRAMEWORK_VERSION, '')} "
        f"({labels.get(L.VARIANT, '?')}, CUDA {cuda})"
    )
    return facts_document(
        stack=" ".join(stack.split()),
        cuda=cuda,
        compat=labels.get(L.COMPAT, "native"),
        min_driver=min_driver,
        arch=labels.get(L.GPU_ARCH, ""),
        platform=platform,
        gpus=catalogue_for(matrix, platform),
    )


def preflight_check(matrix: Matrix, smi: SmiReport | None, ref: str, labels: dict[str, str]) -> Check | None:
    """The guard's verdict on this host as a doctor check (None: not an envbuild image)."""
    facts = image_facts_from_labels(matrix, labels)
    if facts is None:
        return None
    name = f"image {ref} preflight"
    driver = smi.driver_version if smi else None
    gpus = [(str(g.index), g.name, g.compute_capability) for g in smi.gpus] if smi else []
    document = judge(facts, driver, gpus)
    verdict = document["verdict"]
    if verdict == "no-driver":
        return Check(
            name=name,
            status="skip",
            evidence="no NVIDIA driver visible here: the image's guard would warn and run on the CPU",
            fix=None,
        )
    if verdict == "stop":
        return Check(
            name=name,
            status="fail",
            evidence="its preflight guard would stop every Python program here (exit 78): "
            + "; ".join(document["problems"]),
            fix="; ".join(document["fixes"]),
        )
    if verdict == "unchecked":
        return Check(
            name=name,
            status="warn",
            evidence="; ".join(document["notes"]),
            fix="add the GPU to the matrix (matrix/gpus.toml, then `envbuild matrix check`) and rebuild",
        )
    covered = ", ".join(f"{g['name']} ({g['cc']}, {g['kernels']})" for g in document["found"]["gpus"])
    return Check(
        name=name,
        status="ok",
        evidence=f"its preflight guard lets it start: driver {driver} >= {facts['min_driver']}"
        + (f"; {covered}" if covered else ""),
        fix=None,
    )
