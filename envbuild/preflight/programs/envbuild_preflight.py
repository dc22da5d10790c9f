"""envbuild's preflight guard: an image that refuses to start on a node it cannot run on.

Every image envbuild renders carries this file in its Python environment's site-packages, with a
one-line `00-envbuild-preflight.pth` beside it that calls `guard()`. Python runs a .pth file's
`import` lines whenever it starts (the `site` module), so the guard runs before the user's code under
every entrypoint: `docker run IMG python train.py`, `--entrypoint python`, `apptainer exec`, pyxis's
`srun --container-image`, `ch-run`, a Kubernetes Job. The NVIDIA Container Toolkit's own check
(NVIDIA_REQUIRE_CUDA) is made in legacy mode only: CDI, Apptainer, Enroot, pyxis and Charliecloud never
read it, and without it a too-old driver makes torch train on the CPU, silently.

What it reads, with no subprocess when all is well:
* the driver: /proc/driver/nvidia/version, else /sys/module/nvidia/version;
* each GPU's model name: /proc/driver/nvidia/gpus/<bus id>/information ("Model:");
* the image's facts: FACTS_FILE, written by `envbuild render` (the driver floor the stack was resolved
  with, the build's compiled architectures, and the part of envbuild's GPU catalogue the image needs:
  each GPU's compute capability and first and last driver branch);
* nvidia-smi's compute_cap, only for a GPU name the catalogue lacks, and only when nvidia-smi is there.

Verdicts: "ok" (silent), "no-driver" (one line on stderr, then the program runs), "unchecked" (a GPU
the guard could not place: one line, then the program runs) and "stop" (the message, then exit status
STOP_STATUS before the user's code). ENVBUILD_PREFLIGHT=strict (the default), warn or off.

The verdict is judged once per container: the guard puts it in VERDICT_VAR, stamped with the node and
the facts file, so child processes (DataLoader workers, torchrun ranks) inherit it and skip the work.

`judge()` is the one judge: envbuild itself imports this module for `envbuild doctor --image`, and its
GPU name keys (`name_key`, `loose_key`) and kernel coverage rule (`covers`) are envbuild.matrix's, so
resolve and the guard cannot disagree. The file keeps to the standard library and Python 3.8, and
imports neither `re` nor `json` (which brings `re`) to judge: it runs at every Python start, and its
facts are a line format for that reason (parse_facts). bench/preflight.py measures what it adds.

`python -m envbuild_preflight` prints the verdict as one line and exits with its status (the line
Slurm and Kubernetes jobs log); `--json` prints the verdict document.
"""

from __future__ import annotations

import os
import sys

STOP_STATUS = 78  # sysexits' EX_CONFIG: the node is not configured for this image
MODES = ("strict", "warn", "off")
MODE_VAR = "ENVBUILD_PREFLIGHT"
ROOT_VAR = "ENVBUILD_PREFLIGHT_ROOT"  # a testing seam: read the driver's files under this directory
VERDICT_VAR = "ENVBUILD_PREFLIGHT_VERDICT"
FACTS_FILE = "/opt/envbuild/preflight.facts"
FACTS_VERSION = 1
DRIVER_FILES = ("proc/driver/nvidia/version", "sys/module/nvidia/version")
GPUS_DIR = "proc/driver/nvidia/gpus"
PREFIX = "envbuild preflight: "
# bounds on what is read: the files are the kernel's, the facts envbuild's, but nothing is trusted
MAX_FILE_BYTES = 64 * 1024
MAX_FACTS_BYTES = 2 * 1024 * 1024
MAX_GPUS = 64
SMI_TIMEOUT_S = 10


# ---------------------------------------------------------------------------------------------
# GPU name keys: shared with envbuild.matrix.gpunames (its docstring says what each rule is for)

