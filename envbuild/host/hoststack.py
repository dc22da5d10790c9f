"""What `envbuild init` writes into [stack] for this host: driver and GPUs from its flags, else from
nvidia-smi, else the current long-term support branch.

A starter that names the driver the nodes really run resolves to the stack they can run. Without
nvidia-smi (a laptop, a CPU CI runner) the default is derived from the matrix's lifecycle on the day
(`current_lts`), never a hard-coded branch that will one day be past its end. Each choice is said
back to the user, with where it came from.
"""

from __future__ import annotations

import datetime

from envbuild._util.deadline import Deadline, DeadlineExceeded
from envbuild._util.record import Record
from envbuild.errors import UsageError
from envbuild.matrix.lifecycle import current_lts, end_of_month
from envbuild.matrix.model import Matrix
from envbuild.matrix.versions import parse_driver
from envbuild.resolve.query import parse_gpu

SMI_BUDGET_S = 15  # a wedged driver hangs nvidia-smi; init must not wait for it


class HostStack(Record):
    __slots__ = ("driver", "gpus", "notes")
    driver: str
    gpus: tuple[str, ...]
    notes: tuple[str, ...]  # what was chosen and where it came from, one line each


def _smi_gpus(matrix: Matrix, smi) -> tuple[tuple[str, ...], list[str]]:
    """The matrix names of the host's GPUs (each once), and a note for each one it cannot name.

    A name the catalogue lacks is written as the compute capability nvidia-smi reported (`sm_120`),
    which resolve reads as `--gpu 12.0` does, and the note says so and how to add the row; with no
    capability either, the GPU is left out and the note says that."""
    names: list[str] = []
    notes = []
    for gpu in smi.gpus:
        cc = gpu.compute_capability
        found = None
        try:
            found = parse_gpu(gpu.name, matrix).name
        except UsageError:
            if cc is not None:
                try:
                    found = parse_gpu(f"{cc[0]}.{cc[1]}", matrix).name
                except UsageError:
                    found = None
            how = (
                "add its [[gpu]] row to a copy of matrix/gpus.toml, `envbuild matrix check --matrix DIR`, "
                "and pass --matrix DIR"
            )
            if found is not None:
                notes.append(
                    f"nvidia-smi reports GPU {gpu.name!r}, which the GPU catalogue does not know: written as "
                    f"its compute capability {found}; to name it, {how}"
                )
            else:
                notes.append(
                    f"nvidia-smi reports GPU {gpu.name!r}, which the GPU catalogue does not know"
                    + (f" (nor its compute capability {cc[0]}.{cc[1]})" if cc else "")
                    + f": add it to gpus by name or compute capability, or {how}"
                )
        if found is not None and found not in names:
            names.append(found)
    return tuple(names), notes


def host_stack(
    matrix: Matrix, *, driver: str | None, gpus: list[str], day: datetime.date, smi_binary: str = "nvidia-smi"
) -> HostStack:
    """driver and gpus for the starter; flags (validated as `resolve` validates them) win."""
    from envbuild.host.nvsmi import SmiUnavailable, query

    if driver is not None:
        parse_driver(driver)
    for text in gpus:
        parse_gpu(text, matrix)
    smi, reason = None, ""
    if driver is None or not gpus:
        try:
            smi = query(smi_binary, deadline=Deadline(SMI_BUDGET_S))
        except SmiUnavailable as exc:
            reason = str(exc)
        except DeadlineExceeded:
            reason = f"nvidia-smi did not answer within {SMI_BUDGET_S} s"
    notes: list[str] = []
    read: list[str] = []
    chosen_gpus = tuple(gpus)
    if not gpus and smi is not None and smi.gpus:
        chosen_gpus, unknown = _smi_gpus(matrix, smi)
        notes += unknown
        if chosen_gpus:
            read.append(f"GPU{'s' * (len(chosen_gpus) > 1)} {', '.join(chosen_gpus)}")
    if driver is None and smi is not None and smi.driver_version:
        driver = smi.driver_version
        read.insert(0, f"driver {driver}")
        row = matrix.branches.get(parse_driver(driver).branch)
        if row is not None and row.eol and end_of_month(row.eol) < day:
            lts = current_lts(matrix, day)
            newer = f"; the current long-term support branch is R{lts.branch}" if lts else ""
            notes.append(
                f"R{row.branch} reached end of life {row.eol}{newer}: the stacks this driver runs age with it"
            )
    if read:
        notes.insert(0, f"{' and '.join(read)} read from nvidia-smi")
    if driver is None:
        lts = current_lts(matrix, day)
        if lts is None:  # every LTSB on record has ended: the newest branch, said plainly
            newest = max(matrix.branches.values(), key=lambda b: b.branch)
            driver = str(newest.branch)
            why = f"R{newest.branch}, the newest branch on record (no long-term branch is still supported)"
        else:
            driver = str(lts.branch)
            why = (
                f"R{lts.branch} ({lts.type}, supported until {lts.eol}), the current long-term support branch"
            )
        notes.insert(
            0,
            f'no nvidia-smi on this host ({reason or "not asked"}): driver = "{driver}" is {why}; '
            "set it to the driver your nodes run",
        )
    return HostStack(driver=driver, gpus=chosen_gpus, notes=tuple(notes))
