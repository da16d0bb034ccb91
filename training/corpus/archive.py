"""Which Debian packages ship German catalogs, and fetching their catalogs one package at a time.

`select_packages` reads the archive's Contents index (dists/RELEASE/main/Contents-{all,ARCH}.gz:
every file path of every binary package), keeps the packages with a German catalog
(`.../locale/de/LC_MESSAGES/*.mo` or `de_DE`), leaves out the held-out packages by name, and pins
each to the version, architecture and SHA-256 that apt knows (`apt-cache show`). That pinned list
(sources.tsv) is all a rebuild needs: `fetch_batch` downloads exactly that .deb
(`apt-get download pkg=version`, or the pool file under a mirror such as snapshot.debian.org when
the version has left the live mirror), checks its SHA-256, copies the catalogs and the package's
copyright file out of it, and deletes the .deb, so the disk holds one batch of .debs per worker.
"""
from __future__ import annotations

import csv
import fnmatch
import gzip
import json
import re
import shutil
import subprocess
import tarfile
import tempfile
import urllib.request
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable, Sequence

from model.model_dir import sha256_file

# Kept out of the corpus for outside evaluation (issue 31): never read, whatever their catalogs hold.
HELD_OUT = frozenset({
    "apt", "bash", "coreutils", "diffutils", "dpkg", "e2fsprogs-l10n", "findutils", "gettext-base", "grep",
    "iso-codes", "libc-l10n", "libglib2.0-data", "nano", "procps", "sed", "tar", "util-linux-locales", "wget",
})
CATALOG_PATH = re.compile(r"(?:^|/)locale/de(?:_DE)?/LC_MESSAGES/[^/]+\.mo$")
SOURCES_COLUMNS = ("package", "version", "architecture", "source", "size", "sha256", "filename")


@dataclass(frozen=True)
class Source:
    """One pinned binary package: what `apt-get download package=version` fetches."""

    package: str
    version: str
    architecture: str
    source: str      # the source package (the unit of the train/valid/test split)
    size: int
    sha256: str
    filename: str    # the pool path on a Debian mirror


def packages_with_catalogs(contents: Iterable[str]) -> set[str]:
    """Binary package names a Contents index lists for a German catalog path."""
    names: set[str] = set()
    for line in contents:
        path, _, locations = line.rstrip("\n").rpartition(" ")
        if not CATALOG_PATH.search(path.strip()):
            continue
        names.update(location.rsplit("/", 1)[-1] for location in locations.split(","))
    return names


def read_contents(paths: Sequence[Path]) -> Iterable[str]:
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as handle:
            yield from handle


def parse_apt_show(text: str) -> list[Source]:
    """The records of `apt-cache show --no-all-versions` output."""
    sources = []
    for record in text.split("\n\n"):
        values: dict[str, str] = {}
        for line in record.splitlines():
            if line[:1] not in ("", " ") and ":" in line:
                key, _, value = line.partition(":")
                values[key] = value.strip()
        if "Package" not in values:
            continue
        source = values.get("Source", values["Package"]).split(" ")[0]
        sources.append(Source(values["Package"], values["Version"], values["Architecture"], source,
                              int(values["Size"]), values["SHA256"], values["Filename"]))
    return sources


def pin_versions(names: Iterable[str]) -> tuple[list[Source], list[str]]:
    """(pinned sources, names apt does not know): apt's candidate version of each package."""
    names = sorted(set(names))
    sources: dict[str, Source] = {}
    for start in range(0, len(names), 200):
        chunk = names[start:start + 200]
        done = subprocess.run(["apt-cache", "show", "--no-all-versions", *chunk], capture_output=True, text=True)
        for source in parse_apt_show(done.stdout):
            sources.setdefault(source.package, source)
    return [sources[n] for n in names if n in sources], [n for n in names if n not in sources]


def select_packages(contents: Sequence[Path]) -> tuple[list[Source], list[str]]:
    names = packages_with_catalogs(read_contents(contents)) - HELD_OUT
    return pin_versions(names)


def write_sources(path: Path, sources: Sequence[Source]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(SOURCES_COLUMNS)
        for source in sources:
            writer.writerow([getattr(source, c) for c in SOURCES_COLUMNS])


def read_sources(path: Path) -> list[Source]:
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))
    if not rows or tuple(rows[0]) != SOURCES_COLUMNS:
        raise ValueError(f"{path}: the first line must be the columns {' '.join(SOURCES_COLUMNS)}")
    types = {f.name: f.type for f in fields(Source)}
    out = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(SOURCES_COLUMNS):
            raise ValueError(f"{path}:{number}: {len(row)} columns, expected {len(SOURCES_COLUMNS)}")
        values = dict(zip(SOURCES_COLUMNS, row))
        held = values["package"] in HELD_OUT
        if held:
            raise ValueError(f"{path}:{number}: {values['package']} is held out for outside evaluation")
        out.append(Source(**{k: int(v) if types[k] in (int, "int") else v for k, v in values.items()}))
    return out


