"""Scale out past one machine: a `docker buildx bake` file and a GitHub Actions workflow for a spec.

The bake file builds every target's rendered context (`envbuild render` writes `<out>/<target>/`) as a
*candidate* (`<repository>:candidate-<target>`): the image is a candidate until `envbuild verify` has
run its smoke step, and only `envbuild promote` gives it the spec's tags.

The workflow runs the same pipeline across runners: lock-check -> build (CPU runner, push to a staging
repository, by digest) -> verify (GPU runners, one job per target and GPU capability) -> promote
(registry-side, `envbuild promote REPO@sha256:... --to TAG`). A matrix job cannot hand one output per
matrix entry to the next job (the last entry to finish wins), so each build writes its digest to an
artifact, digest-<target>, that verify and promote download.

Bake's JSON form and attribute names follow the Bake file reference:
https://docs.docker.com/build/bake/reference/
(BAKE_SCHEMA below is written from that page: the document publishes no JSON Schema of its own.)

No YAML library is used: the workflow is written by a small deterministic emitter (`to_yaml`) that
quotes every scalar YAML could read as anything but the string meant ("on", "3.11", "true", ...).
"""

from __future__ import annotations

import json
import re

from envbuild import __version__
from envbuild.errors import UsageError
from envbuild.matrix.model import Matrix
from envbuild.render.plan import build_plan
from envbuild.spec.model import Spec

PLATFORM = "linux/amd64"
DEFAULT_GPU_LABELS = ("self-hosted", "gpu")
CPU_RUNNER = "ubuntu-latest"
PYTHON = "3.11"
OUT_DIR = "build"  # where the workflow renders (`envbuild render -o build`)
CHECKOUT = "actions/checkout@v4"
SETUP_PYTHON = "actions/setup-python@v5"
SETUP_BUILDX = "docker/setup-buildx-action@v3"
LOGIN = "docker/login-action@v3"
UPLOAD = "actions/upload-artifact@v4"
DOWNLOAD = "actions/download-artifact@v4"

_BAKE_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_DIGEST_RE = "^sha256:[0-9a-f]{64}$"

_STRING_LIST = {"type": "array", "items": {"type": "string"}}
_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_NULLABLE_STRING_MAP = {"type": "object", "additionalProperties": {"type": ["string", "null"]}}
# ssh, secret, output, cache-to, cache-from, attest and annotations are "composable": each item is the
# build flag's inline string (type=registry,ref=...) or, in newer buildx, the same thing as an object.
_COMPOSABLE_LIST = {"type": "array", "items": {"type": ["string", "object"]}}

BAKE_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$comment": "Written from https://docs.docker.com/build/bake/reference/ (JSON form of a Bake file).",
    "title": "docker buildx bake file, JSON form (the blocks and target attributes Bake documents)",
    "type": "object",
    "properties": {
        "group": {
            "type": "object",
            "propertyNames": {"pattern": _BAKE_NAME_RE.pattern},
            "additionalProperties": {"$ref": "#/$defs/group"},
        },
        "target": {
            "type": "object",
            "propertyNames": {"pattern": _BAKE_NAME_RE.pattern},
            "additionalProperties": {"$ref": "#/$defs/target"},
        },
        "variable": {"type": "object", "additionalProperties": {"type": "object"}},
        "function": {"type": "object", "additionalProperties": {"type": "object"}},
    },
    "additionalProperties": False,
    "$defs": {
        "group": {
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "targets": {"type": "array", "items": {"type": "string", "minLength": 1}},
            },
            "required": ["targets"],
            "additionalProperties": False,
        },
        "target": {
            "type": "object",
            "properties": {
                "args": _NULLABLE_STRING_MAP,  # null: use the Dockerfile's ARG default
                "annotations": _COMPOSABLE_LIST,
                "attest": _COMPOSABLE_LIST,
                "cache-from": _COMPOSABLE_LIST,
                "cache-to": _COMPOSABLE_LIST,
                "call": {"type": "string"},
                "context": {"type": "string"},
                "contexts": _STRING_MAP,
                "description": {"type": "string"},
                "dockerfile-inline": {"type": "string"},
                "dockerfile": {"type": "string"},
                "entitlements": _STRING_LIST,
                "extra-hosts": _STRING_MAP,
                "inherits": _STRING_LIST,
                "labels": _NULLABLE_STRING_MAP,
                "matrix": {"type": "object"},
                "name": {"type": "string"},
                "network": {"type": "string"},
                "no-cache-filter": _STRING_LIST,
                "no-cache": {"type": "boolean"},
                "output": _COMPOSABLE_LIST,
                "platforms": _STRING_LIST,
                "pull": {"type": "boolean"},
                "secret": _COMPOSABLE_LIST,
                "shm-size": {"type": "string"},
                "ssh": _COMPOSABLE_LIST,
                "tags": _STRING_LIST,
                "target": {"type": "string"},
                "ulimits": _STRING_LIST,
            },
            "additionalProperties": False,
        },
    },
}


