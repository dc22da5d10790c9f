"""Cross-reference checks for `envbuild matrix check`, beyond the per-row schema.

The schema says a row is well formed; these say the rows agree with each other, so that a resolver
reading them cannot produce a stack the data does not support.
"""

from __future__ import annotations

from collections import Counter

from envbuild.matrix.gpufeatures import has_bf16, has_fp16
from envbuild.matrix.gpunames import name_key
from envbuild.matrix.model import Gpu, Matrix, Variant, find_gpu, gpu_index
from envbuild.matrix.platforms import DEFAULT_PLATFORM, PLATFORMS
from envbuild.matrix.schema import GPU_SEGMENTS
from envbuild.matrix.versions import format_driver, format_minor


def check_matrix(matrix: Matrix) -> list[str]:
    return (
        _check_cuda(matrix)
        + _check_branches(matrix)
        + _check_gpus(matrix)
        + _check_frameworks(matrix)
        + _check_images(matrix)
        + _check_requirements(matrix)
        + _check_platforms(matrix)
    )


def summary(matrix: Matrix) -> str:
    releases = sum(len(fw.releases) for fw in matrix.frameworks)
    variants = sum(len(r.variants) for fw in matrix.frameworks for r in fw.releases)
    frameworks = ", ".join(f"{fw.name} {len(fw.releases)}" for fw in matrix.frameworks)
    return (
        f"{len(matrix.cuda)} CUDA releases, {len(matrix.branches)} driver branches, "
        f"{len(matrix.gpus)} GPUs, {len(matrix.cudnn)} cuDNN rows, {len(matrix.images)} base "
        f"images, {releases} framework releases ({frameworks}) with {variants} CUDA builds; "
        f"digest {matrix.digest[:12]}"
    )


def _check_cuda(matrix: Matrix) -> list[str]:
    errors = []
    versions = Counter(c.version for c in matrix.cuda)
    errors += [
        f"drivers.toml: CUDA {format_minor(v)} is listed {n} times" for v, n in versions.items() if n > 1
    ]
    minors = {c.version[:2] for c in matrix.cuda}
    ga_count = Counter(c.version[:2] for c in matrix.cuda if c.ga)
    for minor in sorted(minors):
        if ga_count[minor] != 1:
            errors.append(
                f"drivers.toml: CUDA {format_minor(minor)} has {ga_count[minor]} rows "
                f"with ga = true; exactly one is needed (it sets the native floor)"
            )
    # minimum drivers never go down as CUDA goes up
    last = None
    for row in matrix.cuda:
        if row.min_driver is None:
            continue
        if last and row.min_driver < last.min_driver:
            errors.append(
                f"drivers.toml: CUDA {format_minor(row.version)} needs driver "
                f"{format_driver(row.min_driver)}, lower than CUDA "
                f"{format_minor(last.version)}'s {format_driver(last.min_driver)}"
            )
        last = row
    # the 11.x floor (450.80.02) is above 11.0 GA's own driver (450.51.05), so no ordering
    # against GA floors holds; a floor only has to name a major that has releases
    for major in matrix.minor_compat:
        if not any(m[0] == major for m in matrix.ga_floor):
            errors.append(f"drivers.toml: [[minor_compat]] {major} names a CUDA major with no GA release")
    return errors


def _check_branches(matrix: Matrix) -> list[str]:
    errors = []
    for branch in matrix.branches.values():
        # every CUDA whose GA floor lies in this branch or an older one runs natively on it
        for minor, row in matrix.ga_floor.items():
            if row.min_driver and row.min_driver[0] <= branch.branch and minor > branch.native_cuda:
                errors.append(
                    f"drivers.toml: R{branch.branch} says native CUDA "
                    f"{format_minor(branch.native_cuda)}, but CUDA {format_minor(minor)}"
                    f"'s GA floor {format_driver(row.min_driver)} is in that branch or "
                    f"an older one"
                )
        # and no CUDA whose floor is in a newer branch
        for minor, row in matrix.ga_floor.items():
            if row.min_driver and row.min_driver[0] > branch.branch and minor <= branch.native_cuda:
                errors.append(
                    f"drivers.toml: R{branch.branch} says native CUDA "
                    f"{format_minor(branch.native_cuda)}, but CUDA {format_minor(minor)} "
                    f"needs {format_driver(row.min_driver)}"
                )
    return errors


