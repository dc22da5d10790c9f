"""Pick the stacks a driver runs, and give every other candidate one reason.

Pure: a Matrix and a Query in, a Resolution out; no I/O. The rules (documented in docs/concepts/resolution.md
and relied on by the tests):

* native (default): a driver runs CUDA X.Y when it is >= the minimum driver of X.Y's GA release.
* --compat minor: a driver >= the major's minor-version-compatibility floor also runs every X.Y of
  that major, with the caveat that PTX JIT of newer code fails.
* GPU coverage: see envbuild.matrix.arch; PTX counts only for natively run stacks.
* A candidate is one (framework release, CUDA variant). Variants that take any CUDA X.Y >= a minimum
  from open-ranged nvidia-* wheels (JAX, TensorFlow >= 2.20) run the newest X.Y of that major the
  driver runs natively; under --compat minor, when none runs natively, the lowest X.Y they accept.
* cuDNN hardware floors: see envbuild.resolve.cudnn. A stack whose open cuDNN range would install a
  release without kernels for a queried GPU carries a pin to the newest release in the range that has
  them (Stack.cudnn_pin); with none, or with a fixed cuDNN below the GPU, the candidate is rejected.
* A build's wheel METADATA (matrix/requirements.toml, envbuild.resolve.needs): an open-ranged build
  taking CUDA wheels is offered only the X.Y every runtime wheel's own bound admits, a tool wheel
  (nvcc) above the X.Y is pinned to its own bound (Stack.toolchain), and under --strategy base-image
  only the X.Y whose nvidia/cuda image bundles a cuDNN, NCCL and CUDA the build accepts.
* Ranking: newest framework release, then newest CUDA, then newest Python.
* Repeated --framework filters for one framework are OR'ed (query.FrameworkFilter).
* With the native default, each framework returned also gets the best stack the same query finds
  under --compat minor when that is a newer release (Resolution.with_minor_compat): the stricter
  default stays, but the trade-off is shown.
* A GPU the driver cannot drive (envbuild.matrix.support: older than its first branch, newer than its
  last) is a host-level problem under every --compat: no stacks, no "closest misses".
"""

from __future__ import annotations

from envbuild._util.record import Record
from envbuild.matrix.model import Framework, Gpu, Matrix, Provenance, Release, Variant
from envbuild.matrix.requirements import Requirements
from envbuild.matrix.support import unsupported
from envbuild.matrix.versions import format_cc, format_driver, format_minor, sm_name
from envbuild.resolve import needs
from envbuild.resolve.cudnn import DEFAULT_OS, CudnnOutcome, judge
from envbuild.resolve.query import FrameworkFilter, Query

# The order in which a rejected candidate's failures are reported: the first one is its reason.
FAILURE_ORDER = ("framework", "platform", "python", "cuda", "strategy", "driver", "gpu")

# What minor-version compatibility costs (CUDA compatibility guide, "Minor Version Compatibility").
MINOR_COMPAT_COST = "PTX JIT of newer code fails and CUDA APIs newer than the driver are unavailable"
COMPAT_CAVEAT = "runs CUDA {cuda} on driver {driver} through minor-version compatibility: " + (
    MINOR_COMPAT_COST
)


class Failure(Record):
    __slots__ = ("kind", "text", "relax")
    kind: str  # one of FAILURE_ORDER
    text: str
    relax: str | None  # the single change that would clear it, e.g. "--compat minor"


class Stack(Record):
    __slots__ = (
        "framework",
        "release",
        "variant",
        "cuda",
        "python",
        "min_driver",
        "mode",
        "caveats",
        "cudnn_pin",
        "toolchain",
        "needs",
        "platform",
    )
    framework: Framework
    release: Release
    variant: Variant
    cuda: tuple[int, int]
    python: tuple[int, int]
    min_driver: tuple[int, ...]
    mode: str  # "native" | "minor"
    caveats: tuple[str, ...]
    cudnn_pin: tuple[int, int] | None  # cuDNN X.Y the install is pinned to (envbuild.resolve.pins)
    # (wheel, pin) of tool wheels the build needs newer than `cuda` (JAX's ptxas: nvcc>=12.6.85,<13)
    toolchain: tuple[tuple[str, str], ...]
    needs: Requirements | None  # the build's requirements.toml row (None: not measured)
    platform: str  # the platform the stack was resolved for: its arch list is that platform's

    @property
    def rank(self) -> tuple:
        return (self.release.key, self.cuda, self.python, self.variant.name)


