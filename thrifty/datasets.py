"""Benchmark datasets with their real feature costs: load, verify, download and convert."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import shutil
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty.costs import CostModel
from thrifty.exceptions import InputError

__all__ = [
    "ChecksumError",
    "Dataset",
    "convert",
    "download",
    "list_datasets",
    "load",
    "load_demo",
    "yahoo_costs",
]

ENV_VAR = "THRIFTY_DATA"

# Order of the split files in ``Dataset.X`` (and of the rows of each split in ``splits``).
_SPLIT_ORDER = ("train", "valid", "test")

# heart and sonar ship as one file and the papers cross-validate them; for a fixed hold-out
# we use a stratified 70/30 split with this seed.
_HOLDOUT_TEST_SIZE = 0.3
_HOLDOUT_SEED = 0


class ChecksumError(OSError):
    """A dataset file's sha256 differs from the one its ``meta.json`` records."""


# --------------------------------------------------------------------------------------------
# Dataset
# --------------------------------------------------------------------------------------------
@dataclass(repr=False)
class Dataset:
    """A benchmark dataset: all rows, their labels, named splits and the feature costs.

    Attributes
    ----------
    name : str
    task : {"binary", "multiclass", "ranking", "regression"}
    X : pandas.DataFrame
        Every row (for multi-file datasets: train rows, then valid, then test; single-file
        datasets keep the file's row order). Columns are ``meta["features"]``; the columns in
        ``meta["categorical"]`` have pandas ``category`` dtype (categories: the sorted values
        found in all rows). Missing values are NaN.
    y : numpy.ndarray
        Labels as read from the files (text labels stay text, e.g. letter's ``"A"`` to ``"Z"``).
    qid : numpy.ndarray of int64 or None
        Query id of each row (ranking only). Ids are made unique across files: a file whose
        ids would collide with an earlier file's is shifted past that file's largest id, so a
        qid never names two different queries (rank_small: train 0-200, test 201-250).
    splits : dict of str to numpy.ndarray of int64
        Row positions in ``X`` of each split: ``"train"``, ``"test"`` and ``"valid"`` when the
        dataset has one. They are disjoint and cover every row.
    costs : thrifty.CostModel
        Real per-feature costs where the dataset has them (heart, thyroid), 1 per feature
        otherwise; dependencies (thyroid's FTI needs TT4 and T4U) are included.
    meta : dict
        The ``meta.json`` content, plus the facts this module adds (``dependencies``).
    path : pathlib.Path or None
        Folder the data was read from (None for the embedded demo data).
    """

    name: str
    task: str
    X: pd.DataFrame
    y: np.ndarray
    qid: np.ndarray | None
    splits: dict[str, np.ndarray]
    costs: CostModel
    meta: dict[str, Any]
    path: Path | None = field(default=None)

    @property
    def feature_names(self) -> list[str]:
        """Names of the feature columns, in order."""
        return list(self.meta["features"])

    @property
    def categorical(self) -> list[str]:
        """Names of the categorical feature columns."""
        return list(self.meta.get("categorical") or [])

    def subset(self, split: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
        """The rows of one split.

        Parameters
        ----------
        split : str
            A key of ``splits`` (``"train"``, ``"valid"``, ``"test"``).

        Returns
        -------
        X : pandas.DataFrame
            The split's rows; the index keeps their positions in the full ``X``.
        y : numpy.ndarray
        qid : numpy.ndarray or None
        """
        if split not in self.splits:
            raise KeyError(
                f"dataset {self.name!r} has no split {split!r}; its splits are {list(self.splits)}"
            )
        idx = self.splits[split]
        return self.X.iloc[idx], self.y[idx], (None if self.qid is None else self.qid[idx])

    def query_sizes(self, split: str) -> np.ndarray:
        """Sizes of the consecutive query groups of a ranking split (LightGBM's ``group=``).

        Raises
        ------
        ValueError
            If the dataset is not a ranking dataset or a query's rows are not consecutive.
        """
        if self.qid is None:
            raise InputError(f"dataset {self.name!r} is not a ranking dataset (it has no qid)")
        q = self.qid[self.splits[split]]
        if len(q) == 0:
            return np.zeros(0, dtype=np.int64)
        starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
        if len(np.unique(q)) != len(starts):
            raise InputError(f"the rows of some queries of split {split!r} are not consecutive")
        return np.diff(np.r_[starts, len(q)]).astype(np.int64)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(v)}" for k, v in self.splits.items())
        return (
            f"Dataset({self.name!r}, task={self.task!r}, rows={len(self.X)}, "
            f"features={self.X.shape[1]}, {sizes}, costs={self.costs!r})"
        )