# ---------------------------------------------------------------------------------------------- bake


def bake_target_name(name: str) -> str:
    """A spec target name as a bake target name (^[a-zA-Z0-9_-]+$): other characters become "-"."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", name)


def candidate_tag(repository: str, target: str) -> str:
    """Where a built, not yet verified image lives: `envbuild verify` finds it by this ref."""
    return f"{repository}:candidate-{target}"


def _bake_names(spec: Spec) -> dict[str, str]:
    names: dict[str, str] = {}
    for target in spec.targets:
        bake = bake_target_name(target.name)
        if bake in names.values():
            other = next(k for k, v in names.items() if v == bake)
            raise UsageError(
                f"{spec.path}: targets {other!r} and {target.name!r} are both {bake!r} as bake targets "
                "(bake allows only letters, digits, _ and -)",
                fix="rename one of the [[target]]s",
            )
        names[target.name] = bake
    return names


def bake_file(
    matrix: Matrix, spec: Spec, *, out_dir: str = "build", cache_ref: str | None = None, lock=None
) -> dict:
    """The bake definition (JSON form) that builds every target's rendered context as a candidate.

    cache_ref: one registry cache ref for every target; default `<repository>:buildcache-<target>`.
    lock: an envbuild.lock (`envbuild.spec.lockfile.load_lock`) so the labels name the pinned base image, as
    the rendered Dockerfile does.
    """
    repository = spec.image.repository
    names = _bake_names(spec)
    targets: dict[str, dict] = {}
    for target in spec.targets:
        plan = build_plan(matrix, spec, target, lock=lock.target(target.name) if lock else None)
        cache = cache_ref or f"{repository}:buildcache-{target.name}"
        targets[names[target.name]] = {
            "context": f"{out_dir}/{target.name}",
            "dockerfile": "Dockerfile",
            "tags": [candidate_tag(repository, target.name)],
            "labels": dict(plan.labels),
            "cache-from": [f"type=registry,ref={cache}"],
            "cache-to": [f"type=registry,ref={cache},mode=max"],
            "platforms": [PLATFORM],
        }
    return {"group": {"default": {"targets": list(targets)}}, "target": targets}


def bake_json(
    matrix: Matrix, spec: Spec, *, out_dir: str = "build", cache_ref: str | None = None, lock=None
) -> str:
    """bake_file as docker-bake.json text: sorted keys, so the same inputs give the same bytes."""
    document = bake_file(matrix, spec, out_dir=out_dir, cache_ref=cache_ref, lock=lock)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


# ------------------------------------------------------------------------------------------ workflow


def registry_host(repository: str) -> str:
    """The registry a repository lives on: ghcr.io/acme/train -> ghcr.io; acme/train -> docker.io."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def gpu_runner_labels(matrix: Matrix, spec: Spec, target_name: str, gpu_labels: list[str]) -> list[list[str]]:
    """runs-on label sets for verifying one target: one per distinct capability of its GPUs.

    A runner must carry every label of a runs-on list, so a target for H100 and L4 nodes is verified
    twice, on [self-hosted, gpu, sm_90] and on [self-hosted, gpu, sm_89]; a target naming no GPU
    on any runner with the base labels.
    """
    from envbuild.matrix.versions import sm_name
    from envbuild.resolve.query import gpu_index, parse_gpu

    (target,) = spec.target(target_name)
    index = gpu_index(matrix)
    capabilities: list[str] = []
    for name in target.stack.gpus:
        label = sm_name(parse_gpu(name, matrix, index).cc)
        if label not in capabilities:
            capabilities.append(label)
    if not capabilities:
        return [list(gpu_labels)]
    return [[*gpu_labels, label] for label in capabilities]