class Rejection(Record):
    __slots__ = ("framework", "release", "variant", "failures")
    framework: Framework
    release: Release
    variant: Variant
    failures: tuple[Failure, ...]  # ordered by FAILURE_ORDER; failures[0] is the reason

    @property
    def reason(self) -> Failure:
        return self.failures[0]


class Resolution(Record):
    __slots__ = ("query", "stacks", "more", "rejected", "problems", "closest", "with_minor_compat")
    query: Query
    stacks: tuple[Stack, ...]  # best first, at most query.limit per framework
    more: dict[str, int]  # framework name -> compatible stacks beyond the limit
    rejected: tuple[Rejection, ...]
    problems: tuple[str, ...]  # host-level blockers (a GPU the driver cannot drive)
    closest: tuple[Rejection, ...]  # when nothing resolves: the candidates that missed least
    # framework name -> the best stack under --compat minor, where that is a newer release than the
    # framework's best native stack (native queries only)
    with_minor_compat: dict[str, Stack]


def candidate_label(framework: Framework, release: Release, variant: Variant) -> str:
    """pip's spelling where it has one: torch wheels carry the variant as a local version."""
    if framework.name == "torch":
        return f"torch {release.version}+{variant.name}"
    return f"{framework.name} {release.version} [{variant.name}]"


def native_cuda_of(matrix: Matrix, query_driver) -> tuple[int, int] | None:
    """The newest CUDA X.Y this driver runs natively, from the GA minimum drivers."""
    best = None
    for minor, row in matrix.ga_floor.items():
        if row.min_driver and query_driver.at_least(row.min_driver):
            best = max(best, minor) if best else minor
    return best


def native_cuda_without_floor(matrix: Matrix, query_driver) -> list[tuple[int, int]]:
    """CUDA X.Y above `native_cuda_of` that the driver's branch row says it runs natively, but for
    which drivers.toml records no GA minimum driver (R620: 13.4 and 13.5).

    NVIDIA's branch table backs "R620 runs CUDA 13.5"; nothing backs a minimum driver, so no build is
    resolved against those releases (a full driver version could be older than the unknown floor).
    The report names them, so its header agrees with the branch row and with what the solver does.
    A known floor above the driver ends the list: that release, and any above it, it does not run.
    """
    row = matrix.branches.get(query_driver.branch)
    if row is None:
        return []
    native = native_cuda_of(matrix, query_driver)
    found = []
    for minor in sorted(matrix.ga_floor):
        if native is not None and minor <= native:
            continue
        if minor > row.native_cuda or matrix.ga_floor[minor].min_driver is not None:
            break
        found.append(minor)
    return found


def _caveat(prov: Provenance) -> str | None:
    if not prov.confidence:
        return None
    note = f": {prov.note}" if prov.note else ""
    return f"{prov.where} is {prov.confidence}{note}"


