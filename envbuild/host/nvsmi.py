"""What `nvidia-smi` says about a host: driver, CUDA, GPUs, processes, event reasons.

The machine-readable `--query-gpu ... --format=csv,noheader,nounits` output comes first; the table
banner is the fallback (and the only place that states the CUDA version). Drivers from 610 on label
the banner `KMD Version` / `CUDA UMD Version` instead of `Driver Version` / `CUDA Version`; both parse.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess

from envbuild._util.deadline import Deadline, DeadlineExceeded
from envbuild._util.record import Record

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "driver_version",
    "compute_cap",
    "memory.used",
    "memory.total",
    "utilization.gpu",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks_event_reasons.active",
)
# drivers before R535 name the last field clocks_throttle_reasons.active; older ones lack compute_cap
QUERY_FALLBACKS = (
    QUERY_FIELDS,
    (*QUERY_FIELDS[:-1], "clocks_throttle_reasons.active"),
    tuple(f for f in QUERY_FIELDS if f not in ("compute_cap", "clocks_event_reasons.active")),
)
APPS_FIELDS = ("gpu_uuid", "pid", "process_name", "used_memory")
# nvmlClocksEventReasons bits that mean the GPU is being slowed down against its will
SLOWDOWN_REASONS = {
    0x8: "HW slowdown",
    0x20: "SW thermal slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown",
}
INFO_REASONS = {0x4: "SW power cap"}

_DRIVER_RE = re.compile(r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)")
_CUDA_RE = re.compile(r"CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)")
_GPU_ROW_RE = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|")
_MEM_RE = re.compile(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB")
_TEMP_RE = re.compile(r"\|\s*(?:\d+%|N/A)\s+(\d+)C\s")
_POWER_RE = re.compile(r"(\d+)W\s*/\s*(\d+)W")
_UTIL_RE = re.compile(r"(\d+)%\s+(?:Default|E\. Process|Prohibited|Exclusive)")
_PROC_RE = re.compile(r"^\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+\S+\s+(.+?)\s+(\d+)\s*MiB\s*\|")


class Process(Record):
    __slots__ = ("pid", "name", "used_mib")
    pid: int
    name: str
    used_mib: int


class GpuInfo(Record):
    __slots__ = (
        "index",
        "name",
        "uuid",
        "compute_capability",
        "memory_used_mib",
        "memory_total_mib",
        "utilization_pct",
        "temperature_c",
        "power_w",
        "power_limit_w",
        "event_reasons",
        "processes",
    )
    index: int
    name: str
    uuid: str | None
    compute_capability: tuple[int, int] | None
    memory_used_mib: int | None
    memory_total_mib: int | None
    utilization_pct: int | None
    temperature_c: int | None
    power_w: float | None
    power_limit_w: float | None
    event_reasons: int | None  # bitmask; None when not reported
    processes: tuple[Process, ...]


class SmiReport(Record):
    __slots__ = ("driver_version", "cuda_version", "gpus", "source", "brand")
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuInfo, ...]
    source: str  # query | banner
    brand: str | None  # "Product Brand" of GPU 0 (nvidia-smi -q): NVIDIA container brand= clauses use it


CALL_TIMEOUT_S = 30  # one nvidia-smi call; a wedged driver makes it hang, not fail


class SmiUnavailable(Exception):
    """nvidia-smi is missing or cannot talk to the driver; the message says which, `fix` what to do
    when the doctor's general advice for that case does not fit."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix


def _number(text: str) -> float | None:
    """A reported number, or None for "[N/A]", "[Not Supported]", garbage and non-finite values:
    `nan` or an overflowing `1e400` mean the driver could not measure it, not a reading."""
    text = text.strip()
    if not text or text.startswith(("[", "N/A")):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int(text: str) -> int | None:
    value = _number(text)
    return None if value is None else int(value)