# --------------------------------------------------------------------------------------------
# Registry: what meta.json does not say
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Source:
    """One original file: where it is published and, when known, its sha256."""

    url: str
    # None = not recorded: this module was written without network access, so the originals'
    # checksums could not be taken. The converted files are checksummed in their meta.json.
    sha256: str | None = None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class _Spec:
    name: str
    meta: dict[str, Any]  # the meta.json a conversion writes (without "files")
    sources: tuple[_Source, ...]
    convert: Callable[[Mapping[str, Path], Path], dict[str, Any]]
    origin: str  # the original public address (may differ from sources, see higgs_small)
    holdout: tuple | None = None  # split rule of single-file datasets
    extra: dict[str, Any] = field(default_factory=dict)  # merged into meta at load time


_UCI = "https://archive.ics.uci.edu/static/public"
_LGB = "https://raw.githubusercontent.com/microsoft/LightGBM/master/examples"
_FNAN = "https://raw.githubusercontent.com/fnan/FeatureBudgetedRandomForest/master"

_ADULT_FEATURES = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
]
_LETTER_FEATURES = [
    "x_box",
    "y_box",
    "width",
    "high",
    "onpix",
    "x_bar",
    "y_bar",
    "x2bar",
    "y2bar",
    "xybar",
    "x2ybr",
    "xy2br",
    "x_ege",
    "xegvy",
    "y_ege",
    "yegvx",
]
_HEART_FEATURES = [
    "age",
    "sex",
    "cp",
    "trestbps",
    "chol",
    "fbs",
    "restecg",
    "thalach",
    "exang",
    "oldpeak",
    "slope",
    "ca",
    "thal",
]
_THYROID_FEATURES = [
    "age",
    "sex",
    "on_thyroxine",
    "query_on_thyroxine",
    "on_antithyroid_medication",
    "sick",
    "pregnant",
    "thyroid_surgery",
    "I131_treatment",
    "query_hypothyroid",
    "query_hyperthyroid",
    "lithium",
    "goitre",
    "tumor",
    "hypopituitary",
    "psych",
    "TSH",
    "T3",
    "TT4",
    "T4U",
    "FTI",
]
# Turney (1995), UCI heart-disease.cost / ann-thyroid.cost, Canadian dollars per test.
_HEART_COSTS = {
    "age": 1.0,
    "sex": 1.0,
    "cp": 1.0,
    "trestbps": 1.0,
    "chol": 7.27,
    "fbs": 5.2,
    "restecg": 15.5,
    "thalach": 102.9,
    "exang": 87.3,
    "oldpeak": 87.3,
    "slope": 87.3,
    "ca": 100.9,
    "thal": 102.9,
}
_THYROID_COSTS = {
    **{f: 1.0 for f in _THYROID_FEATURES[:16]},
    "TSH": 22.78,
    "T3": 11.41,
    "TT4": 14.51,
    "T4U": 11.41,
}
# processed.cleveland.data codes -> the text codes of thrifty's heart copy.
_HEART_CODES = {
    # typical angina, atypical angina, non-anginal pain, asymptomatic
    "cp": {1: "ta", 2: "aa", 3: "np", 4: "a"},
    "restecg": {0: "normal", 1: "abnormal", 2: "hypertrophy"},  # ST-T abnormality, LV hypertrophy
    "slope": {1: "up", 2: "flat", 3: "down"},
    "thal": {3: "normal", 6: "fd", 7: "rd"},  # fixed / reversible defect
}
# The original has 6 missing values ("?": ca x4, thal x2); thrifty's heart copy holds these
# values there, so a converted download reproduces it row for row.
_HEART_FILL = {"ca": 1.0, "thal": 3.0}


def _fnames(n: int) -> list[str]:
    return [f"f{i}" for i in range(n)]


# --------------------------------------------------------------------------------------------
# Locating and verifying files
# --------------------------------------------------------------------------------------------
def _cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "thrifty"


def _data_home(data_home: str | Path | None = None) -> Path:
    """Where datasets are written: the argument, else $THRIFTY_DATA, else the user cache."""
    if data_home is not None:
        return Path(data_home).expanduser()
    env = os.environ.get(ENV_VAR)
    return Path(env).expanduser() if env else _cache_home()


def _search_homes(data_home: str | Path | None) -> list[Path]:
    """Where datasets are looked for: the argument only, else $THRIFTY_DATA then the cache."""
    if data_home is not None:
        return [Path(data_home).expanduser()]
    homes = []
    if os.environ.get(ENV_VAR):
        homes.append(Path(os.environ[ENV_VAR]).expanduser())
    homes.append(_cache_home())
    return homes