class _Resolver:
    def __init__(self, matrix: Matrix, query: Query) -> None:
        self.matrix = matrix
        self.query = query
        self.driver = query.driver
        self.driver_text = str(query.driver)
        # judge() depends only on the build's cuDNN text and the chosen CUDA for one query, and
        # most releases share both: one answer each keeps resolve() within its millisecond budget
        self.cudnn_outcomes: dict[tuple[str | None, tuple[int, int]], CudnnOutcome | None] = {}
        # the same for each requirements row and X.Y: rows live in the matrix, so id() is stable here
        self.runtime_misses: dict[tuple[int, tuple[int, int]], tuple[str, str] | None] = {}

    def runtime_miss(self, row: Requirements, cuda: tuple[int, int]) -> tuple[str, str] | None:
        key = (id(row), cuda)
        if key not in self.runtime_misses:
            self.runtime_misses[key] = needs.runtime_miss(row, cuda)
        return self.runtime_misses[key]

    def cuda_options(self, variant: Variant) -> list[tuple[int, int]]:
        if variant.cuda is not None:
            return [variant.cuda]
        assert variant.cuda_min is not None
        return [m for m in self.matrix.minors_of_major(variant.cuda_min[0]) if m >= variant.cuda_min]

    def native_ok(self, cuda: tuple[int, int]) -> bool:
        row = self.matrix.ga_floor.get(cuda)
        return bool(row and row.min_driver and self.driver.at_least(row.min_driver))

    def compat_ok(self, cuda: tuple[int, int]) -> bool:
        floor = self.matrix.minor_compat.get(cuda[0])
        return bool(floor and self.driver.at_least(floor.min_driver))

    def cuda_matches(self, cuda: tuple[int, int]) -> bool:
        spec = self.query.cuda
        if spec is None:
            return True
        from packaging.version import Version

        return Version(format_minor(cuda)) in spec

    def evaluate(
        self, fw: Framework, wanted_releases: FrameworkFilter | None, release: Release, variant: Variant
    ) -> Stack | Rejection:
        failures: list[Failure] = []
        query = self.query
        if query.platform not in variant.platforms:
            failures.append(_platform_failure(fw, release, variant, query))
        if wanted_releases is not None and not wanted_releases.allows(release.version):
            failures.append(
                Failure(
                    kind="framework",
                    text=f"excluded by --framework {wanted_releases.describe()}",
                    relax=f"--framework {fw.name}",
                )
            )
        python = release.python[-1]
        if query.python is not None:
            if query.python in release.python:
                python = query.python
            else:
                supported = ", ".join(format_minor(p) for p in release.python)
                failures.append(
                    Failure(
                        kind="python",
                        text=f"no wheels for Python {format_minor(query.python)} (has {supported})",
                        relax=f"--python {format_minor(release.python[-1])}",
                    )
                )

        options = self.cuda_options(variant)
        wanted = [c for c in options if self.cuda_matches(c)]
        if not options:
            failures.append(
                Failure(
                    kind="driver",
                    text="no CUDA release with a known minimum driver matches this build",
                    relax=None,
                )
            )
        elif not wanted:
            shown = "/".join(format_minor(c) for c in options[-3:])
            failures.append(
                Failure(
                    kind="cuda",
                    text=f"CUDA {shown} does not match --cuda '{query.cuda_text}'",
                    relax="dropping --cuda",
                )
            )
        considered = wanted or options
        row = self.matrix.requirements(fw.name, release.version, variant.name)
        strategy_failure, considered, unfit = self._strategy_filter(variant, considered, row)
        if strategy_failure:
            failures.append(strategy_failure)
        needs_failure, considered, dropped = self._needs_filter(variant, considered, row)
        if needs_failure:
            failures.append(needs_failure)
        native = [c for c in considered if self.native_ok(c)]
        compat = [c for c in considered if self.compat_ok(c)]
        chosen, mode = None, "native"
        if native:
            chosen = native[-1]
        elif query.compat == "minor" and compat:
            chosen, mode = compat[0], "minor"
        if chosen is None and considered:
            failures.append(self._driver_failure(considered, compat, row, dropped, unfit, variant))

        gpu_failure = self._gpu_failure(variant, allow_ptx=mode == "native")
        if gpu_failure:
            failures.append(gpu_failure)
        cudnn = None
        if chosen is not None and not gpu_failure:
            key = (variant.cudnn, chosen)
            if key not in self.cudnn_outcomes:
                self.cudnn_outcomes[key] = judge(
                    self.matrix, variant, chosen, query.gpus, strategy=query.strategy, os_name=query.os
                )
            cudnn = self.cudnn_outcomes[key]
            if cudnn is not None and cudnn.short is not None:
                failures.append(_cudnn_failure(variant, cudnn))
        if failures or chosen is None:
            failures.sort(key=lambda f: FAILURE_ORDER.index(f.kind))
            return Rejection(framework=fw, release=release, variant=variant, failures=tuple(failures))
        stack = self._stack(fw, release, variant, chosen, python, mode, cudnn)
        return self._with_needs(stack, row, dropped)

    def _strategy_filter(
        self, variant: Variant, considered: list[tuple[int, int]], row: Requirements | None
    ) -> tuple[Failure | None, list[tuple[int, int]], list[tuple[int, int]]]:
        """wheels needs a build that brings its CUDA runtime; base-image needs an nvidia/cuda image
        whose bundled cuDNN, NCCL and CUDA the build accepts (envbuild.resolve.needs).

        Returns the failure, the CUDA X.Y left, and the X.Y whose image the build does not accept."""
        strategy = self.query.strategy
        if strategy == "wheels" and variant.cuda_from != "wheels":
            return (
                Failure(
                    kind="strategy",
                    text="brings no CUDA runtime of its own (needs a system CUDA)",
                    relax="--strategy base-image",
                ),
                considered,
                [],
            )
        if strategy == "base-image" and considered:
            os_name = self.query.os or DEFAULT_OS
            with_image = [c for c in considered if self.matrix.image_for(c, os_name, self.query.platform)]
            if not with_image:
                shown = "/".join(format_minor(c) for c in considered[-3:])
                # an image row that has the tag but not for this platform says so: its own reason
                other = any(self.matrix.image_for(c, os_name) for c in considered)
                suffix = f" for {self.query.platform}" if other else ""
                return (
                    Failure(
                        kind="strategy",
                        text=f"no nvidia/cuda cuDNN image for CUDA {shown} on {os_name}{suffix}",
                        relax="--strategy wheels",
                    ),
                    considered,
                    [],
                )
            fitting = [c for c in with_image if self._image_miss(variant, c, row) is None]
            unfit = [c for c in with_image if c not in fitting]
            if not fitting:
                image = self.matrix.image_for(with_image[-1], os_name, self.query.platform)
                miss = self._image_miss(variant, with_image[-1], row)
                assert image is not None and miss is not None
                return (
                    Failure(
                        kind="strategy", text=needs.image_miss_text(image, miss), relax="--strategy wheels"
                    ),
                    with_image,
                    unfit,
                )
            return None, fitting, unfit
        return None, considered, []

    def _image_miss(
        self, variant: Variant, cuda: tuple[int, int], row: Requirements | None
    ) -> tuple[str, str, str | None] | None:
        image = self.matrix.image_for(cuda, self.query.os or DEFAULT_OS, self.query.platform)
        return needs.image_miss(image, variant, row) if image is not None else None

    def _needs_filter(
        self, variant: Variant, considered: list[tuple[int, int]], row: Requirements | None
    ) -> tuple[Failure | None, list[tuple[int, int]], list[tuple[int, int]]]:
        """An open-ranged build taking CUDA wheels keeps the X.Y every runtime wheel's own bound
        admits (the pins hold each to X.Y.*). Returns the failure, the X.Y left, the X.Y dropped."""
        if row is None or variant.cuda is not None or not considered:
            return None, considered, []
        if not needs.takes_cuda_wheels(variant, self.query.strategy):
            return None, considered, []
        major = considered[0][0]
        tool = needs.tool_outside_major(row, major)
        kept = [c for c in considered if self.runtime_miss(row, c) is None]
        if kept and tool is None:
            return None, kept, [c for c in considered if c not in kept]
        name, bound = tool or self.runtime_miss(row, considered[-1]) or ("", "")
        return (
            Failure(
                kind="cuda",
                text=f"{row.cited()} requires {name}{bound}, "
                f"which no CUDA {major}.x release in the matrix meets",
                relax=None,
            ),
            considered,
            [],
        )

    def _driver_failure(
        self,
        considered: list[tuple[int, int]],
        compat: list[tuple[int, int]],
        row: Requirements | None = None,
        dropped: list[tuple[int, int]] | None = None,
        unfit: list[tuple[int, int]] | None = None,
        variant: Variant | None = None,
    ) -> Failure:
        lowest = considered[0]
        row_floor = self.matrix.ga_floor.get(lowest)
        floor = (
            format_driver(row_floor.min_driver) if row_floor and row_floor.min_driver else "an unknown driver"
        )
        plus = "+" if len(considered) > 1 else ""
        text = f"needs driver >= {floor} (CUDA {format_minor(lowest)}{plus}), you have {self.driver_text}"
        relax = "--compat minor" if compat and self.query.compat == "native" else f"a driver >= {floor}"
        runs = self.native_ok if self.query.compat == "native" else self.compat_ok
        ruled_out = [c for c in dropped or () if runs(c)]
        if row is not None and ruled_out:
            miss = needs.runtime_miss(row, ruled_out[-1])
            assert miss is not None
            text += (
                f" ({row.cited()} requires {miss[0]}{miss[1]}, which no CUDA "
                f"{format_minor(ruled_out[-1])} release meets)"
            )
        unrun = [c for c in unfit or () if runs(c)]
        if unrun and variant is not None:
            return Failure(
                kind="strategy", text=self._no_image_text(variant, unrun[-1], lowest, row, floor), relax=relax
            )
        return Failure(kind="driver", text=text, relax=relax)

    def _no_image_text(
        self,
        variant: Variant,
        runnable: tuple[int, int],
        fitting: tuple[int, int],
        row: Requirements | None,
        floor: str,
    ) -> str:
        """ "no nvidia/cuda image in the matrix bundles cuDNN >=9.8,<10.0 for CUDA 12.x that driver 550
        runs (nvidia/cuda 12.4.1 ships cuDNN 9.1.0.70; 12.8.1 has 9.8.0.87 but needs driver >= 570.26)"."""
        os_name = self.query.os or DEFAULT_OS
        image = self.matrix.image_for(runnable, os_name, self.query.platform)
        good = self.matrix.image_for(fitting, os_name, self.query.platform)
        miss = self._image_miss(variant, runnable, row)
        assert image is not None and good is not None and miss is not None
        label, wanted, bundled = miss
        has = {"cuDNN": good.cudnn, "NCCL": good.nccl, "CUDA": format_minor(good.cuda[:2])}[label]
        tag = ".".join(str(p) for p in image.cuda)
        good_tag = ".".join(str(p) for p in good.cuda)
        return (
            f"no nvidia/cuda image in the matrix bundles {label} {wanted} for CUDA {runnable[0]}.x that "
            f"driver {self.driver_text} runs (nvidia/cuda {tag} ships {label} {bundled}; {good_tag} has "
            f"{has} but needs driver >= {floor})"
        )

    def _with_needs(self, stack: Stack, row: Requirements | None, dropped: list[tuple[int, int]]) -> Stack:
        """The stack with what its wheel's METADATA adds: the tool pins and their caveat, why the
        CUDA X.Y is higher than the driver's lowest, or that the build was not measured."""
        variant = stack.variant
        caveats = list(stack.caveats)
        wheels = needs.takes_cuda_wheels(variant, self.query.strategy) and variant.cuda is None
        base_image = self.query.strategy == "base-image"
        if not (wheels or base_image):  # conda, fixed-CUDA wheels: no rule read the row
            return stack
        tools: tuple[tuple[str, str], ...] = ()
        if row is not None and wheels:
            tools = needs.toolchain(row, stack.cuda)
            if tools:
                caveats.append(needs.toolchain_caveat(row, stack.cuda, tools))
            below = [c for c in dropped if c < stack.cuda]
            if stack.mode == "minor" and below:
                miss = needs.runtime_miss(row, below[-1])
                assert miss is not None
                caveats.append(
                    f"CUDA {format_minor(stack.cuda)}: {row.cited()} requires {miss[0]}{miss[1]}, so "
                    f"{format_minor(stack.cuda)} is the lowest CUDA X.Y it installs with"
                )
        elif row is None and self.matrix.requirement_rows:
            what = (
                "the image is checked against the framework file's cudnn and nccl only"
                if base_image
                else "each nvidia-* pin follows the CUDA X.Y alone"
            )
            build = candidate_label(stack.framework, stack.release, variant)
            caveats.append(needs.NOT_MEASURED.format(build=build, what=what))
        return stack.replace(caveats=tuple(caveats), toolchain=tools, needs=row)  # type: ignore[return-value]

    def _gpu_failure(self, variant: Variant, *, allow_ptx: bool) -> Failure | None:
        platform = self.query.platform
        arch = variant.arch_for(platform)
        # a per-platform list is named with its platform: "the build's linux/arm64 archs 8.0;9.0" tells
        # a T4 user on arm64 why the amd64 wheel of the same tag would have run
        whose = f"{platform} archs" if variant.platform_arch(platform) else "archs"
        for gpu in self.query.gpus:
            if arch.covers(gpu.cc, allow_ptx=allow_ptx):
                continue
            only_ptx = arch.covers(gpu.cc, allow_ptx=True)
            why = " (PTX only, and minor-version compatibility cannot JIT it)" if only_ptx else ""
            return Failure(
                kind="gpu",
                text=f"no kernel image is available for execution on the device: "
                f"{_gpu_label(gpu)} is not in the build's {whose} "
                f"{arch.describe()}{why}",
                relax=f"dropping --gpu {gpu.name}",
            )
        return None

    def _stack(
        self,
        fw: Framework,
        release: Release,
        variant: Variant,
        cuda: tuple[int, int],
        python: tuple[int, int],
        mode: str,
        cudnn: CudnnOutcome | None,
    ) -> Stack:
        caveats: list[str] = []
        if mode == "native":
            floor_row = self.matrix.ga_floor[cuda]
            min_driver = floor_row.min_driver
            provs = [release.prov, _variant_prov(release, variant), floor_row.prov]
        else:
            compat = self.matrix.minor_compat[cuda[0]]
            min_driver = compat.min_driver
            provs = [release.prov, _variant_prov(release, variant), compat.prov]
            caveats.append(COMPAT_CAVEAT.format(cuda=format_minor(cuda), driver=self.driver_text))
        for gpu in self.query.gpus:
            provs.append(gpu.prov)
            if variant.arch_for(self.query.platform).covers(gpu.cc) == "ptx":
                caveats.append(
                    f"{_gpu_label(gpu)} runs this build through PTX JIT only: the first "
                    f"launch of each kernel compiles it, and the JIT cache needs room"
                )
        pin = cudnn.version if cudnn is not None and cudnn.pinned else None
        if cudnn is not None and pin is not None:
            assert cudnn.newest is not None
            gpu = min(self.query.gpus, key=lambda g: g.cc)
            caveats.append(
                f"cuDNN pinned to {format_minor(pin)}.* (nvidia-cudnn-cu{cuda[0]}=={format_minor(pin)}.*): "
                f"the build takes cuDNN {variant.cudnn}, whose newest release {format_minor(cudnn.newest)} "
                f"ships no kernels for {gpu.name} ({sm_name(gpu.cc)})"
            )
            provs += [row.prov for row in cudnn.rows]
        seen: set[str] = set()
        for prov in provs:
            text = _caveat(prov)
            if text and text not in seen:
                seen.add(text)
                caveats.append(text)
        assert min_driver is not None
        return Stack(
            framework=fw,
            release=release,
            variant=variant,
            cuda=cuda,
            python=python,
            min_driver=min_driver,
            mode=mode,
            caveats=tuple(caveats),
            cudnn_pin=pin,
            toolchain=(),
            needs=None,
            platform=self.query.platform,
        )

    def problems(self) -> list[str]:
        """GPUs the driver cannot drive at all (older than their first branch, newer than their last):
        no framework build changes that, and no --compat does either."""
        found = []
        for gpu in self.query.gpus:
            miss = unsupported(self.matrix, gpu, self.driver)
            if miss is not None and miss.text not in found:
                found.append(miss.text)
        return found