def _python_steps() -> list[dict]:
    return [
        {"uses": SETUP_PYTHON, "with": {"python-version": PYTHON}},
        {"name": "Install envbuild", "run": f"pip install envbuild=={__version__}"},
    ]


def _login(host: str) -> dict:
    return {
        "name": f"Log in to {host}",
        "uses": LOGIN,
        "with": {
            "registry": host,
            "username": "${{ secrets.REGISTRY_USER }}",
            "password": "${{ secrets.REGISTRY_PASSWORD }}",
        },
    }


def _read_digest_steps() -> list[dict]:
    """Download digest-<target> (written by the build job) and expose it as steps.digest.outputs.digest."""
    return [
        {
            "name": "Download the candidate's digest",
            "uses": DOWNLOAD,
            "with": {"name": "digest-${{ matrix.target }}"},
        },
        {
            "name": "Read the candidate's digest",
            "id": "digest",
            "run": 'digest="$(cat "digest-${{ matrix.target }}.txt")"\n'
            f"if ! printf '%s' \"$digest\" | grep -Eq '{_DIGEST_RE}'; then\n"
            '  echo "::error::digest-${{ matrix.target }}.txt holds no sha256 digest: $digest"\n'
            "  exit 1\n"
            "fi\n"
            'echo "digest=$digest" >> "$GITHUB_OUTPUT"\n',
        },
    ]