def _not_found(name: str, homes: list[Path]) -> FileNotFoundError:
    where = ", ".join(str(h / name) for h in homes)
    return FileNotFoundError(
        f"dataset {name!r} not found: searched {where} (each should hold meta.json and the data "
        f"files). Set {ENV_VAR} to the folder holding the datasets (e.g. the shared "
        f"../shared/data) or call thrifty.datasets.download({name!r}) to fetch and convert "
        "the original."
    )


def _find(name: str, data_home: str | Path | None) -> Path | None:
    for home in _search_homes(data_home):
        if (home / name / "meta.json").is_file():
            return home / name
    return None


# (file identity, expected sha256) pairs already verified in this process: files are only
# hashed again when they change (size or modification time), so repeated loads stay cheap.
_VERIFIED: set[tuple] = set()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_verified(path: Path, expected: str | None, what: str) -> bytes:
    """The bytes of ``path``, checked against ``expected`` (once per process per file version)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"{what}: file {str(path)!r} listed in meta.json is missing; "
            f"restore it or call thrifty.datasets.download() again"
        )
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, expected)
    data = path.read_bytes()
    if expected is None or key in _VERIFIED:
        return data
    _check_sha(data, expected, f"{what}: {path}")
    _VERIFIED.add(key)
    return data


def _check_sha(data: bytes, expected: str, what: str) -> None:
    actual = _sha256(data)
    if actual != expected.lower():
        raise ChecksumError(
            f"sha256 mismatch for {what}: expected {expected}, got {actual}. The "
            "file is corrupt or was modified; restore it from the shared copy or "
            "re-run thrifty.datasets.download(..., force=True)"
        )


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------
def list_datasets() -> list[str]:
    """Names of the datasets :func:`load` knows.

    ``yahoo_costs`` is not among them: it is a cost vector, not a dataset (see
    :func:`yahoo_costs`); :func:`download` accepts it too.

    Returns
    -------
    list of str
    """
    return [n for n in _REGISTRY if n != "yahoo_costs"]


def load(name: str, data_home: str | Path | None = None) -> Dataset:
    """Load a benchmark dataset from the data home.

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.
    data_home : str or Path, optional
        Folder holding one sub-folder per dataset (``<data_home>/<name>/meta.json`` and the
        gzipped CSV files it lists). Default: ``$THRIFTY_DATA``, then ``~/.cache/thrifty``
        (``$XDG_CACHE_HOME/thrifty`` when set), where :func:`download` puts files. Without a
        data home, ``"heart"`` falls back to the copy embedded in the package.

    Returns
    -------
    Dataset

    Raises
    ------
    FileNotFoundError
        If the dataset is in none of the searched folders.
    ChecksumError
        If a file's sha256 differs from its ``meta.json`` entry.

    Notes
    -----
    Splits: multi-file datasets use their files (``train``/``valid``/``test``). Single-file
    datasets: ``letter`` uses the customary first 16,000 rows for training and the last 4,000
    for testing; ``heart`` and ``sonar`` (cross-validated in the papers) get a stratified
    70/30 train/test split drawn with ``sklearn.model_selection.train_test_split(...,
    stratify=y, random_state=0)`` (heart: 212/91 rows, sonar: 145/63).
    """
    spec = _spec(name)
    if name == "yahoo_costs":
        raise InputError(
            "'yahoo_costs' is a cost vector, not a dataset: use "
            "thrifty.datasets.yahoo_costs(n) to draw feature costs from it"
        )
    folder = _find(name, data_home)
    if folder is None:
        if name == "heart" and data_home is None:
            return load_demo()
        raise _not_found(name, _search_homes(data_home))
    meta = json.loads((folder / "meta.json").read_text())
    return _build(spec, meta, lambda rel, sha, what: _read_verified(folder / rel, sha, what), folder)


def load_demo() -> Dataset:
    """The heart-disease data embedded in the package (no data home needed).

    303 patients of the UCI Heart Disease (Cleveland) data, 13 features (4 categorical) with
    their real test costs in Canadian dollars (Turney 1995); target 1 = disease present.
    Licence CC BY 4.0 (UCI Machine Learning Repository). Splits as ``load("heart")``.

    Returns
    -------
    Dataset
    """
    pkg = resources.files("thrifty").joinpath("data")
    meta = json.loads(pkg.joinpath("heart.meta.json").read_text())

    def read(rel: str, sha: str | None, what: str) -> bytes:
        data = pkg.joinpath(rel).read_bytes()
        key = ("embedded", rel, sha)
        if sha is not None and key not in _VERIFIED:
            _check_sha(data, sha, f"{what}: embedded {rel}")
            _VERIFIED.add(key)
        return data

    return _build(_REGISTRY["heart"], meta, read, None)


def _spec(name: str) -> _Spec:
    if name not in _REGISTRY:
        raise InputError(f"unknown dataset {name!r}; known datasets are {list(_REGISTRY)}")
    return _REGISTRY[name]


def _merged_meta(spec: _Spec, meta: Mapping[str, Any]) -> dict[str, Any]:
    """meta.json plus the registry's facts (meta.json wins where both say something)."""
    out = copy.deepcopy(dict(meta))
    for key, value in spec.extra.items():
        if isinstance(value, Mapping):
            merged = dict(copy.deepcopy(value))
            merged.update(out.get(key) or {})
            out[key] = merged
        else:
            out.setdefault(key, copy.deepcopy(value))
    return out