def _variant_prov(release: Release, variant: Variant) -> Provenance:
    """The variant's provenance named for this release: a [[release]] row lists several versions
    and shares one Variant among them, whose `where` names the row (by its first version, for
    `matrix check`); a stack's caveat must name the stack's own release. A variant whose arch list
    was measured from its wheel (arch_source) carries no caveat: `matrix check` rejects one that
    still says confidence, and a hand-edited matrix that skipped the check gets the measured fact."""
    if not variant.prov.confidence:
        return variant.prov  # no caveat comes of it: skip the copy
    return Provenance(
        where=f"{release.prov.where} variant {variant.name}",
        source=variant.prov.source,
        confidence=None if variant.arch_source else variant.prov.confidence,
        note=variant.prov.note,
    )


def _platform_failure(fw: Framework, release: Release, variant: Variant, query: Query) -> Failure:
    """A build not published for the query's platform, with where that was read; the relaxation is
    another platform only when no GPU ties the query to this one (a GB200 cannot take amd64)."""
    published = ", ".join(variant.platforms)
    source = f" (per {variant.platforms_source})" if variant.platforms_source else ""
    pinned = any(gpu.host_platforms for gpu in query.gpus)
    return Failure(
        kind="platform",
        text=f"no {query.platform} build: {fw.display_name} {release.version} [{variant.name}] "
        f"is published for {published} only{source}",
        relax=None if pinned else f"--platform {variant.platforms[0]}",
    )


