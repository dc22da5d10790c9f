"""`envbuild render --apptainer`: an Apptainer definition file (envbuild.def) next to each Dockerfile,
for sites that build SIF files themselves from the image envbuild built and pushed.

The definition starts from the candidate by digest, never by tag: render cannot know the digest (the
image is built after it), so `From:` holds Apptainer's build-time variable `{{ digest }}`, and the site
passes the digest `envbuild build --push` printed: `apptainer build --build-arg digest=sha256:...
train.sif envbuild.def`. With no --build-arg the build stops (the variable has no default), so a SIF is
never built from whatever a tag points at. Syntax (header keywords Bootstrap/From, the %labels,
%runscript and %test sections, and `{{ VAR }}` build-time variables, Apptainer >= 1.2):
https://apptainer.org/docs/user/main/definition_files.html

- %labels carries the io.envbuild.* labels render wrote into the Dockerfile (one `KEY VALUE` line
  each), so `apptainer inspect` shows the same facts as `docker inspect`;
- %runscript runs what it is given (`apptainer run x.sif python train.py`), as the Docker image's
  entrypoint-less CMD does;
- %test runs the smoke program as the spec's [smoke] says. `apptainer build` runs %test at the end of
  a build, on the build host; a GPU smoke step needs a GPU node: build with `--notest` and run
  `apptainer test --nv x.sif` on the GPU node (docs/ci.md).

A label value is written as the rest of its line, so a value that Apptainer would read as something
else (a `{{` or `}}`, which it expands) is refused with a UsageError before anything is written.
"""

from __future__ import annotations

from envbuild.errors import UsageError
from envbuild.plan.plan import Plan
from envbuild.smoke import smoke_command
from envbuild.spec.model import Spec

DEF_FILE = "envbuild.def"
DIGEST_VARIABLE = "digest"


def definition(plan: Plan, spec: Spec, target: str) -> str:
    """The envbuild.def text for one rendered context."""
    smoke = spec.smoke
    sif = target.replace("/", "-") + ".sif"  # <target>/<arch> for one platform of several
    label_lines = "".join(f"    {key} {label_value(key, value)}\n" for key, value in plan.labels)
    test = " ".join(smoke_command(smoke.device, smoke.steps, smoke.precision))
    return (
        f"# envbuild render --apptainer: target {target} ({plan.platform}). Build the SIF from the pushed\n"
        f"# candidate, by digest (Apptainer >= 1.2):\n"
        f"#   apptainer build --build-arg {DIGEST_VARIABLE}=sha256:<digest> {sif} {DEF_FILE}\n"
        + (
            "# %test needs a GPU: on a build host without one add --notest, then on a GPU node run\n"
            f"#   apptainer test --nv {sif}\n"
            if smoke.device == "gpu"
            else ""
        )
        + "Bootstrap: docker\n"
        f"From: {spec.image.repository}@{{{{ {DIGEST_VARIABLE} }}}}\n"
        "\n%labels\n"
        f"{label_lines}"
        "\n%runscript\n"
        '    exec "$@"\n'
        "\n%test\n"
        f"    exec {test}\n"
    )


def label_value(key: str, value: str) -> str:
    """A label value as the rest of a %labels line: one printable line, no template braces."""
    if not value.isprintable() or "{{" in value or "}}" in value:
        raise UsageError(
            f"[image] labels {key} = {value!r}: an Apptainer %labels value must be one printable line "
            "without '{{' or '}}' (Apptainer expands those as build-time variables)",
            fix="change the label's value in the spec, or render without --apptainer",
        )
    return value


def check_labels(spec: Spec) -> None:
    """The spec's own labels (the only ones a user writes), checked before render writes anything."""
    for key, value in spec.image.labels:
        label_value(key, value)