VENDOR_PREFIXES = ("nvidia", "geforce", "tesla", "quadro")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_MEMORY_UNITS = ("gb", "mb")
SOFT_PHRASES = (
    ("with", "max", "q", "design"),
    ("workstation", "edition"),
    ("server", "edition"),
    ("laptop", "gpu"),
    ("max", "q"),
    ("laptop",),
    ("mobile",),
)


def _words(text: str) -> list:
    words, word = [], []
    for char in text.lower():
        if char in _WORD_CHARS:
            word.append(char)
        elif word:
            words.append("".join(word))
            word = []
    if word:
        words.append("".join(word))
    return words


def _digits(text: str) -> bool:
    return bool(text) and all("0" <= c <= "9" for c in text)


def _dropped(word: str) -> bool:
    """A word that does not tell GPUs apart: a memory size (80gb, GH200's 144g), a memory type
    (HBM3e, GDDR6X), a form factor (SXM5, PCIe, NVL72) or "generation"."""
    if word in ("pcie", "generation"):
        return True
    for unit in ("gb", "mb", "g"):
        if word.endswith(unit) and _digits(word[: -len(unit)]):
            return True
    if word.startswith("hbm"):
        rest = word[3:]
        if rest.endswith("e"):
            rest = rest[:-1]
        return rest == "" or (len(rest) == 1 and _digits(rest))
    if word.startswith("gddr"):
        rest = word[4:]
        if rest.endswith("x"):
            rest = rest[:-1]
        return _digits(rest)
    for form in ("sxm", "nvl"):
        if word.startswith(form):
            rest = word[len(form) :]
            return rest == "" or _digits(rest)
    return False


def name_tokens(text: str) -> tuple:
    """The words of a GPU name that tell GPUs apart, lower-cased, in order."""
    words = _words(text)
    if "mig" in words[1:]:  # "NVIDIA A100-SXM4-40GB MIG 1g.5gb": the GPU is what comes before
        words = words[: words.index("mig", 1)]
    while words and words[0] in VENDOR_PREFIXES:
        words.pop(0)
    kept: list = []
    for word in words:
        if word in _MEMORY_UNITS:
            if kept and _digits(kept[-1]) and len(kept) > 1:  # "16 GB", never a model number alone
                kept.pop()
            continue
        if _dropped(word):
            continue
        kept.append(word)
    return tuple(kept)


def name_key(text: str) -> str:
    """The key a name is looked up by ("NVIDIA A100-SXM4-80GB" -> "a100")."""
    return "".join(name_tokens(text))


def without_soft(tokens: tuple) -> tuple:
    words = list(tokens)
    for phrase in SOFT_PHRASES:
        size = len(phrase)
        i = 0
        while i + size <= len(words):
            if tuple(words[i : i + size]) == phrase and i > 0:  # never the whole name's first word
                del words[i : i + size]
            else:
                i += 1
    return tuple(words)


def loose_key(text: str):
    """The key without the soft words ("Laptop GPU", "Server Edition"), or None when it has none."""
    tokens = name_tokens(text)
    loose = without_soft(tokens)
    return "".join(loose) if loose != tokens and loose else None


# ---------------------------------------------------------------------------------------------
# kernel coverage: shared with envbuild.matrix.arch


def covers(sass, ptx, cc, allow_ptx: bool = True):
    """How a build with SASS for `sass` and PTX for `ptx` runs on compute capability `cc`: "sass" (a
    cubin of the same major and a minor <= cc's), "ptx" (PTX for an arch <= cc, JIT-compiled by the
    driver; never under minor-version compatibility), or None: "no kernel image is available"."""
    if any(major == cc[0] and minor <= cc[1] for major, minor in sass):
        return "sass"
    if allow_ptx and any(tuple(p) <= tuple(cc) for p in ptx):
        return "ptx"
    return None


def parse_cc(text):
    """(major, minor) of "8.6", or None."""
    major, dot, minor = str(text).strip().partition(".")
    if not dot or not _digits(major) or not _digits(minor) or len(major) > 2 or len(minor) > 2:
        return None
    return (int(major), int(minor))


