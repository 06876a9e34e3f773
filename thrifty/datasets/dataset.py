"""A loaded benchmark dataset (:class:`Dataset`), and loading one from the data home or from the
copy of the heart-disease data embedded in the package."""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from thrifty.costs import CostModel
from thrifty.datasets.fetch import VERIFIED, check_sha, find, not_found, read_verified, search_homes
from thrifty.datasets.registry import REGISTRY, Spec, spec_of
from thrifty.exceptions import InputError

# Order of the split files in ``Dataset.X`` (and of the rows of each split in ``splits``).
_SPLIT_ORDER = ("train", "valid", "test")


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
        Real per-feature costs where the dataset has them (heart, thyroid; illustrative ones for
        diamonds and flights), 1 per feature otherwise; groups (diamonds' calipers x, y, z,
        flights' weather and aircraft lookups) and dependencies (thyroid's FTI needs TT4 and
        T4U, diamonds' depth needs x, y, z) are included.
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

    @property
    def split(self) -> str:
        """How :func:`thrifty.compare` should hold out rows of this dataset (its ``split=``):
        ``"time=..."`` by the columns of its ``meta["time_order"]`` when its test rows are
        later than its training rows (flights: Nov-Dec after Jan-Oct), else ``"random"``."""
        order = self.meta.get("time_order")
        return "time=" + ",".join(order) if order else "random"

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
        _, _, q = self.subset(split)
        if q is None:
            raise InputError(f"dataset {self.name!r} is not a ranking dataset (it has no qid)")
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
    Splits: multi-file datasets use their files (``train``/``valid``/``test``; diamonds' test
    file holds a seeded random 20% of ggplot2's rows, flights' the flights of November and
    December). Single-file datasets: ``letter`` uses the customary first 16,000 rows for
    training and the last 4,000 for testing; ``heart`` and ``sonar`` (cross-validated in the
    papers) get a stratified 70/30 train/test split drawn with
    ``sklearn.model_selection.train_test_split(..., stratify=y, random_state=0)`` (heart:
    212/91 rows, sonar: 145/63).
    """
    spec = spec_of(name)
    if name == "yahoo_costs":
        raise InputError(
            "'yahoo_costs' is a cost vector, not a dataset: use "
            "thrifty.datasets.yahoo_costs(n) to draw feature costs from it"
        )
    folder = find(name, data_home)
    if folder is None:
        if name == "heart" and data_home is None:
            return load_demo()
        raise not_found(name, search_homes(data_home))
    meta = json.loads((folder / "meta.json").read_text())
    return _build(spec, meta, lambda rel, sha, what: read_verified(folder / rel, sha, what), folder)


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
        if sha is not None and key not in VERIFIED:
            check_sha(data, sha, f"{what}: embedded {rel}")
            VERIFIED.add(key)
        return data

    return _build(REGISTRY["heart"], meta, read, None)


def _merged_meta(spec: Spec, meta: Mapping[str, Any]) -> dict[str, Any]:
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
    spec: Spec, meta: Mapping[str, Any], read: Callable[[str, str | None, str], bytes], path: Path | None
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


def _holdout(spec: Spec, y: np.ndarray) -> dict[str, np.ndarray]:
    """Train/test split of a single-file dataset."""
    n = len(y)
    if spec.holdout is None:
        raise InputError(f"dataset {spec.name!r} is a single file and has no split rule")
    if spec.holdout[0] == "head":
        n_train = spec.holdout[1]
        if n <= n_train:
            raise InputError(f"dataset {spec.name!r} has {n} rows, expected more than {n_train}")
        return {"train": np.arange(n_train, dtype=np.int64), "test": np.arange(n_train, n, dtype=np.int64)}
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
    for home in search_homes(data_home):
        if (home / "yahoo_costs" / "costs.txt").is_file():
            folder = home / "yahoo_costs"
            break
    if folder is None:
        raise not_found("yahoo_costs", search_homes(data_home))
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    info = (meta.get("files") or {}).get("costs", {})
    data = read_verified(folder / "costs.txt", info.get("sha256"), "yahoo_costs")
    pool = np.array(data.decode().split(), dtype=np.float64)
    if "n" in meta and len(pool) != int(meta["n"]):
        raise InputError(f"{folder / 'costs.txt'} holds {len(pool)} costs, meta.json says {meta['n']}")
    return np.random.default_rng(seed).choice(pool, size=n, replace=True)