def _build(
    spec: _Spec, meta: Mapping[str, Any], read: Callable[[str, str | None, str], bytes], path: Path | None
) -> Dataset:
    meta = _merged_meta(spec, meta)
    files = meta.get("files") or {}
    if not files:
        raise InputError(f"meta.json of dataset {spec.name!r} lists no files")
    keys = [k for k in _SPLIT_ORDER if k in files] + [k for k in files if k not in _SPLIT_ORDER]
    features = list(meta["features"])
    categorical = list(meta.get("categorical") or [])
    target = meta.get("target", "target")
    group = meta.get("group")
    frames, qids, splits, start, q_offset = [], [], {}, 0, 0
    for key in keys:
        info = files[key]
        data = read(info["path"], info.get("sha256"), f"dataset {spec.name!r}")
        compression = "gzip" if info["path"].endswith(".gz") else None
        # Categorical columns are read as text whatever they look like, so every file gives
        # them the same dtype before they become pandas categories.
        df = pd.read_csv(io.BytesIO(data), compression=compression, dtype={c: str for c in categorical})
        missing = [c for c in features + [target] + ([group] if group else []) if c not in df]
        if missing:
            raise InputError(
                f"dataset {spec.name!r}: file {info['path']!r} lacks column(s) "
                f"{missing[:10]} that meta.json lists"
            )
        if group:
            q = df[group].to_numpy(dtype=np.int64)
            if len(q):
                # Shift only files whose ids collide with earlier files' (rank_small's test
                # ids restart at 0), so ids that are already unique stay as read.
                q = q + max(0, q_offset - int(q.min()))
                q_offset = int(q.max()) + 1
            qids.append(q)
        frames.append(df)
        splits[key] = np.arange(start, start + len(df), dtype=np.int64)
        start += len(df)
    full = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    X = full[features].copy()
    for c in categorical:
        X[c] = X[c].astype("category")
    y = full[target].to_numpy()
    qid = np.concatenate(qids) if group else None
    if keys == ["data"]:
        splits = _holdout(spec, y)
    return Dataset(
        name=spec.name,
        task=meta["task"],
        X=X,
        y=y,
        qid=qid,
        splits=splits,
        costs=CostModel.from_meta(meta),
        meta=meta,
        path=path,
    )


def _holdout(spec: _Spec, y: np.ndarray) -> dict[str, np.ndarray]:
    """Train/test split of a single-file dataset."""
    n = len(y)
    if spec.holdout is None:
        raise InputError(f"dataset {spec.name!r} is a single file and has no split rule")
    if spec.holdout[0] == "head":
        n_train = spec.holdout[1]
        if n <= n_train:
            raise InputError(f"dataset {spec.name!r} has {n} rows, expected more than {n_train}")
        return {"train": np.arange(n_train, dtype=np.int64), "test": np.arange(n_train, n, dtype=np.int64)}
    from sklearn.model_selection import train_test_split

    _, test_size, seed = spec.holdout
    train, test = train_test_split(
        np.arange(n, dtype=np.int64), test_size=test_size, stratify=y, random_state=seed
    )
    return {"train": np.sort(train), "test": np.sort(test)}


def yahoo_costs(n: int, seed: int = 0, data_home: str | Path | None = None) -> np.ndarray:
    """Draw ``n`` feature costs from the 519 real Yahoo! LTR feature costs.

    The papers' Yahoo! costs (values 1, 5, 20, 50, 100, 150, 200 CPU-time units) give a
    realistic cost-skewed setting for data without real costs, e.g. rank_small's 300 features.

    Parameters
    ----------
    n : int
        Number of costs to draw (with replacement).
    seed : int, default=0
        Seed of ``numpy.random.default_rng``.
    data_home : str or Path, optional
        As for :func:`load`; reads ``<data_home>/yahoo_costs/costs.txt`` (one cost a line).

    Returns
    -------
    numpy.ndarray of float64, shape (n,)
    """
    n = int(n)
    if n < 0:
        raise InputError(f"n must be >= 0, got {n}")
    folder = None
    for home in _search_homes(data_home):
        if (home / "yahoo_costs" / "costs.txt").is_file():
            folder = home / "yahoo_costs"
            break
    if folder is None:
        raise _not_found("yahoo_costs", _search_homes(data_home))
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    info = (meta.get("files") or {}).get("costs", {})
    data = _read_verified(folder / "costs.txt", info.get("sha256"), "yahoo_costs")
    pool = np.array(data.decode().split(), dtype=np.float64)
    if "n" in meta and len(pool) != int(meta["n"]):
        raise InputError(f"{folder / 'costs.txt'} holds {len(pool)} costs, meta.json says {meta['n']}")
    return np.random.default_rng(seed).choice(pool, size=n, replace=True)