def parse_arch(text: str):
    """The SASS and PTX sets of "5.0;8.6;9.0+PTX" (envbuild's io.envbuild.gpu-arch notation)."""
    sass, ptx = set(), set()
    for item in str(text).split(";"):
        item = item.strip()
        with_ptx = item.lower().endswith("+ptx")
        cc = parse_cc(item[:-4] if with_ptx else item)
        if cc is None:
            continue
        sass.add(cc)
        if with_ptx:
            ptx.add(cc)
    return frozenset(sass), frozenset(ptx)


def parse_driver(text):
    """(550, 54, 14) of "550.54.14", or None."""
    parts = str(text).strip().split(".")
    if not 1 <= len(parts) <= 3 or not all(_digits(p) and len(p) <= 6 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def format_cc(cc) -> str:
    return f"{cc[0]}.{cc[1]}"


# ---------------------------------------------------------------------------------------------
# what the node has


def _read(path: str, limit: int = MAX_FILE_BYTES):
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def read_driver(root: str = "/"):
    """The NVIDIA kernel module's version ("550.54.14"), or None when no driver is visible.

    /proc/driver/nvidia/version reads "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14
    Thu Feb 22 01:44:30 UTC 2024" (or "... Open Kernel Module for x86_64  570.86.15 ..."); the
    version is its first word that reads as one. /sys/module/nvidia/version holds the version alone."""
    for name in DRIVER_FILES:
        text = _read(os.path.join(root, name))
        if text is None:
            continue
        first = text.splitlines()[0] if text.strip() else ""
        for word in first.split():
            if "." in word and parse_driver(word) is not None:
                return word
    return None


def read_gpus(root: str = "/"):
    """[(bus id, model name)] of the GPUs this container sees, in bus order, at most MAX_GPUS.

    Each /proc/driver/nvidia/gpus/<bus id>/information has a "Model:" line. The container toolkit
    mounts the directories of the GPUs a container was given (CDI specs and the HPC runtimes show the
    host's /proc), so this is what the node has."""
    directory = os.path.join(root, GPUS_DIR)
    try:
        buses = sorted(os.listdir(directory))[:MAX_GPUS]
    except OSError:
        return []
    gpus = []
    for bus in buses:
        text = _read(os.path.join(directory, bus, "information"))
        model = None
        for line in (text or "").splitlines():
            key, colon, value = line.partition(":")
            if colon and key.strip().lower() == "model":
                model = " ".join(value.split())[:200]
                break
        gpus.append((bus, model or "an unnamed GPU"))
    return gpus


def smi_capabilities():
    """{name: (major, minor)} from nvidia-smi's compute_cap, or None without nvidia-smi (or when it fails)."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run(
            [smi, "--query-gpu=name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            timeout=SMI_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    found = {}
    for line in done.stdout.decode("utf-8", "replace").splitlines()[:MAX_GPUS]:
        name, comma, cap = line.rpartition(",")
        cc = parse_cc(cap) if comma else None
        if cc is not None:
            found[" ".join(name.split())] = cc
    return found


FACTS_HEADER = "envbuild-preflight-facts"
FACTS_FIELDS = ("stack", "cuda", "compat", "min_driver", "arch", "platform")


def _branch(text: str):
    return int(text) if _digits(text) and len(text) <= 6 else None


def parse_facts(text: str):
    """The facts document of FACTS_FILE's text, or None when it is not envbuild's.

    The file is lines of tab-separated words, not JSON: `import json` brings `re` with it, which is
    6 ms of a 10 ms Python start. First "envbuild-preflight-facts<TAB>1", then one "<field><TAB>value"
    line per FACTS_FIELDS, then "gpu<TAB>key<TAB>name<TAB>cc<TAB>first branch<TAB>last branch" lines
    ("-" for no branch)."""
    lines = text.split("\n")
    head = lines[0].split("\t")
    if head != [FACTS_HEADER, str(FACTS_VERSION)]:
        return None
    facts = {"version": FACTS_VERSION, "gpus": {}}
    for line in lines[1:]:
        words = line.split("\t")
        if words[0] in FACTS_FIELDS and len(words) == 2:
            facts[words[0]] = words[1]
        elif words[0] == "gpu" and len(words) == 6:
            facts["gpus"][words[1]] = [words[2], words[3], _branch(words[4]), _branch(words[5])]
    return facts


def format_facts(facts: dict) -> str:
    """FACTS_FILE's text for a facts document (parse_facts reads it back)."""

    def word(value) -> str:
        return " ".join(str(value).split())  # no tab or newline inside a word

    lines = [f"{FACTS_HEADER}\t{FACTS_VERSION}"]
    lines += [f"{name}\t{word(facts.get(name, ''))}" for name in FACTS_FIELDS]
    for key, (name, cc, first, last) in sorted(facts.get("gpus", {}).items()):
        branches = ["-" if b is None else str(b) for b in (first, last)]
        lines.append("\t".join(["gpu", word(key), word(name), word(cc), *branches]))
    return "\n".join(lines) + "\n"


def read_facts(path: str = FACTS_FILE):
    """The image's facts (a dict), or None when the file is missing or not envbuild's."""
    text = _read(path, MAX_FACTS_BYTES)
    return None if text is None else parse_facts(text)


# ---------------------------------------------------------------------------------------------
# the judge


def _shell_word(text: str) -> str:
    import shlex

    return shlex.quote(text)


def lookup(facts: dict, model: str):
    """The catalogue row of a model name: [name, cc, first branch, last branch], or None."""
    table = facts.get("gpus")
    if not isinstance(table, dict):
        return None
    row = table.get(name_key(model))
    if row is None:
        loose = loose_key(model)
        row = table.get(loose) if loose else None
    if isinstance(row, list) and len(row) == 4:
        return row
    return None


def judge(facts: dict, driver, gpus, smi=None) -> dict:
    """The verdict on a node with `driver` ("550.54.14" or None) and `gpus` ([(bus id, model name)],
    or [(bus id, model name, compute capability)] when the caller knows it, as doctor does from
    nvidia-smi), for an image with these `facts`.

    smi: a callable giving {name: cc} from nvidia-smi, asked only for a name the catalogue lacks.
    Returns a JSON-ready document: verdict ("ok", "no-driver", "unchecked" or "stop"), what was found,
    the problems (each a sentence) and the fixes."""
    found = {"driver": driver, "gpus": []}
    needs = {
        "min_driver": facts.get("min_driver"),
        "cuda": facts.get("cuda"),
        "compat": facts.get("compat", "native"),
        "arch": facts.get("arch"),
        "stack": facts.get("stack"),
    }
    document = {"verdict": "ok", "found": found, "needs": needs, "problems": [], "notes": [], "fixes": []}
    if driver is None:
        document["verdict"] = "no-driver"
        return document
    problems, notes = document["problems"], document["notes"]
    version = parse_driver(driver)
    floor = parse_driver(needs["min_driver"] or "")
    compat = needs["compat"]
    native = compat == "native"
    branch_fix = None
    if version is None:
        notes.append(f"the driver version {driver!r} could not be read, so it was not judged")
    elif floor is not None and version < floor:
        how = "natively" if native else "with minor-version compatibility"
        oldest = needs["min_driver"]
        problems.append(
            f"driver {driver} is older than {oldest}, the oldest driver that runs this image's CUDA "
            f"{needs['cuda'] or '?'} {how}"
        )
        branch_fix = f"run it on a node with an R{floor[0]} or newer driver ({oldest} or later)"
    sass, ptx = parse_arch(needs["arch"] or "")
    asked_smi = None
    for gpu in gpus:
        bus, model = gpu[0], gpu[1]
        cc = gpu[2] if len(gpu) > 2 else None
        row = lookup(facts, model)
        first = last = None
        if row is not None:
            cc = cc or parse_cc(row[1])
            first, last = row[2], row[3]
        if cc is None and smi is not None:
            if asked_smi is None:
                asked_smi = smi() or {}
            cc = asked_smi.get(" ".join(model.split()))
        entry = {"bus": bus, "name": model, "cc": format_cc(cc) if cc else None, "kernels": None}
        found["gpus"].append(entry)
        if cc is None:
            notes.append(
                f"GPU {bus} ({model}) is not in this image's GPU catalogue and nvidia-smi could not name "
                "its compute capability, so its kernels were not checked"
            )
            continue
        if sass or ptx:
            entry["kernels"] = covers(sass, ptx, cc, allow_ptx=native)
            if entry["kernels"] is None:
                only_ptx = covers(sass, ptx, cc, allow_ptx=True)
                why = " (PTX only, which minor-version compatibility cannot JIT)" if only_ptx else ""
                problems.append(
                    f"GPU {bus}, {model} (compute capability {format_cc(cc)}), has no kernels in this "
                    f"image: the build has {needs['arch']}{why}"
                )
        if version is not None and isinstance(last, int) and version[0] > last:
            problems.append(
                f"GPU {bus}, {model}, is supported only up to driver branch R{last}; this node's driver "
                f"{driver} cannot drive it"
            )
        if version is not None and isinstance(first, int) and version[0] < first:
            problems.append(f"GPU {bus}, {model}, needs an R{first} or newer driver; this node has {driver}")
    if problems:
        document["verdict"] = "stop"
        fixes = document["fixes"]
        if branch_fix:
            fixes.append(branch_fix)
        elif any("has no kernels" in p for p in problems):
            fixes.append(f"run it on a node whose GPUs this build has kernels for ({needs['arch']})")
        else:
            fixes.append("run it on a node whose driver branch supports its GPUs")
        names = []
        for entry in found["gpus"]:
            if entry["name"] not in names:
                names.append(entry["name"])
        command = f"envbuild resolve --driver {_shell_word(driver)}"
        command += "".join(f" --gpu {_shell_word(name)}" for name in names[:4])
        fixes.append("or build an image this node can run: " + command)
    elif notes:
        document["verdict"] = "unchecked"
    return document


def message(document: dict, mode: str = "strict") -> str:
    """What the guard prints for a verdict ("" for "ok")."""
    verdict = document["verdict"]
    found, needs = document["found"], document["needs"]
    if verdict == "ok":
        return ""
    if verdict == "no-driver":
        return (
            PREFIX + "no NVIDIA driver is visible in this container, so it runs without a GPU "
            "(give it GPUs: docker run --gpus all, --device nvidia.com/gpu=all, apptainer --nv, "
            "a GPU request)"
        )
    if verdict == "unchecked":
        return PREFIX + "; ".join(document["notes"])
    gpus = "; ".join(
        f"GPU {g['bus']}: {g['name']}" + (f" (compute capability {g['cc']})" if g["cc"] else "")
        for g in found["gpus"]
    )
    stack = needs.get("stack") or "this image"
    outcome = ", running it anyway (ENVBUILD_PREFLIGHT=warn)" if mode == "warn" else "; it stops here"
    lines = [
        f"{PREFIX}{stack} cannot run on this node{outcome}.",
        f"  found: NVIDIA driver {found['driver']}" + ("; " + gpus if gpus else "; no GPU listed"),
        f"  needs: driver {needs['min_driver']} or newer (CUDA {needs['cuda']}, {needs['compat']}); "
        f"kernels for compute capability {needs['arch']}",
    ]
    lines += ["  problem: " + p for p in document["problems"]]
    lines += ["  fix: " + f for f in document["fixes"]]
    if mode != "warn":
        lines.append(
            f"  (exit status {STOP_STATUS} before your program ran; ENVBUILD_PREFLIGHT=warn runs it anyway)"
        )
    return "\n".join(lines)


def evaluate(root=None, facts_path: str = FACTS_FILE, facts=None) -> dict:
    """Read the node (under ENVBUILD_PREFLIGHT_ROOT, else /) and the image's facts, and judge.

    Under a fake root nvidia-smi is never asked: it would answer for the real host."""
    if root is None:
        root = os.environ.get(ROOT_VAR) or "/"
    driver = read_driver(root)
    if driver is None:  # nothing else to read: the cheapest path, for a CPU container
        return judge({}, None, [])
    if facts is None:
        facts = read_facts(facts_path)
    if facts is None:
        document = judge({}, driver, [])
        document["verdict"] = "unchecked"
        document["notes"].append(f"this image's facts ({facts_path}) are missing or unreadable")
        return document
    smi = smi_capabilities if root == "/" else None
    return judge(facts, driver, read_gpus(root), smi=smi)


def _stamp(facts_path: str) -> str:
    """The node and image a verdict is for: an inherited verdict counts only on the same node, for
    the same facts file (Apptainer and Enroot pass the host's environment into a container)."""
    try:
        status = os.stat(facts_path)
        image = f"{status.st_size}-{status.st_mtime_ns}"
    except OSError:
        image = "none"
    return f"{os.uname().nodename}/{image}"


def _mode():
    raw = os.environ.get(MODE_VAR, "").strip().lower()
    if raw in MODES:
        return raw, None
    if raw == "":
        return "strict", None
    return "strict", PREFIX + f"{MODE_VAR}={raw!r} is not strict, warn or off; judging strictly"


def guard(facts_path: str = FACTS_FILE) -> None:
    """What the .pth file calls at every Python start: judge once, print, and stop if it must."""
    mode, problem = _mode()
    if mode == "off":
        return
    stamp = _stamp(facts_path)
    inherited = os.environ.get(VERDICT_VAR, "")
    if inherited.startswith(stamp + "="):
        return
    if problem:
        sys.stderr.write(problem + "\n")
    try:
        document = evaluate(facts_path=facts_path)
    except Exception as exc:  # a guard bug must not stop a program the node may well run
        sys.stderr.write(
            PREFIX + f"the check itself failed ({type(exc).__name__}: {exc}); running the program\n"
        )
        return
    os.environ[VERDICT_VAR] = stamp + "=" + document["verdict"]
    text = message(document, mode)
    if text:
        sys.stderr.write(text + "\n")
    if document["verdict"] == "stop" and mode == "strict":
        sys.stderr.flush()
        os._exit(STOP_STATUS)


def summary(document: dict) -> str:
    """The verdict as one line, for job logs ("envbuild preflight: ok: driver 550.54.14 (needs ...); GPU
    0000:62:00.0 NVIDIA H100 80GB HBM3: 9.0, sass")."""
    verdict = document["verdict"]
    found = document["found"]
    if verdict == "no-driver":
        return message(document)
    parts = [f"driver {found['driver']} (needs {document['needs']['min_driver']})"]
    parts += [
        f"GPU {g['bus']} {g['name']}: " + (f"{g['cc']}, {g['kernels']}" if g["cc"] else "unknown")
        for g in found["gpus"]
    ]
    line = PREFIX + verdict + ": " + "; ".join(parts)
    details = document["problems"] + document["notes"]
    return line + ("; " + "; ".join(details) if details else "")


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in ([], ["--json"]):
        sys.stderr.write("usage: python -m envbuild_preflight [--json]\n")
        return 2
    mode, _ = _mode()
    document = evaluate()
    if args == ["--json"]:
        import json

        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(summary(document) + "\n")
    if document["verdict"] == "stop" and mode == "strict":
        sys.stderr.write(message(document, mode) + "\n")
        return STOP_STATUS
    return 0


if __name__ == "__main__":
    sys.exit(main())