def _cudnn_failure(variant: Variant, cudnn: CudnnOutcome) -> Failure:
    """ "cuDNN 9.1 ships no kernels for Tesla K80 (sm_37, needs compute capability >= 5.0)"."""
    assert cudnn.short is not None
    gpu, floor = cudnn.short
    shown = cudnn.newest or cudnn.version
    which = f"cuDNN {format_minor(shown)}" if shown else f"cuDNN {variant.cudnn}"
    text = (
        f"{which} ships no kernels for {gpu.name} ({sm_name(gpu.cc)}, needs compute capability "
        f">= {format_cc(floor)})"
    )
    if cudnn.version is None and shown and variant.cudnn and not variant.cudnn[:1].isdigit():
        text += f", nor does any older release the build accepts ({variant.cudnn})"
    return Failure(kind="gpu", text=text, relax=f"dropping --gpu {gpu.name}")


def _gpu_label(gpu: Gpu) -> str:
    cc = f"{sm_name(gpu.cc)}, compute capability {format_cc(gpu.cc)}"
    return gpu.name if gpu.name == sm_name(gpu.cc) else f"{gpu.name} ({cc})"


def resolve(matrix: Matrix, query: Query) -> Resolution:
    resolver = _Resolver(matrix, query)
    if query.frameworks:
        targets = [(f.framework, f) for f in query.frameworks]
    else:
        targets = [(fw, None) for fw in matrix.frameworks]
    stacks: list[Stack] = []
    more: dict[str, int] = {}
    rejected: list[Rejection] = []
    for framework, wanted in targets:
        found: list[Stack] = []
        for release in framework.releases:
            for variant in release.variants:
                outcome = resolver.evaluate(framework, wanted, release, variant)
                if isinstance(outcome, Stack):
                    found.append(outcome)
                else:
                    rejected.append(outcome)
        found.sort(key=lambda s: s.rank, reverse=True)
        stacks += found[: query.limit]
        if len(found) > query.limit:
            more[framework.name] = len(found) - query.limit
    problems = resolver.problems()
    if problems:
        stacks, more = [], {}
    closest: tuple[Rejection, ...] = ()
    if not stacks and rejected and not problems:  # no relaxation helps a GPU the driver cannot drive
        fewest = min(len(r.failures) for r in rejected)
        misses = [r for r in rejected if len(r.failures) == fewest]
        misses.sort(key=lambda r: r.release.key, reverse=True)
        closest = tuple(_best_per_relaxation(misses))
    return Resolution(
        query=query,
        stacks=tuple(stacks),
        more=more,
        rejected=tuple(rejected),
        problems=tuple(problems),
        closest=closest,
        with_minor_compat=_newer_with_minor_compat(matrix, query, targets, stacks),
    )