# --------------------------------------------------------------------------------------------
# Download and conversion
# --------------------------------------------------------------------------------------------
def download(name: str, data_home: str | Path | None = None, *, force: bool = False) -> Path:
    """Download a dataset's original files and convert them into thrifty's layout.

    The originals (UCI archives, LightGBM's example files, the BudgetRF repository's files)
    are fetched with ``urllib``, checked against a recorded sha256 where one is known (none
    is recorded yet: this module was written offline, see ``_Source``), converted into
    ``<data_home>/<name>/`` (gzipped CSV files + ``meta.json`` holding the sha256 of the
    written files) and the downloads are deleted.

    The converters follow the published file formats and are tested on small files written in
    those formats; they have not been run against the live downloads. Numbers are
    written with pandas' shortest round-trip formatting, so a converted dataset has the same
    values as thrifty's shared copy but need not be byte-identical to it (its meta.json records
    its own checksums). ``higgs_small`` is LightGBM's 7,500-row HIGGS sample
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
    spec = _spec(name)
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
    spec = _spec(name)
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
            _check_sha(raw[s.filename].read_bytes(), s.sha256, f"original file {s.filename}")
    home = _data_home(data_home)
    home.mkdir(parents=True, exist_ok=True)
    return _convert_into(spec, raw, home)


def _is_complete(folder: Path) -> bool:
    """True when ``folder`` holds a meta.json whose files all exist and verify."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        for info in (meta.get("files") or {}).values():
            _read_verified(folder / info["path"], info.get("sha256"), folder.name)
    except (OSError, ValueError, KeyError):
        return False
    return bool(meta.get("files"))


def _fetch(src: _Source, dest: Path) -> Path:
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


def _convert_into(spec: _Spec, raw: Mapping[str, Path], home: Path) -> Path:
    """Run the converter into a temporary folder, checksum its files, then move it in place."""
    target = home / spec.name
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}-convert-", dir=home))
    try:
        meta = spec.convert(raw, tmp)
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


# ----------------------------------------------------------------------- reading the originals
def _member(path: Path, basename: str) -> bytes:
    """The bytes of file ``basename`` in ``path``: a zip archive (searched recursively, as
    UCI archives sometimes nest zips), a folder, or the file itself."""
    path = Path(path)
    if path.is_dir():
        hits = sorted(path.rglob(basename))
        if hits:
            return hits[0].read_bytes()
    elif zipfile.is_zipfile(path):
        found = _zip_member(path.read_bytes(), basename)
        if found is not None:
            return found
    elif path.name == basename:
        return path.read_bytes()
    raise FileNotFoundError(f"{basename!r} not found in {str(path)!r}")


def _zip_member(data: bytes, basename: str) -> bytes | None:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        names = zf.namelist()
        for n in names:
            if n.rsplit("/", 1)[-1] == basename:
                return zf.read(n)
        for n in names:
            if n.lower().endswith(".zip"):
                found = _zip_member(zf.read(n), basename)
                if found is not None:
                    return found
    return None


def _write_csv(df: pd.DataFrame, path: Path) -> dict[str, Any]:
    # mtime=0 keeps the gzip header constant, so converting twice gives identical bytes.
    df.to_csv(path, index=False, compression={"method": "gzip", "mtime": 0})
    return {"path": path.name, "rows": int(len(df))}


def _new_meta(name: str, files: dict[str, Any]) -> dict[str, Any]:
    meta = copy.deepcopy(_REGISTRY[name].meta)
    meta["files"] = files
    return meta