def _check_gpus(matrix: Matrix) -> list[str]:
    errors = _check_gpu_names(matrix)
    for gpu in matrix.gpus:
        if gpu.max_driver_branch and gpu.max_driver_branch not in matrix.branches:
            errors.append(
                f"gpus.toml: {gpu.name}: max_driver_branch {gpu.max_driver_branch} is not a known branch"
            )
        if gpu.min_driver_branch and gpu.min_driver_branch not in matrix.branches:
            errors.append(
                f"gpus.toml: {gpu.name}: min_driver_branch {gpu.min_driver_branch} is not a known branch"
            )
        errors += _check_first_cuda(matrix, gpu)
        errors += _check_features(gpu)
    # one capability, one architecture, one first CUDA: a capability query takes the lowest, so a
    # row that disagrees would lower the floor of every GPU it shares the capability with
    firsts: dict[tuple[int, int], Gpu] = {}
    for gpu in matrix.gpus:
        first = firsts.setdefault(gpu.cc, gpu)
        if first.first_cuda != gpu.first_cuda:
            errors.append(
                f"gpus.toml: {gpu.name}: first_cuda {format_minor(gpu.first_cuda)} differs from "
                f"{first.name}'s {format_minor(first.first_cuda)} (compute capability {format_minor(gpu.cc)})"
            )
        # a capability query names one architecture (the stand-in takes the first row's), so a
        # catalogue of hundreds of rows must not let one typo give a capability two
        if first.architecture != gpu.architecture:
            errors.append(
                f"gpus.toml: {gpu.name}: architecture {gpu.architecture!r} differs from {first.name}'s "
                f"{first.architecture!r} (compute capability {format_minor(gpu.cc)}); one capability is "
                f"one architecture"
            )
    return errors


def _check_gpu_names(matrix: Matrix) -> list[str]:
    """Every name and alias normalises to its own row: a key two rows share finds only the first, so
    the second row's alias silently names another GPU; a label with no telling word ("NVIDIA",
    "80GB") finds nothing. Redundant aliases (memory or form-factor spellings of the name) pass."""
    errors = []
    index = gpu_index(matrix)
    for gpu in matrix.gpus:
        for label in (gpu.name, *gpu.aliases):
            key = name_key(label)
            what = "name" if label == gpu.name else "alias"
            if not key:
                errors.append(
                    f"gpus.toml: {gpu.name}: {what} {label!r} normalises to nothing (vendor, memory and "
                    f"form-factor words are ignored); fix: drop it, or write the model it names"
                )
                continue
            reached = find_gpu(matrix, label, index)
            if reached is not gpu:
                errors.append(
                    f"gpus.toml: {gpu.name}: {what} {label!r} normalises to {key!r}, which reaches "
                    f"{reached.name if reached else 'no row'!r} instead: aliases must be unique once "
                    f"normalised; fix: drop it from one of the rows, or keep the word that tells the "
                    f"two GPUs apart"
                )
    return errors


def _check_features(gpu: Gpu) -> list[str]:
    """Every row says which of NVIDIA's lists it is on, and its formats agree with its capability: a
    row claiming bf16 on a Pascal card would let the smoke step ask for what the GPU cannot do."""
    where = f"gpus.toml: {gpu.name}"
    errors = []
    if gpu.segment is None:
        errors.append(f"{where}: no segment; write one of {', '.join(GPU_SEGMENTS)}")
    elif (gpu.segment == "jetson") != gpu.integrated:
        errors.append(f'{where}: segment "jetson" and integrated = true go together')
    cc = format_minor(gpu.cc)
    for field, claimed, has in (("bf16", gpu.bf16, has_bf16), ("fp16", gpu.fp16, has_fp16)):
        if claimed != has(gpu.cc):
            errors.append(
                f"{where}: {field} = {str(claimed).lower()} disagrees with compute capability {cc}; "
                f"fix: write {field} = {str(has(gpu.cc)).lower()}, or correct compute_capability"
            )
    return errors


def _check_first_cuda(matrix: Matrix, gpu: Gpu) -> list[str]:
    """first_cuda must name a CUDA whose GA driver is known (unless older than every one: no floor),
    and come no later than the newest CUDA of the GPU's last driver branch."""
    errors = []
    known = sorted(m for m, row in matrix.ga_floor.items() if row.min_driver)
    first = format_minor(gpu.first_cuda)
    if known and gpu.first_cuda >= known[0] and gpu.first_cuda not in known:
        errors.append(
            f"gpus.toml: {gpu.name}: first_cuda {first} is not a CUDA release with a GA minimum driver "
            f"in drivers.toml, so its first driver branch cannot be derived"
        )
    last = matrix.branches.get(gpu.max_driver_branch) if gpu.max_driver_branch else None
    if last is not None and gpu.first_cuda > last.native_cuda:
        errors.append(
            f"gpus.toml: {gpu.name}: first_cuda {first} is newer than CUDA "
            f"{format_minor(last.native_cuda)}, the newest of its last branch R{last.branch}"
        )
    return errors