def _newer_with_minor_compat(
    matrix: Matrix,
    query: Query,
    targets: list[tuple[Framework, FrameworkFilter | None]],
    stacks: list[Stack],
) -> dict[str, Stack]:
    """Per framework returned, the best stack the same query gets under --compat minor, when that
    is a newer release than the native answer (R550: torch 2.14.1+cu126 rather than 2.7.1+cu118).

    Only releases newer than the native best are evaluated, newest first, and the first release with
    a stack ends the search (ranking puts the newest release first), so this stays a small share of
    a resolve."""
    if query.compat != "native" or not stacks:
        return {}
    best = {}
    for stack in stacks:  # best first within each framework
        best.setdefault(stack.framework.name, stack)
    resolver = _Resolver(matrix, query.replace(compat="minor"))  # type: ignore[arg-type]
    hints: dict[str, Stack] = {}
    for framework, wanted in targets:
        native = best.get(framework.name)
        if native is None:
            continue
        for release in framework.releases:  # newest first
            if release.key <= native.release.key:
                break
            found = [
                outcome
                for variant in release.variants
                if isinstance(outcome := resolver.evaluate(framework, wanted, release, variant), Stack)
            ]
            if found:
                hints[framework.name] = max(found, key=lambda s: s.rank)
                break
    return hints


def _best_per_relaxation(misses: list[Rejection], limit: int = 5) -> list[Rejection]:
    """The newest miss per (framework, change that would fix it), so hints stay varied."""
    picked: list[Rejection] = []
    seen: set[tuple[str, tuple[str | None, ...]]] = set()
    for miss in misses:
        key = (miss.framework.name, tuple(f.relax for f in miss.failures))
        if key in seen:
            continue
        seen.add(key)
        picked.append(miss)
        if len(picked) == limit:
            break
    return picked