def github_workflow(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
    staging: str | None = None,
) -> dict:
    """The CI workflow as a dict (see github_workflow_yaml for the file).

    spec_path: the spec's path in the repository. gpu_labels: the labels every GPU runner carries
    (default self-hosted, gpu; each verify job adds the sm_XY label of its GPU). staging: the
    repository candidates are pushed to (default the spec's repository; registry-side promotion
    copies a manifest within one registry).
    """
    labels = list(gpu_labels) if gpu_labels is not None else list(DEFAULT_GPU_LABELS)
    staging = staging or spec.image.repository
    targets = [t.name for t in spec.targets]
    plans = {t.name: build_plan(matrix, spec, t) for t in spec.targets}
    _bake_names(spec)  # the same names must also work as bake targets
    smoke = spec.smoke
    candidate = f"{staging}:candidate-${{{{ matrix.target }}}}-${{{{ github.sha }}}}"
    cache = f"{staging}:buildcache-${{{{ matrix.target }}}}"

    build_steps = [
        {"uses": CHECKOUT},
        *_python_steps(),
        {"uses": SETUP_BUILDX},
        _login(registry_host(staging)),
        {
            "name": "Render the build context",
            "run": f"envbuild render -f {spec_path} -o {OUT_DIR} --target ${{{{ matrix.target }}}}",
        },
        {
            "name": "Build and push the candidate",
            "id": "build",
            "run": "docker buildx build --push \\\n"
            f"  --platform {PLATFORM} \\\n"
            f"  --tag {candidate} \\\n"
            f"  --cache-from type=registry,ref={cache} \\\n"
            f"  --cache-to type=registry,ref={cache},mode=max \\\n"
            f"  --metadata-file {OUT_DIR}/metadata.json \\\n"
            f"  {OUT_DIR}/${{{{ matrix.target }}}}\n"
            "digest=\"$(python -c 'import json, sys; "
            f'print(json.load(open(sys.argv[1]))["containerimage.digest"])\' {OUT_DIR}/metadata.json)"\n'
            'echo "digest=$digest" >> "$GITHUB_OUTPUT"\n'
            'echo "$digest" > "digest-${{ matrix.target }}.txt"\n',
        },
        {
            "name": "Upload the digest for verify and promote",
            "uses": UPLOAD,
            "with": {
                "name": "digest-${{ matrix.target }}",
                "path": "digest-${{ matrix.target }}.txt",
                "if-no-files-found": "error",
            },
        },
        {
            "name": "Upload the build record",
            "if": "always()",
            "uses": UPLOAD,
            "with": {
                "name": "record-build-${{ matrix.target }}",
                "path": f"{OUT_DIR}/${{{{ matrix.target }}}}/\n{OUT_DIR}/metadata.json\n",
                "if-no-files-found": "ignore",
            },
        },
    ]

    if smoke.device == "gpu":
        verify_include = [
            {"target": name, "gpu": runner[-1], "runner": runner}
            for name in targets
            for runner in gpu_runner_labels(matrix, spec, name, labels)
        ]
    else:  # the spec's smoke step runs on CPU: any hosted runner will do
        verify_include = [{"target": name, "gpu": "cpu", "runner": [CPU_RUNNER]} for name in targets]
    verify_steps = [
        *_python_steps(),
        _login(registry_host(staging)),
        *_read_digest_steps(),
        {
            "name": f"Smoke training step ({smoke.device})",
            "env": {"IMAGE": f"{staging}@${{{{ steps.digest.outputs.digest }}}}"},
            "run": 'docker pull "$IMAGE"\n'
            f'envbuild verify "$IMAGE" --smoke-device {smoke.device} --steps {smoke.steps} '
            f"--precision {smoke.precision} --timeout {smoke.timeout} --report smoke.json\n",
        },
        {
            "name": "Upload the verify record",
            "if": "always()",
            "uses": UPLOAD,
            "with": {
                "name": "record-verify-${{ matrix.target }}-${{ matrix.gpu }}",
                "path": "smoke.json",
                "if-no-files-found": "ignore",
            },
        },
    ]

    hosts = list(dict.fromkeys([registry_host(staging), registry_host(spec.image.repository)]))
    promote_steps = [
        *_python_steps(),
        *(_login(host) for host in hosts),
        *_read_digest_steps(),
        {
            "name": "Download the verify records",
            "uses": DOWNLOAD,
            "with": {"pattern": "record-verify-${{ matrix.target }}-*", "path": "verify"},
        },
    ]
    for name in targets:
        to = " ".join(f"--to {tag}" for tag in plans[name].tags)
        promote_steps.append(
            {
                "name": f"Promote {name}",
                "if": f"matrix.target == '{name}'",
                "env": {"IMAGE": f"{staging}@${{{{ steps.digest.outputs.digest }}}}"},
                # every verify job passed (needs: verify); promote checks that a record names this image
                "run": f'envbuild promote "$IMAGE" {to} --report "$(ls verify/*/smoke.json | head -n 1)"',
            }
        )
    promote_steps.append(
        {
            "name": "Upload the promote record",
            "if": "always()",
            "uses": UPLOAD,
            "with": {
                "name": "record-promote-${{ matrix.target }}",
                "path": "digest-${{ matrix.target }}.txt\nverify/\n",
                "if-no-files-found": "ignore",
            },
        }
    )

    target_matrix = {"fail-fast": False, "matrix": {"target": targets}}
    return {
        "name": "envbuild",
        "on": {"push": {"branches": ["main"]}, "workflow_dispatch": {}},
        "permissions": {"contents": "read"},
        "jobs": {
            "lock-check": {
                "runs-on": CPU_RUNNER,
                "steps": [
                    {"uses": CHECKOUT},
                    *_python_steps(),
                    {
                        "name": "The lock matches spec and matrix",
                        "run": f"envbuild lock --check -f {spec_path}",
                    },
                ],
            },
            "build": {
                "needs": ["lock-check"],
                "runs-on": CPU_RUNNER,
                "strategy": target_matrix,
                "steps": build_steps,
            },
            "verify": {
                "needs": ["build"],
                "runs-on": "${{ matrix.runner }}",
                "strategy": {"fail-fast": False, "matrix": {"include": verify_include}},
                "steps": verify_steps,
            },
            "promote": {
                "needs": ["verify"],
                "runs-on": CPU_RUNNER,
                "strategy": target_matrix,
                "steps": promote_steps,
            },
        },
    }