def _check_frameworks(matrix: Matrix) -> list[str]:
    errors = []
    known_minors = set(matrix.ga_floor)
    aliases: dict[str, str] = {}
    for fw in matrix.frameworks:
        for name in (fw.name, *fw.aliases):
            other = aliases.setdefault(name, fw.name)
            if other != fw.name:
                errors.append(f"framework name {name!r} is used by {other} and {fw.name}")
        counts = Counter(r.version for r in fw.releases)
        errors += [f"{fw.name}: release {v} is listed {n} times" for v, n in counts.items() if n > 1]
        checked: set[int] = set()
        for release in fw.releases:
            if id(release.variants) in checked:
                continue
            checked.add(id(release.variants))
            where = release.prov.where
            names = Counter(v.name for v in release.variants)
            errors += [f"{where}: variant {n!r} is listed twice" for n, c in names.items() if c > 1]
            if release.pypi_variant and release.pypi_variant not in names:
                errors.append(
                    f"{where}: pypi_variant {release.pypi_variant!r} is not one of its "
                    f"variants ({', '.join(names)})"
                )
            for variant in release.variants:
                if variant.arch_source and variant.prov.confidence:
                    errors.append(
                        f"{variant.prov.where}: arch_source says the arch list was measured from "
                        f"the wheel, but the row is still marked confidence = "
                        f"{variant.prov.confidence!r}; drop confidence (say any other doubt in note)"
                    )
                minor = variant.cuda or variant.cuda_min
                assert minor is not None
                row = matrix.ga_floor.get(minor)
                if minor not in known_minors:
                    errors.append(
                        f"{variant.prov.where}: CUDA {format_minor(minor)} is not a CUDA "
                        f"release in drivers.toml"
                    )
                elif row is None or row.min_driver is None:
                    errors.append(
                        f"{variant.prov.where}: CUDA {format_minor(minor)} has no known "
                        f"GA minimum driver, so no driver could be checked against it"
                    )
    return errors


def _check_images(matrix: Matrix) -> list[str]:
    errors = []
    known = {c.version for c in matrix.cuda}
    for image in matrix.images:
        where = image.prov.where
        if image.cuda not in known:
            errors.append(f"{where}: CUDA {format_minor(image.cuda)} is not in drivers.toml")
        extra = set(image.cudnn_os) - set(image.os)
        if extra:
            errors.append(f"{where}: cudnn_os names OSes without base images: {sorted(extra)}")
        if image.cudnn_os and not image.cudnn_tag:
            errors.append(f"{where}: cudnn_os is set but cudnn_tag is not")
    minors = known_minors_of(matrix)
    majors = {m[0] for m in minors}
    for cudnn in matrix.cudnn:
        for low, high in cudnn.cuda:
            for end in (low, high):
                # cuDNN also built for CUDA 10.2; only majors drivers.toml covers are checkable
                if end[0] in majors and end not in minors:
                    errors.append(
                        f"{cudnn.prov.where}: CUDA {format_minor(end)} is not a CUDA release in drivers.toml"
                    )
    return errors


def _check_requirements(matrix: Matrix) -> list[str]:
    """Every requirements.toml row names a build the framework files offer, and a fixed-CUDA
    build's own runtime requirement admits the CUDA X.Y its variant says it ships."""
    from envbuild.matrix.bounds import admits_prefix

    errors = []
    for row in matrix.requirement_rows.values():
        fw = next((f for f in matrix.frameworks if f.name == row.framework), None)
        if fw is None:
            known = ", ".join(f.name for f in matrix.frameworks)
            errors.append(f"{row.where}: framework {row.framework!r} is not in frameworks/*.toml ({known})")
            continue
        release = next((r for r in fw.releases if r.version == row.version), None)
        if release is None:
            errors.append(
                f"{row.where}: {fw.name} {row.version} is not a release in frameworks/{fw.name}.toml "
                f"(newest: {', '.join(r.version for r in fw.releases[:3])})"
            )
            continue
        variant = next((v for v in release.variants if v.name == row.variant), None)
        if variant is None:
            names = ", ".join(v.name for v in release.variants)
            errors.append(f"{row.where}: {fw.name} {row.version} has no variant {row.variant!r} ({names})")
            continue
        if variant.cuda is None:
            continue
        major = variant.cuda[0]
        name = f"nvidia-cuda-runtime-cu{major}" if major <= 12 else "nvidia-cuda-runtime"
        bound = row.bounds.get(name)
        if bound is not None and not admits_prefix(bound, variant.cuda):
            errors.append(
                f"{row.where}: {name}{bound} installs no CUDA {format_minor(variant.cuda)} runtime, "
                f"but {variant.prov.where} says cuda = {format_minor(variant.cuda)!r}"
            )
    return errors