def _read_libsvm(data: bytes, n_features: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A sparse ``label index:value ...`` file (1-based indices) as dense columns f0..f{n-1}."""
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(io.BytesIO(data), n_features=n_features, zero_based=False)
    return pd.DataFrame(X.toarray(), columns=_fnames(n_features)), y


def _as_int_labels(y: np.ndarray, what: str) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
        raise InputError(f"{what}: labels must be integers")
    return y.astype(np.int64)


def _convert_adult(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """adult.zip (adult.data, adult.test) -> train.csv.gz, test.csv.gz.

    UCI lines are ``39, State-gov, 77516, ..., United-States, <=50K`` ('?' = missing; the
    test file starts with a ``|1x3 Cross validator`` line and its labels end with '.').
    target = 1 for income >50K; missing values are written empty.
    """
    archive = raw["adult.zip"]
    files = {}
    for key, member in (("train", "adult.data"), ("test", "adult.test")):
        df = pd.read_csv(
            io.BytesIO(_member(archive, member)),
            header=None,
            names=_ADULT_FEATURES + ["income"],
            skipinitialspace=True,
            comment="|",
            na_values=["?"],
            keep_default_na=False,
        )
        income = df.pop("income").astype(str).str.strip().str.rstrip(".")
        unknown = sorted(set(income) - {">50K", "<=50K"})
        if unknown:
            raise InputError(f"adult {member}: unexpected income label(s) {unknown[:5]}")
        df["target"] = (income == ">50K").astype(np.int64)
        files[key] = _write_csv(df, out / f"{key}.csv.gz")
    return _new_meta("adult", files)


def _convert_letter(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """letter+recognition.zip (letter-recognition.data: ``T,2,8,3,...``) -> data.csv.gz.

    The letter comes first in the original and last (as ``target``) here; rows keep the UCI
    order so the customary first-16,000/last-4,000 split holds.
    """
    df = pd.read_csv(
        io.BytesIO(_member(raw["letter+recognition.zip"], "letter-recognition.data")),
        header=None,
        names=["target"] + _LETTER_FEATURES,
    )
    df = df[_LETTER_FEATURES + ["target"]].astype({f: np.float64 for f in _LETTER_FEATURES})
    return _new_meta("letter", {"data": _write_csv(df, out / "data.csv.gz")})


def _convert_heart(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """heart+disease.zip (processed.cleveland.data) -> data.csv.gz.

    The 14 numeric columns of the original become thrifty's encoding: ``cp``, ``restecg``,
    ``slope``, ``thal`` as text codes (see ``_HEART_CODES``), ``target = num > 0``. The six
    missing values ('?') get the values thrifty's shared heart copy holds there
    (``_HEART_FILL``: ca 1.0, thal normal), so the result matches that copy row for row.
    """
    df = pd.read_csv(
        io.BytesIO(_member(raw["heart+disease.zip"], "processed.cleveland.data")),
        header=None,
        names=_HEART_FEATURES + ["num"],
        na_values=["?"],
    )
    df = df.fillna(_HEART_FILL).astype(np.float64)
    for col, codes in _HEART_CODES.items():
        bad = sorted(set(df[col].unique()) - set(codes))
        if bad:
            raise InputError(f"heart: unexpected {col} code(s) {bad}")
        df[col] = df[col].astype(np.int64).map(codes)
    df["target"] = (df.pop("num") > 0).astype(np.int64)
    return _new_meta("heart", {"data": _write_csv(df, out / "data.csv.gz")})


def _convert_sonar(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """connectionist+bench+sonar+mines+vs+rocks.zip (sonar.all-data) -> data.csv.gz.

    60 energies then ``R`` (rock) or ``M`` (mine); target 1 = mine.
    """
    names = [f"V{i}" for i in range(1, 61)]
    df = pd.read_csv(
        io.BytesIO(_member(raw["connectionist+bench+sonar+mines+vs+rocks.zip"], "sonar.all-data")),
        header=None,
        names=names + ["label"],
    )
    label = df.pop("label").astype(str).str.strip()
    if not set(label) <= {"R", "M"}:
        raise InputError(f"sonar: unexpected label(s) {sorted(set(label) - {'R', 'M'})[:5]}")
    df["target"] = (label == "M").astype(np.int64)
    return _new_meta("sonar", {"data": _write_csv(df, out / "data.csv.gz")})


def _convert_thyroid(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """thyroid+disease.zip (ann-train.data, ann-test.data) -> train/test.csv.gz.

    Whitespace-separated lines of the 21 features then the class (1 hyper, 2 hypo, 3 normal).
    """
    files = {}
    for key, member in (("train", "ann-train.data"), ("test", "ann-test.data")):
        df = pd.read_csv(
            io.BytesIO(_member(raw["thyroid+disease.zip"], member)),
            header=None,
            sep=r"\s+",
            names=_THYROID_FEATURES + ["target"],
        )
        df["target"] = _as_int_labels(df["target"].to_numpy(), f"thyroid {member}")
        files[key] = _write_csv(df, out / f"{key}.csv.gz")
    return _new_meta("thyroid", files)


def _convert_higgs_small(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """LightGBM's binary.train / binary.test (tab-separated, label first, 28 features)."""
    files = {}
    for key, member in (("train", "binary.train"), ("test", "binary.test")):
        df = pd.read_csv(io.BytesIO(_member(raw[member], member)), header=None, sep="\t")
        if df.shape[1] != 29:
            raise InputError(f"higgs_small {member}: expected 29 columns, got {df.shape[1]}")
        y = _as_int_labels(df.pop(0).to_numpy(), f"higgs_small {member}")
        df.columns = _fnames(28)
        df["target"] = y
        files[key] = _write_csv(df, out / f"{key}.csv.gz")
    return _new_meta("higgs_small", files)


def _convert_rank_small(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """LightGBM's lambdarank example: rank.{train,test} (libsvm, 1-based feature indices, label
    = relevance 0-4) and rank.{train,test}.query (one query size per line, in row order)."""
    files = {}
    for key in ("train", "test"):
        df, y = _read_libsvm(_member(raw[f"rank.{key}"], f"rank.{key}"), 300)
        sizes = np.array(_member(raw[f"rank.{key}.query"], f"rank.{key}.query").split(), dtype=np.int64)
        if sizes.sum() != len(df):
            raise InputError(
                f"rank_small: rank.{key}.query sizes sum to {sizes.sum()} but rank.{key} has {len(df)} rows"
            )
        df["qid"] = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        df["target"] = _as_int_labels(y, f"rank_small rank.{key}")
        files[key] = _write_csv(df, out / f"{key}.csv.gz")
    return _new_meta("rank_small", files)


def _convert_miniboone_tiny(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """BudgetRF's mbne_tiny_{tr,tv,te} (libsvm, 1-based indices, 50 features, labels 0/1)."""
    files = {}
    for key, member in (("train", "mbne_tiny_tr"), ("valid", "mbne_tiny_tv"), ("test", "mbne_tiny_te")):
        df, y = _read_libsvm(_member(raw[member], member), 50)
        df["target"] = _as_int_labels(y, f"miniboone_tiny {member}")
        files[key] = _write_csv(df, out / f"{key}.csv.gz")
    return _new_meta("miniboone_tiny", files)


def _convert_yahoo_costs(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """BudgetRF's yahoo_cs_cost (one cost per line, blank lines allowed) -> costs.txt."""
    costs = np.array(_member(raw["yahoo_cs_cost"], "yahoo_cs_cost").split(), dtype=np.float64)
    if len(costs) != 519:
        raise InputError(f"yahoo_cs_cost holds {len(costs)} costs, expected 519")
    (out / "costs.txt").write_text("".join(f"{c:g}\n" for c in costs))
    meta = _new_meta("yahoo_costs", {"costs": {"path": "costs.txt", "rows": 519}})
    meta["total"] = float(costs.sum())
    return meta


# --------------------------------------------------------------------------------------------
_UCI_LICENSE = "CC BY 4.0 (UCI)"

_REGISTRY: dict[str, _Spec] = {
    s.name: s
    for s in [
        _Spec(
            name="adult",
            meta={
                "name": "adult",
                "task": "binary",
                "target": "target",
                "features": _ADULT_FEATURES,
                "categorical": [
                    "workclass",
                    "education",
                    "marital_status",
                    "occupation",
                    "relationship",
                    "race",
                    "sex",
                    "native_country",
                ],
                "costs": None,
                "source": "UCI Adult (Census Income), original adult.data/adult.test; missing "
                "values '?' left empty",
                "license": _UCI_LICENSE,
            },
            sources=(_Source(f"{_UCI}/2/adult.zip"),),
            convert=_convert_adult,
            origin=f"{_UCI}/2/adult.zip",
        ),
        _Spec(
            name="letter",
            meta={
                "name": "letter",
                "task": "multiclass",
                "target": "target",
                "features": _LETTER_FEATURES,
                "categorical": [],
                "costs": None,
                "source": "UCI Letter Recognition (20,000 rows, UCI row order); customary split: "
                "first 16,000 train, last 4,000 test",
                "license": _UCI_LICENSE,
            },
            sources=(_Source(f"{_UCI}/59/letter+recognition.zip"),),
            convert=_convert_letter,
            origin=f"{_UCI}/59/letter+recognition.zip",
            holdout=("head", 16000),
        ),
        _Spec(
            name="sonar",
            meta={
                "name": "sonar",
                "task": "binary",
                "target": "target",
                "features": [f"V{i}" for i in range(1, 61)],
                "categorical": [],
                "costs": None,
                "source": "UCI Connectionist Bench (Sonar, Mines vs. Rocks); target 1 = mine",
                "license": _UCI_LICENSE,
            },
            sources=(_Source(f"{_UCI}/151/connectionist+bench+sonar+mines+vs+rocks.zip"),),
            convert=_convert_sonar,
            origin=f"{_UCI}/151/connectionist+bench+sonar+mines+vs+rocks.zip",
            holdout=("stratified", _HOLDOUT_TEST_SIZE, _HOLDOUT_SEED),
        ),
        _Spec(
            name="heart",
            meta={
                "name": "heart",
                "task": "binary",
                "target": "target",
                "features": _HEART_FEATURES,
                "categorical": ["cp", "restecg", "slope", "thal"],
                "costs": _HEART_COSTS,
                "cost_unit": "Canadian dollars (Turney 1995, UCI heart-disease.cost)",
                "source": "UCI Heart Disease, Cleveland (303 rows); target 1 = disease present",
                "license": _UCI_LICENSE,
            },
            sources=(_Source(f"{_UCI}/45/heart+disease.zip"),),
            convert=_convert_heart,
            origin=f"{_UCI}/45/heart+disease.zip",
            holdout=("stratified", _HOLDOUT_TEST_SIZE, _HOLDOUT_SEED),
        ),
        _Spec(
            name="thyroid",
            meta={
                "name": "thyroid",
                "task": "multiclass",
                "target": "target",
                "features": _THYROID_FEATURES,
                "categorical": [],
                "costs": _THYROID_COSTS,
                "cost_unit": "Canadian dollars (Turney 1995, UCI ann-thyroid.cost)",
                "cost_notes": "FTI has no cost of its own: it is computed from TT4 and T4U, so "
                "acquiring FTI means acquiring both (a feature dependency).",
                "source": "UCI Thyroid Disease, ann-train/ann-test (3 classes: 1 hyper, 2 hypo, 3 normal)",
                "license": _UCI_LICENSE,
            },
            sources=(_Source(f"{_UCI}/102/thyroid+disease.zip"),),
            convert=_convert_thyroid,
            origin=f"{_UCI}/102/thyroid+disease.zip",
            # FTI (free thyroxine index) is computed from TT4 and T4U: it has no price of its own
            # but acquiring it acquires (and pays for) both inputs.
            extra={"dependencies": {"FTI": ["TT4", "T4U"]}},
        ),
        _Spec(
            name="higgs_small",
            meta={
                "name": "higgs_small",
                "task": "binary",
                "target": "target",
                "features": _fnames(28),
                "categorical": [],
                "costs": None,
                "source": "LightGBM examples/binary_classification (a 7,500-row sample with the 28 "
                "features of the UCI HIGGS data)",
                "license": "MIT (LightGBM repository)",
            },
            # The shared copy is LightGBM's sample, so that is what download() fetches; the full
            # UCI HIGGS archive (origin) is 2.6 GB and is not subsampled here.
            sources=(
                _Source(f"{_LGB}/binary_classification/binary.train"),
                _Source(f"{_LGB}/binary_classification/binary.test"),
            ),
            convert=_convert_higgs_small,
            origin=f"{_UCI}/280/higgs.zip",
        ),
        _Spec(
            name="rank_small",
            meta={
                "name": "rank_small",
                "task": "ranking",
                "target": "target",
                "group": "qid",
                "features": _fnames(300),
                "categorical": [],
                "costs": None,
                "source": "LightGBM examples/lambdarank (relevance 0-4, query ids in column qid)",
                "license": "MIT (LightGBM repository)",
            },
            sources=tuple(
                _Source(f"{_LGB}/lambdarank/{f}")
                for f in ("rank.train", "rank.train.query", "rank.test", "rank.test.query")
            ),
            convert=_convert_rank_small,
            origin=f"{_LGB}/lambdarank/",
        ),
        _Spec(
            name="miniboone_tiny",
            meta={
                "name": "miniboone_tiny",
                "task": "binary",
                "target": "target",
                "features": _fnames(50),
                "categorical": [],
                "costs": None,
                "source": "Balanced small subsets of UCI MiniBooNE particle identification shipped "
                "with the BudgetRF/BudgetPrune code",
                "license": "MIT (fnan/FeatureBudgetedRandomForest)",
            },
            sources=tuple(_Source(f"{_FNAN}/{f}") for f in ("mbne_tiny_tr", "mbne_tiny_tv", "mbne_tiny_te")),
            convert=_convert_miniboone_tiny,
            origin=f"{_FNAN}/",
        ),
        _Spec(
            name="yahoo_costs",
            meta={
                "name": "yahoo_costs",
                "n": 519,
                "source": "Per-feature extraction costs of the 519 Yahoo! Learning to Rank "
                "features, as used by GreedyMiser, BudgetRF, BudgetPrune, CEGB (file "
                "yahoo_cs_cost of fnan/FeatureBudgetedRandomForest)",
                "license": "MIT (fnan/FeatureBudgetedRandomForest)",
            },
            sources=(_Source(f"{_FNAN}/yahoo_cs_cost"),),
            convert=_convert_yahoo_costs,
            origin=f"{_FNAN}/yahoo_cs_cost",
        ),
    ]
}