def _download(batch: Sequence[Source], directory: Path, mirror: str | None) -> dict[str, Path]:
    """{package: its .deb in directory}; one apt-get call for a whole batch (apt reads its cache
    once per call, a second of CPU)."""
    if mirror is None:
        done = subprocess.run(["apt-get", "download", "-q", *(f"{s.package}={s.version}" for s in batch)],
                              cwd=directory, capture_output=True, text=True)
        debs = {}
        for deb in directory.glob("*.deb"):
            debs[deb.name.split("_", 1)[0]] = deb
        missing = [s.package for s in batch if s.package not in debs]
        if missing:
            last = (done.stderr.strip().splitlines() or ["no .deb written"])[-1]
            raise RuntimeError(f"apt-get download gave no .deb for {' '.join(missing)}: {last}")
        return debs
    debs = {}
    for source in batch:
        target = directory / Path(source.filename).name
        with urllib.request.urlopen(mirror.rstrip("/") + "/" + source.filename, timeout=120) as response, \
                open(target, "wb") as out:
            shutil.copyfileobj(response, out)
        debs[source.package] = target
    return debs


def is_fetched(source: Source, cache: Path) -> bool:
    marker = cache / source.package / "fetched.json"
    return marker.is_file() and json.loads(marker.read_text())["sha256"] == source.sha256


def fetch_batch(batch: Sequence[Source], cache: Path, mirror: str | None = None) -> None:
    """cache/PACKAGE/ for every source of the batch: the package's catalogs (at their paths in the
    package), its copyright file and fetched.json (written last: it marks a whole extraction)."""
    with tempfile.TemporaryDirectory(dir=cache) as temporary:
        debs = _download(batch, Path(temporary), mirror)
        for source in batch:
            deb = debs[source.package]
            digest = sha256_file(deb)
            if digest != source.sha256:
                raise RuntimeError(f"{deb.name}: SHA-256 {digest}, the sources list pins {source.sha256}")
            staging = Path(temporary) / source.package
            catalogs, doc_link = extract(deb, staging, source.package)
            deb.unlink()
            staging.mkdir(exist_ok=True)
            (staging / "fetched.json").write_text(json.dumps(
                {**asdict(source), "catalogs": catalogs, "doc_link": doc_link}, indent=1) + "\n")
            directory = cache / source.package
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)


def extract(deb: Path, out: Path, package: str) -> tuple[list[str], str | None]:
    """Copy the German catalogs and usr/share/doc/PACKAGE/copyright out of a .deb (streamed through
    dpkg-deb, whatever the data member's compression). Returns (catalog paths, the target of
    usr/share/doc/PACKAGE when that is a symbolic link to another package's directory)."""
    copyright_path = f"usr/share/doc/{package}/copyright"
    catalogs: list[str] = []
    doc_link = None
    with subprocess.Popen(["nice", "-n", "10", "dpkg-deb", "--fsys-tarfile", str(deb)],
                          stdout=subprocess.PIPE) as process:
        assert process.stdout is not None
        with tarfile.open(fileobj=process.stdout, mode="r|") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                if name == f"usr/share/doc/{package}" and member.issym():
                    doc_link = member.linkname
                if not member.isfile() or not (name == copyright_path or CATALOG_PATH.search(name)):
                    continue
                target = out / name
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = archive.extractfile(member)
                assert handle is not None
                target.write_bytes(handle.read())
                if name != copyright_path:
                    catalogs.append(name)
        process.stdout.read()
    if process.returncode != 0:
        raise RuntimeError(f"dpkg-deb --fsys-tarfile {deb.name} exited with {process.returncode}")
    return sorted(catalogs), doc_link


def licence_of(copyright_text: str) -> str:
    """The licence of a package's German catalog by its copyright file: in a machine-readable
    (DEP-5) file the License of the last Files stanza matching po/de.po (DEP-5: the last match
    wins; `*` matches everything); else the licence the text names first."""
    licence = None
    for stanza in re.split(r"\n[ \t]*\n", copyright_text):
        files = re.search(r"^Files:[ \t]*((?:.*\n?)(?:[ \t]+.*\n?)*)", stanza, re.MULTILINE)
        name = re.search(r"^License:[ \t]*(\S.*)$", stanza, re.MULTILINE)
        if files and name and any(fnmatch.fnmatchcase(path, pattern) for pattern in files.group(1).split()
                                  for path in ("po/de.po", "de.po")):
            licence = name.group(1).strip()
    if licence is not None:
        return licence
    for pattern, name in ((r"GNU Lesser General Public License|LGPL", "LGPL"),
                          (r"GNU (?:Library )?General Public License|GPL", "GPL"),
                          (r"BSD", "BSD"), (r"MIT|Expat", "MIT"), (r"Artistic", "Artistic"),
                          (r"Apache", "Apache"), (r"Mozilla Public License|MPL", "MPL")):
        if re.search(pattern, copyright_text):
            return f"{name} (named in the copyright file's text)"
    return "see the copyright file"