def known_minors_of(matrix: Matrix) -> set[tuple[int, int]]:
    return {c.version[:2] for c in matrix.cuda}


def _check_arch_by_platform(variant: Variant) -> list[str]:
    """A per-platform arch list is for a platform the build is published for, and says something: a
    list for a platform the variant lacks would never be read, and one equal to `arch` hides nothing
    but makes a reader look twice."""
    errors = []
    for entry in variant.arch_by_platform:
        where = f"{variant.prov.where}: arch_by_platform {entry.platform}"
        if entry.platform not in variant.platforms:
            errors.append(
                f"{where}: the build is not published for {entry.platform} (its platforms: "
                f"{', '.join(variant.platforms) or 'none'}); drop the entry, or add the platform with its "
                f"platforms_source"
            )
        if (entry.arch.sass, entry.arch.ptx) == (variant.arch.sass, variant.arch.ptx):
            errors.append(f"{where}: the same list as arch ({variant.arch.describe()}); drop the entry")
    return errors


def _check_platforms(matrix: Matrix) -> list[str]:
    """Every build and image says which platforms it publishes, every claim beyond linux/amd64 names
    where it was read, and the GPUs that come only in arm64 hosts (or are Jetson) say so coherently:
    otherwise a Grace host could be handed an amd64-only answer, or a Jetson a data-center stack."""
    errors = []
    for fw in matrix.frameworks:
        seen: set[int] = set()
        for release in fw.releases:
            if id(release.variants) in seen:
                continue
            seen.add(id(release.variants))
            for variant in release.variants:
                where = variant.prov.where
                if not variant.platforms:
                    errors.append(
                        f"{where}: no platforms; give platforms = [...] on the variant, its [[release]] "
                        f"or [framework] ({', '.join(PLATFORMS)})"
                    )
                unknown = [p for p in variant.platforms if p not in PLATFORMS]
                if unknown:
                    errors.append(f"{where}: unknown platforms {unknown} (known: {', '.join(PLATFORMS)})")
                if set(variant.platforms) - {DEFAULT_PLATFORM} and not variant.platforms_source:
                    errors.append(
                        f"{where}: platforms {list(variant.platforms)} without platforms_source; cite the "
                        f"index or file list the non-amd64 wheels were read from"
                    )
                errors += _check_arch_by_platform(variant)
    for image in matrix.images:
        if not image.platforms:
            errors.append(f"{image.prov.where}: no platforms; give the platforms its tags are published for")
    arm64_builds = any(
        "linux/arm64" in v.platforms for fw in matrix.frameworks for r in fw.releases for v in r.variants
    )
    for gpu in matrix.gpus:
        where = f"gpus.toml: {gpu.name}"
        unknown = [p for p in gpu.host_platforms if p not in PLATFORMS]
        if unknown:
            errors.append(f"{where}: unknown host_platforms {unknown} (known: {', '.join(PLATFORMS)})")
        if gpu.integrated and gpu.host_platforms != ("linux/arm64",):
            errors.append(
                f'{where}: integrated (Jetson/Tegra) GPUs are arm64: host_platforms = ["linux/arm64"]'
            )
        if gpu.integrated and not gpu.integrated_stack:
            errors.append(f"{where}: integrated without integrated_stack; name what such a GPU uses instead")
        if gpu.integrated_stack and not gpu.integrated:
            errors.append(f"{where}: integrated_stack is set but integrated is not")
        if gpu.host_platforms == ("linux/arm64",) and not gpu.integrated and not arm64_builds:
            errors.append(f"{where}: comes only in arm64 hosts, but no framework build publishes linux/arm64")
    return errors