def github_workflow_yaml(
    matrix: Matrix,
    spec: Spec,
    *,
    spec_path: str = "envbuild.toml",
    gpu_labels: list[str] | None = None,
    staging: str | None = None,
) -> str:
    """github_workflow as a .github/workflows/*.yml file."""
    workflow = github_workflow(matrix, spec, spec_path=spec_path, gpu_labels=gpu_labels, staging=staging)
    header = f"# Written by envbuild {__version__} from {spec_path}: regenerate rather than edit.\n"
    return header + to_yaml(workflow)


# -------------------------------------------------------------------------------------- YAML emitter

# Plain (unquoted) only when YAML 1.1 and 1.2 both read the text back as this same string.
_PLAIN_RE = re.compile(r"^[A-Za-z_/$][A-Za-z0-9_./@+=$,:{}()\[\]'\" -]*$")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _plain(text: str) -> bool:
    return (
        bool(_PLAIN_RE.match(text))
        and text == text.strip()
        and text.lower() not in _RESERVED
        and ": " not in text
        and " #" not in text
        and not text.endswith(":")
    )


def _scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot write {type(value).__name__} as YAML")
    return value if _plain(value) else json.dumps(value)  # a JSON string is a YAML double-quoted one


def _literal(value: object) -> bool:
    """Multi-line text written as a `|` block: no other escaping, so no control characters."""
    return (
        isinstance(value, str)
        and "\n" in value.rstrip("\n")
        and value.endswith("\n")
        and not value.endswith("\n\n")
        and not value.startswith((" ", "\n"))
        and all(c == "\n" or c.isprintable() for c in value)
        and not any(line != line.rstrip() for line in value.splitlines())
    )


def _block(value: str, pad: str) -> list[str]:
    return [f"{pad}{line}" if line else "" for line in value[:-1].split("\n")]


def _emit(value: object, indent: int) -> list[str]:
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{_scalar(str(key))}:"
            if isinstance(item, (dict, list)) and item:
                lines.append(head)
                lines.extend(_emit(item, indent + 2))
            elif isinstance(item, (dict, list)):
                lines.append(f"{head} {'{}' if isinstance(item, dict) else '[]'}")
            elif _literal(item):
                lines.append(f"{head} |")
                lines.extend(_block(item, pad + "  "))
            else:
                lines.append(f"{head} {_scalar(item)}")
        return lines
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _emit(item, indent + 2)
                lines.append(f"{pad}- {nested[0][indent + 2 :]}")
                lines.extend(nested[1:])
            elif isinstance(item, (dict, list)):
                lines.append(f"{pad}- {'{}' if isinstance(item, dict) else '[]'}")
            elif _literal(item):
                lines.append(f"{pad}- |")
                lines.extend(_block(item, pad + "  "))
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return lines
    return [f"{pad}{_scalar(value)}"]


def to_yaml(value: object) -> str:
    """Block-style YAML for dicts, lists, strings, ints, bools and None, in insertion order."""
    if isinstance(value, (dict, list)) and not value:
        return "{}\n" if isinstance(value, dict) else "[]\n"
    return "\n".join(_emit(value, 0)) + "\n"