def parse_query(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[GpuInfo]:
    gpus = []
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            continue
        row = dict(zip(fields, values, strict=True))
        cc = None
        if row.get("compute_cap") and re.fullmatch(r"\d+\.\d+", row["compute_cap"]):
            major, minor = row["compute_cap"].split(".")
            cc = (int(major), int(minor))
        reasons_text = (
            row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active") or ""
        )
        reasons = int(reasons_text, 16) if re.fullmatch(r"0x[0-9A-Fa-f]+", reasons_text) else None
        gpus.append(
            GpuInfo(
                index=_int(row["index"]) or 0,
                name=row["name"],
                uuid=row.get("uuid"),
                compute_capability=cc,
                memory_used_mib=_int(row["memory.used"]),
                memory_total_mib=_int(row["memory.total"]),
                utilization_pct=_int(row["utilization.gpu"]),
                temperature_c=_int(row["temperature.gpu"]),
                power_w=_number(row["power.draw"]),
                power_limit_w=_number(row["power.limit"]),
                event_reasons=reasons,
                processes=(),
            )
        )
    return gpus


def parse_apps(text: str) -> dict[str, list[Process]]:
    by_gpu: dict[str, list[Process]] = {}
    for line in text.strip().splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) == 4 and values[1].isdigit():
            by_gpu.setdefault(values[0], []).append(
                Process(pid=int(values[1]), name=values[2], used_mib=_int(values[3]) or 0)
            )
    return by_gpu


def parse_banner(text: str) -> SmiReport:
    driver = _DRIVER_RE.search(text)
    cuda = _CUDA_RE.search(text)
    lines = text.splitlines()
    gpus: list[GpuInfo] = []
    processes: dict[int, list[Process]] = {}
    in_processes = False
    for number, line in enumerate(lines):
        if "Processes:" in line:
            in_processes = True
            continue
        if in_processes:
            match = _PROC_RE.match(line)
            if match:
                processes.setdefault(int(match.group(1)), []).append(
                    Process(
                        pid=int(match.group(2)), name=match.group(3).strip(), used_mib=int(match.group(4))
                    )
                )
            continue
        match = _GPU_ROW_RE.match(line)
        if not match or number + 1 >= len(lines):
            continue
        detail = lines[number + 1]
        memory = _MEM_RE.search(detail)
        temperature = _TEMP_RE.search(detail)
        power = _POWER_RE.search(detail)
        utilization = _UTIL_RE.search(detail)
        gpus.append(
            GpuInfo(
                index=int(match.group(1)),
                name=match.group(2).strip(),
                uuid=None,
                compute_capability=None,
                memory_used_mib=int(memory.group(1)) if memory else None,
                memory_total_mib=int(memory.group(2)) if memory else None,
                utilization_pct=int(utilization.group(1)) if utilization else None,
                temperature_c=int(temperature.group(1)) if temperature else None,
                power_w=float(power.group(1)) if power else None,
                power_limit_w=float(power.group(2)) if power else None,
                event_reasons=None,
                processes=(),
            )
        )
    gpus = [g.replace(processes=tuple(processes.get(g.index, ()))) for g in gpus]
    return SmiReport(
        driver_version=driver.group(1) if driver else None,
        cuda_version=cuda.group(1) if cuda else None,
        gpus=tuple(gpus),
        source="banner",
        brand=None,
    )


_Q_REASON_BITS = {
    "idle": 0x1,
    "applications clocks setting": 0x2,
    "sw power cap": 0x4,
    "hw slowdown": 0x8,
    "sync boost": 0x10,
    "sw thermal slowdown": 0x20,
    "hw thermal slowdown": 0x40,
    "hw power brake slowdown": 0x80,
    "display clock setting": 0x100,
}


def parse_q_reasons(text: str) -> list[int]:
    """Active clocks event (throttle) reasons per GPU section of `nvidia-smi -q`, as bitmasks."""
    sections = re.split(r"\nGPU [0-9A-Fa-f]{4,}:[0-9A-Fa-f:.]+\n", text)
    if len(sections) > 1:
        sections = sections[1:]
    masks = []
    for section in sections:
        block = re.search(r"Clocks (?:Throttle|Event) Reasons\s*\n((?:[ \t]+.*\n?)+)", section)
        if not block:
            continue
        mask = 0
        for line in block.group(1).splitlines():
            name, _, state = line.partition(":")
            if state.strip() == "Active":
                mask |= _Q_REASON_BITS.get(name.strip().lower(), 0)
        masks.append(mask)
    return masks


def parse_brand(text: str) -> str | None:
    match = re.search(r"Product Brand\s*:\s*(.+)", text)
    return match.group(1).strip() if match else None


