"""Install a rendered context's micromamba explicit files into a prefix on the host, with rattler.

No micromamba image can be pulled here, so this is how the tests show a lock installable: the
explicit lines (`URL#sha256:<hex>`) are the only input. Each URL's package record (its depends,
paths, noarch kind) comes from the channel's repodata, fetched by rattler's Gateway for the exact
name, version and build the file name gives and required to be that very URL; the record's sha256
is then set to the line's, so rattler's installer checks each downloaded file against the lock's
hash, as micromamba does, and not against whatever the channel says today.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path


class ExplicitLine:
    """One `URL#sha256:<hex>` line, split: the channel URL, subdir, file name, and hash."""

    def __init__(self, line: str) -> None:
        self.url, _, digest = line.partition("#")
        assert digest.startswith("sha256:") and len(digest) == 71, line
        self.sha256 = digest.removeprefix("sha256:")
        base, self.subdir, self.file_name = self.url.rsplit("/", 2)
        self.channel = base
        stem = self.file_name.removesuffix(".tar.bz2").removesuffix(".conda")
        self.name, self.version, self.build = stem.rsplit("-", 2)


def read_explicit(path: Path) -> list[ExplicitLine]:
    """The package lines of an explicit file (after `@EXPLICIT`; comments and blanks skipped)."""
    lines = path.read_text().splitlines()
    assert "@EXPLICIT" in lines, f"{path} is not an explicit file"
    body = lines[lines.index("@EXPLICIT") + 1 :]
    return [ExplicitLine(line) for line in body if line.strip() and not line.startswith("#")]


def channel_records(lines: list[ExplicitLine], cache: Path) -> list:
    """The RepoDataRecord each line's URL has in its channel's repodata today, as the channel says."""
    import rattler

    async def query() -> list:
        gateway = rattler.Gateway(cache_dir=cache)
        found = []
        for line in lines:
            spec = rattler.MatchSpec(f"{line.name}=={line.version}={line.build}")
            channel = [rattler.Channel(line.channel)]
            result = await gateway.query(channel, [line.subdir], [spec], recursive=False)
            matches = [r for group in result for r in group if str(r.url) == line.url]
            assert len(matches) == 1, f"{line.url} is not in its channel's {line.subdir}/repodata.json"
            found.append(matches[0])
        return found

    return asyncio.run(query())


def records_for(lines: list[ExplicitLine], cache: Path) -> list:
    """The records to install: the channel's, each carrying its line's (the lock's) sha256."""
    records = channel_records(lines, cache)
    for record, line in zip(records, lines, strict=True):
        record.sha256 = bytes.fromhex(line.sha256)
    return records


def install_explicit(files: list[Path], prefix: Path, cache: Path) -> None:
    """Every explicit file's packages, one rattler install per file (as the Dockerfile runs one
    micromamba install per layer), each adding to what the one before left: rattler installs the
    environment it is given, so each install is given the earlier files' records too."""
    import rattler

    wanted: list = []
    for index, path in enumerate(files):
        wanted += records_for(read_explicit(path), cache / f"repodata-{index}")
        meta = sorted((prefix / "conda-meta").glob("*.json")) if prefix.exists() else []
        installed = [rattler.PrefixRecord.from_path(path) for path in meta]
        asyncio.run(
            rattler.install(
                list(wanted),
                prefix,
                cache_dir=cache / "packages",
                installed_packages=installed,
                show_progress=False,
                execute_link_scripts=False,
            )
        )


def installed_packages(prefix: Path) -> set[tuple[str, str, str, str]]:
    """(name, version, build, url) of every package conda-meta lists."""
    found = set()
    for meta in (prefix / "conda-meta").glob("*.json"):
        record = json.loads(meta.read_text())
        found.add((record["name"], record["version"], record["build"], record["url"]))
    return found