class _Answer(Record):
    __slots__ = ("returncode", "stdout", "stderr")
    returncode: int
    stdout: str
    stderr: str


def _run(deadline: Deadline, binary: str, *args: str) -> _Answer:
    """One call, bounded by CALL_TIMEOUT_S and by what is left of the deadline; output decoded as
    UTF-8 with replacement, since nvidia-smi prints whatever the driver hands it."""
    timeout = deadline.budget(CALL_TIMEOUT_S)
    try:
        done = subprocess.run([binary, *args], capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        if deadline.expired():
            raise DeadlineExceeded from None
        raise SmiUnavailable(
            f"nvidia-smi {' '.join(args)}".rstrip() + f" did not answer within {timeout:g} s"
        ) from None
    return _Answer(
        returncode=done.returncode,
        stdout=done.stdout.decode("utf-8", errors="replace"),
        stderr=done.stderr.decode("utf-8", errors="replace"),
    )


def query(binary: str = "nvidia-smi", *, deadline: Deadline | None = None) -> SmiReport:
    """Ask nvidia-smi; raises SmiUnavailable with nvidia-smi's own words when it cannot answer, and
    DeadlineExceeded when the deadline (default: CALL_TIMEOUT_S for each call) runs out first."""
    deadline = deadline or Deadline(math.inf)
    path = shutil.which(binary)
    if path is None:
        raise SmiUnavailable("no NVIDIA driver visible: nvidia-smi not found")
    banner = _run(deadline, path)
    if banner.returncode != 0:
        said = (banner.stdout + banner.stderr).strip().splitlines()
        raise SmiUnavailable("nvidia-smi failed: " + (said[0] if said else f"exit {banner.returncode}"))
    if not banner.stdout.strip():
        raise SmiUnavailable(
            "nvidia-smi exited 0 but printed nothing",
            fix="run `nvidia-smi` by hand: an empty answer comes from a stub or a broken install (some "
            "images ship a placeholder nvidia-smi); reinstall the driver on the host, and start "
            "containers with --gpus all so the host's nvidia-smi is mounted",
        )
    report = parse_banner(banner.stdout)
    for fields in QUERY_FALLBACKS:
        done = _run(deadline, path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits")
        gpus = parse_query(done.stdout, fields) if done.returncode == 0 else []
        if gpus:
            apps = _run(
                deadline,
                path,
                "--query-compute-apps=" + ",".join(APPS_FIELDS),
                "--format=csv,noheader,nounits",
            )
            by_uuid = parse_apps(apps.stdout) if apps.returncode == 0 else {}
            from_banner = {g.index: g.processes for g in report.gpus}
            gpus = [
                g.replace(processes=tuple(by_uuid.get(g.uuid or "", ())) or from_banner.get(g.index, ()))
                for g in gpus
            ]
            first = [v.strip() for v in done.stdout.strip().splitlines()[0].split(",")]
            driver = dict(zip(fields, first, strict=False)).get("driver_version") or report.driver_version
            report = SmiReport(
                driver_version=driver,
                cuda_version=report.cuda_version,
                gpus=tuple(gpus),
                source="query",
                brand=None,
            )
            break
    details = _run(deadline, path, "-q")
    brand = parse_brand(details.stdout) if details.returncode == 0 else None
    gpus = report.gpus
    if details.returncode == 0 and any(g.event_reasons is None for g in gpus):
        masks = parse_q_reasons(details.stdout)
        gpus = tuple(
            g.replace(
                event_reasons=masks[i] if g.event_reasons is None and i < len(masks) else g.event_reasons
            )
            for i, g in enumerate(gpus)
        )
    return SmiReport(
        driver_version=report.driver_version,
        cuda_version=report.cuda_version,
        gpus=gpus,
        source=report.source,
        brand=brand,
    )


def reason_names(bitmask: int | None) -> tuple[list[str], list[str]]:
    """(slowdowns worth a warning, informational reasons)."""
    if not bitmask:
        return [], []
    return (
        [name for bit, name in SLOWDOWN_REASONS.items() if bitmask & bit],
        [name for bit, name in INFO_REASONS.items() if bitmask & bit],
    )
