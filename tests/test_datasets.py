"""thrifty.datasets: loading the shared datasets, the embedded demo, checksums, converters."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import json
import shutil
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import thrifty
from thrifty import CostModel, datasets
from thrifty.datasets import ChecksumError, Dataset, converters, fetch, registry

EMBEDDED = Path(thrifty.__file__).parent / "data"
HEART_COSTS_TOTAL = 600.57  # sum of Turney's 13 heart test prices, Canadian dollars


@pytest.fixture
def no_data_home(monkeypatch, tmp_path):
    """No $THRIFTY_DATA and an empty user cache."""
    monkeypatch.delenv("THRIFTY_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "thrifty"


def _meta(data_home: Path, name: str) -> dict:
    return json.loads((data_home / name / "meta.json").read_text())


def _assert_splits_partition(ds: Dataset) -> None:
    idx = np.concatenate(list(ds.splits.values()))
    assert len(idx) == len(np.unique(idx)) == len(ds.X)
    assert idx.min() == 0 and idx.max() == len(ds.X) - 1
    for v in ds.splits.values():
        assert v.dtype == np.int64 and np.all(np.diff(v) > 0)


# ----------------------------------------------------------------------------- shared datasets
@pytest.mark.parametrize("name", datasets.list_datasets())
def test_shared_dataset_matches_its_meta(data_home, name):
    meta = _meta(data_home, name)
    ds = datasets.load(name, data_home=data_home)
    rows = sum(f["rows"] for f in meta["files"].values())
    assert ds.name == name and ds.task == meta["task"]
    assert ds.X.shape == (rows, len(meta["features"]))
    assert list(ds.X.columns) == meta["features"] == ds.feature_names
    assert len(ds.y) == rows and isinstance(ds.y, np.ndarray)
    assert ds.categorical == meta["categorical"]
    for col in ds.X.columns:
        is_cat = isinstance(ds.X[col].dtype, pd.CategoricalDtype)
        assert is_cat == (col in meta["categorical"]), col
        if not is_cat:
            assert pd.api.types.is_numeric_dtype(ds.X[col]), col
    _assert_splits_partition(ds)
    if set(meta["files"]) != {"data"}:
        # multi-file: one split per file, in train/valid/test order
        assert {k: len(v) for k, v in ds.splits.items()} == {k: f["rows"] for k, f in meta["files"].items()}
        assert list(ds.splits) == [k for k in ("train", "valid", "test") if k in meta["files"]]
        start = 0
        for k in ds.splits:
            assert np.array_equal(ds.splits[k], np.arange(start, start + meta["files"][k]["rows"]))
            start += meta["files"][k]["rows"]
    else:
        assert set(ds.splits) == {"train", "test"}
    assert (ds.qid is not None) == (meta["task"] == "ranking")
    assert isinstance(ds.costs, CostModel) and ds.costs.n_features == len(meta["features"])
    if not meta["costs"]:
        assert np.all(ds.costs.feature_costs == 1.0)
    X, y, q = ds.subset("test")
    assert len(X) == len(y) == len(ds.splits["test"])
    assert (q is None) == (ds.qid is None)


def test_shared_files_read_back_exactly(data_home):
    # the loader's frame holds exactly the values of the files, rows in train/test order
    ds = datasets.load("adult", data_home=data_home)
    for split in ("train", "test"):
        raw = pd.read_csv(data_home / "adult" / f"{split}.csv.gz")
        X, y, _ = ds.subset(split)
        assert np.array_equal(y, raw["target"].to_numpy())
        for col in ds.feature_names:
            got = X[col].astype(object).where(X[col].notna(), None).tolist()
            want = raw[col].astype(object).where(raw[col].notna(), None).tolist()
            assert got == want, col


def test_adult_categoricals_and_missing_values(data_home):
    ds = datasets.load("adult", data_home=data_home)
    X, y, _ = ds.subset("train")
    assert X["workclass"].isna().sum() == 1836
    assert X["occupation"].isna().sum() == 1843
    assert X["native_country"].isna().sum() == 583
    # one category set for both splits, so train and test codes agree
    assert "Private" in list(ds.X["workclass"].cat.categories)
    assert set(np.unique(ds.y)) == {0, 1}
    assert y.sum() == 7841


def test_letter_customary_split(data_home):
    ds = datasets.load("letter", data_home=data_home)
    assert np.array_equal(ds.splits["train"], np.arange(16000))
    assert np.array_equal(ds.splits["test"], np.arange(16000, 20000))
    assert len(np.unique(ds.y)) == 26 and ds.y[0] == "T"  # labels as read
    assert ds.task == "multiclass"


@pytest.mark.parametrize("name, n_train, n_test", [("heart", 212, 91), ("sonar", 145, 63)])
def test_single_file_holdout_is_stratified_and_fixed(data_home, name, n_train, n_test):
    ds = datasets.load(name, data_home=data_home)
    assert len(ds.splits["train"]) == n_train and len(ds.splits["test"]) == n_test
    overall = np.mean(ds.y == 1)
    for idx in ds.splits.values():
        assert abs(np.mean(ds.y[idx] == 1) - overall) < 0.02
    again = datasets.load(name, data_home=data_home)
    for k in ds.splits:
        assert np.array_equal(ds.splits[k], again.splits[k])
    # X keeps the file's row order
    raw = pd.read_csv(data_home / name / "data.csv.gz")
    assert np.array_equal(ds.y, raw["target"].to_numpy())


def test_heart_real_costs(data_home):
    ds = datasets.load("heart", data_home=data_home)
    assert ds.costs.feature_costs.sum() == pytest.approx(HEART_COSTS_TOTAL)
    costs = dict(zip(ds.costs.feature_names, ds.costs.feature_costs))
    assert costs == _meta(data_home, "heart")["costs"]
    assert costs["thal"] == 102.9 and costs["age"] == 1.0
    assert ds.costs.acquisition_cost(["chol", "fbs"]) == pytest.approx(7.27 + 5.2)
    assert ds.X.shape == (303, 13)
    assert ds.categorical == ["cp", "restecg", "slope", "thal"]


def test_thyroid_fti_dependency(data_home):
    ds = datasets.load("thyroid", data_home=data_home)
    fti = ds.feature_names.index("FTI")
    assert ds.costs.feature_costs[fti] == 0.0
    assert ds.costs.acquisition_cost(["FTI"]) == pytest.approx(14.51 + 11.41)
    assert ds.costs.acquisition_cost(["FTI", "TT4", "T4U"]) == pytest.approx(14.51 + 11.41)
    assert ds.meta["dependencies"] == {"FTI": ["TT4", "T4U"]}
    assert ds.costs.acquisition_cost(["TSH"]) == pytest.approx(22.78)
    assert sorted(np.unique(ds.y)) == [1, 2, 3]
    # the registry's facts do not leak into the files' meta.json
    assert "dependencies" not in _meta(data_home, "thyroid")


def test_rank_small_queries_stay_whole(data_home):
    ds = datasets.load("rank_small", data_home=data_home)
    assert ds.qid.dtype == np.int64
    train_q = set(ds.subset("train")[2])
    test_q = set(ds.subset("test")[2])
    assert len(train_q) == 201 and len(test_q) == 50
    assert not train_q & test_q
    assert ds.query_sizes("train").sum() == 3005 and len(ds.query_sizes("train")) == 201
    assert ds.query_sizes("test").sum() == 768 and len(ds.query_sizes("test")) == 50
    assert set(np.unique(ds.y)) <= {0, 1, 2, 3, 4}
    # train ids are kept as read, test ids shifted past them
    raw = pd.read_csv(data_home / "rank_small" / "test.csv.gz", usecols=["qid"])
    assert np.array_equal(ds.subset("test")[2], raw["qid"].to_numpy() + 201)
    with pytest.raises(ValueError, match="not a ranking"):
        datasets.load("heart", data_home=data_home).query_sizes("train")


def test_miniboone_has_valid_split(data_home):
    ds = datasets.load("miniboone_tiny", data_home=data_home)
    assert list(ds.splits) == ["train", "valid", "test"]
    assert len(ds.subset("valid")[0]) == 1000
    with pytest.raises(KeyError, match="no split 'dev'"):
        ds.subset("dev")


def test_load_uses_environment_variable(data_home, monkeypatch):
    monkeypatch.setenv("THRIFTY_DATA", str(data_home))
    ds = datasets.load("sonar")
    assert ds.path == data_home / "sonar"


def test_demo_equals_shared_heart(data_home):
    demo, shared = datasets.load_demo(), datasets.load("heart", data_home=data_home)
    pd.testing.assert_frame_equal(demo.X, shared.X)
    assert np.array_equal(demo.y, shared.y)
    assert demo.meta["files"]["data"]["sha256"] == shared.meta["files"]["data"]["sha256"]


def test_yahoo_costs(data_home):
    pool = np.loadtxt(data_home / "yahoo_costs" / "costs.txt")
    assert len(pool) == 519
    c = datasets.yahoo_costs(300, seed=0, data_home=data_home)
    assert c.shape == (300,) and c.dtype == np.float64
    assert np.array_equal(c, np.random.default_rng(0).choice(pool, size=300, replace=True))
    assert np.array_equal(c, datasets.yahoo_costs(300, data_home=data_home))
    assert not np.array_equal(c, datasets.yahoo_costs(300, seed=1, data_home=data_home))
    assert set(np.unique(c)) <= {1.0, 5.0, 20.0, 50.0, 100.0, 150.0, 200.0}
    assert datasets.yahoo_costs(0, data_home=data_home).shape == (0,)
    with pytest.raises(ValueError, match="cost vector"):
        datasets.load("yahoo_costs", data_home=data_home)


# ----------------------------------------------------------------------------- no data home needed
def test_list_datasets():
    names = datasets.list_datasets()
    assert names == [
        "adult",
        "letter",
        "sonar",
        "heart",
        "thyroid",
        "higgs_small",
        "rank_small",
        "miniboone_tiny",
        "diamonds",
        "flights",
    ]


def test_load_demo_embedded_heart():
    ds = datasets.load_demo()
    assert ds.path is None and ds.task == "binary"
    assert ds.X.shape == (303, 13) and len(ds.y) == 303
    assert ds.costs.feature_costs.sum() == pytest.approx(HEART_COSTS_TOTAL)
    assert "CC BY 4.0" in ds.meta["license"]
    for col in ds.categorical:
        assert isinstance(ds.X[col].dtype, pd.CategoricalDtype)
    assert list(ds.X["cp"].cat.categories) == ["a", "aa", "np", "ta"]
    _assert_splits_partition(ds)
    assert "Dataset('heart'" in repr(ds)


def test_load_heart_falls_back_to_embedded_copy(no_data_home):
    ds = datasets.load("heart")
    assert ds.path is None and ds.X.shape == (303, 13)


def test_missing_dataset_error_is_helpful(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        datasets.load("adult", data_home=tmp_path)
    msg = str(err.value)
    assert "'adult'" in msg and str(tmp_path / "adult") in msg
    assert "THRIFTY_DATA" in msg and "thrifty.datasets.download('adult')" in msg
    # an explicit data home is honoured even for heart (no silent fallback)
    with pytest.raises(FileNotFoundError):
        datasets.load("heart", data_home=tmp_path)


def test_missing_dataset_error_lists_every_searched_folder(no_data_home, monkeypatch, tmp_path):
    monkeypatch.setenv("THRIFTY_DATA", str(tmp_path / "env"))
    with pytest.raises(FileNotFoundError) as err:
        datasets.load("letter")
    assert str(tmp_path / "env" / "letter") in str(err.value)
    assert str(no_data_home / "letter") in str(err.value)
    with pytest.raises(FileNotFoundError, match="yahoo_costs"):
        datasets.yahoo_costs(3)


def test_unknown_dataset():
    with pytest.raises(ValueError, match="unknown dataset 'mnist'"):
        datasets.load("mnist")


def _heart_folder(home: Path) -> Path:
    """A heart folder in the shared layout, built from the embedded copy."""
    folder = home / "heart"
    folder.mkdir(parents=True)
    shutil.copy(EMBEDDED / "heart.csv.gz", folder / "data.csv.gz")
    meta = json.loads((EMBEDDED / "heart.meta.json").read_text())
    meta["files"]["data"]["path"] = "data.csv.gz"
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


def test_checksum_mismatch_raises(tmp_path):
    folder = _heart_folder(tmp_path)
    assert datasets.load("heart", data_home=tmp_path).X.shape == (303, 13)
    # change the data (the file changes size and mtime, so the cached check does not apply)
    text = gzip.decompress((folder / "data.csv.gz").read_bytes()).decode()
    (folder / "data.csv.gz").write_bytes(gzip.compress(text.replace("63.0", "64.0", 1).encode()))
    with pytest.raises(ChecksumError, match="sha256 mismatch"):
        datasets.load("heart", data_home=tmp_path)


def test_checksum_recorded_wrong_in_meta_raises(tmp_path):
    folder = _heart_folder(tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    meta["files"]["data"]["sha256"] = "0" * 64
    (folder / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ChecksumError, match="0000"):
        datasets.load("heart", data_home=tmp_path)


def test_checksum_is_cached_per_process(tmp_path, monkeypatch):
    _heart_folder(tmp_path)
    datasets.load("heart", data_home=tmp_path)
    calls = []
    monkeypatch.setattr(fetch, "_sha256", lambda data: calls.append(1) or hashlib.sha256(data).hexdigest())
    datasets.load("heart", data_home=tmp_path)
    datasets.load("heart", data_home=tmp_path)
    assert calls == []


def test_missing_data_file_raises(tmp_path):
    folder = _heart_folder(tmp_path)
    (folder / "data.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match="data.csv.gz"):
        datasets.load("heart", data_home=tmp_path)


# ----------------------------------------------------------------------------- converters
def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


# Lines in the UCI formats (the first lines of the published files, plus made-up rows with
# missing values where the format allows them).
ADULT_DATA = (
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n"
    "50, Self-emp-not-inc, 83311, Bachelors, 13, Married-civ-spouse, Exec-managerial, Husband, White, Male, 0, 0, 13, United-States, <=50K\n"
    "54, ?, 180211, Some-college, 10, Married-civ-spouse, ?, Husband, Asian-Pac-Islander, Male, 0, 0, 60, South, >50K\n"
    "\n"
)
ADULT_TEST = (
    "|1x3 Cross validator\n"
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, 0, 0, 40, United-States, <=50K.\n"
    "44, Private, 160323, Some-college, 10, Married-civ-spouse, Machine-op-inspct, Husband, Black, Male, 7688, 0, 40, ?, >50K.\n"
)


def test_convert_adult_from_uci_format(tmp_path):
    _zip(tmp_path / "adult.zip", {"adult.data": ADULT_DATA, "adult.test": ADULT_TEST, "adult.names": "..."})
    folder = datasets.convert("adult", tmp_path, data_home=tmp_path / "home")
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["files"]["train"]["rows"] == 3 and meta["files"]["test"]["rows"] == 2
    for info in meta["files"].values():
        assert hashlib.sha256((folder / info["path"]).read_bytes()).hexdigest() == info["sha256"]
    ds = datasets.load("adult", data_home=tmp_path / "home")
    assert list(ds.y) == [0, 0, 1, 0, 1]
    assert ds.X["workclass"].isna().tolist() == [False, False, True, False, False]
    assert ds.X["native_country"].isna().tolist() == [False] * 4 + [True]
    assert ds.X.loc[0, "capital_gain"] == 2174 and ds.X.loc[2, "native_country"] == "South"
    assert isinstance(ds.X["education"].dtype, pd.CategoricalDtype)
    # the first rows of the published files give the first rows of the shared copy
    text = gzip.decompress((folder / "train.csv.gz").read_bytes()).decode().splitlines()
    assert text[0].startswith("age,workclass,fnlwgt,education,education_num,")
    assert text[1] == (
        "39,State-gov,77516,Bachelors,13,Never-married,Adm-clerical,"
        "Not-in-family,White,Male,2174,0,40,United-States,0"
    )
    assert (
        text[3]
        == "54,,180211,Some-college,10,Married-civ-spouse,,Husband,Asian-Pac-Islander,Male,0,0,60,South,1"
    )


def test_convert_letter_from_uci_format(tmp_path):
    lines = "T,2,8,3,5,1,8,13,0,6,6,10,8,0,8,0,8\nI,5,12,3,7,2,10,5,5,4,13,3,9,2,8,4,10\n"
    _zip(tmp_path / "letter+recognition.zip", {"letter-recognition.data": lines})
    folder = datasets.convert("letter", tmp_path, data_home=tmp_path / "home")
    text = gzip.decompress((folder / "data.csv.gz").read_bytes()).decode().splitlines()
    assert text[0] == ",".join(registry.LETTER_FEATURES + ["target"])
    # exactly the first two rows of the shared letter/data.csv.gz
    assert text[1] == "2.0,8.0,3.0,5.0,1.0,8.0,13.0,0.0,6.0,6.0,10.0,8.0,0.0,8.0,0.0,8.0,T"
    assert text[2] == "5.0,12.0,3.0,7.0,2.0,10.0,5.0,5.0,4.0,13.0,3.0,9.0,2.0,8.0,4.0,10.0,I"


def _cleveland_lines(ds: Dataset) -> list[str]:
    """Rows of a heart Dataset written back in processed.cleveland.data's numeric format."""
    inverse = {col: {v: k for k, v in codes.items()} for col, codes in registry.HEART_CODES.items()}
    lines = []
    for i in range(len(ds.X)):
        row = []
        for col in ds.feature_names:
            v = ds.X[col].iloc[i]
            row.append(f"{float(inverse[col][v] if col in inverse else v):.1f}")
        row.append(str(int(ds.y[i])))
        lines.append(",".join(row))
    return lines


def test_convert_heart_reproduces_the_shared_copy(tmp_path):
    demo = datasets.load_demo()
    lines = _cleveland_lines(demo)
    # the original's missing values: row 88 has thal '?', row 167 has ca '?'
    lines[87] = "53.0,0.0,3.0,128.0,216.0,0.0,2.0,115.0,0.0,0.0,1.0,0.0,?,0"
    lines[166] = "52.0,1.0,3.0,138.0,223.0,0.0,0.0,169.0,0.0,0.0,1.0,?,3.0,0"
    lines[1] = lines[1][:-1] + "2"  # disease grades 1-4 all mean "present"
    _zip(
        tmp_path / "heart+disease.zip",
        {"processed.cleveland.data": "\n".join(lines) + "\n", "processed.hungarian.data": "garbage"},
    )
    folder = datasets.convert("heart", tmp_path, data_home=tmp_path / "home")
    # gzipped as the shared copies are: the same values give the same bytes
    assert (folder / "data.csv.gz").read_bytes() == (EMBEDDED / "heart.csv.gz").read_bytes()
    ds = datasets.load("heart", data_home=tmp_path / "home")
    assert ds.costs.feature_costs.sum() == pytest.approx(HEART_COSTS_TOTAL)
    assert ds.X.loc[87, "thal"] == "normal" and ds.X.loc[166, "ca"] == 1.0


def test_convert_heart_rejects_unknown_codes(tmp_path):
    _zip(
        tmp_path / "heart+disease.zip",
        {"processed.cleveland.data": "63.0,1.0,9.0,145.0,233.0,1.0,2.0,150.0,0.0,2.3,3.0,0.0,6.0,0\n"},
    )
    with pytest.raises(ValueError, match="cp"):
        datasets.convert("heart", tmp_path, data_home=tmp_path / "home")
    assert not (tmp_path / "home" / "heart").exists()  # nothing half-written


def test_convert_sonar_and_thyroid(tmp_path):
    r = ",".join(["0.0200"] * 60) + ",R\n"
    m = ",".join(["0.0100"] * 60) + ",M\n"
    _zip(
        tmp_path / "connectionist+bench+sonar+mines+vs+rocks.zip", {"sonar/sonar.all-data": r + m}
    )  # a member in a sub-folder is found too
    folder = datasets.convert("sonar", tmp_path, data_home=tmp_path / "home")
    df = pd.read_csv(folder / "data.csv.gz")
    assert list(df["target"]) == [0, 1] and df.loc[0, "V1"] == 0.02 and df.shape == (2, 61)

    train = (
        "0.73 0 1 0 0 0 0 0 1 0 0 0 0 0 0 0 0.0006 0.015 0.12 0.082 0.146 3 \n"
        "0.24 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0.00025 0.03 0.143 0.133 0.108 3\n"
    )
    test = "0.29 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0.0061 0.028 0.111 0.131 0.085 2\n"
    _zip(tmp_path / "thyroid+disease.zip", {"ann-train.data": train, "ann-test.data": test})
    datasets.convert("thyroid", tmp_path, data_home=tmp_path / "home")
    ds = datasets.load("thyroid", data_home=tmp_path / "home")
    assert list(ds.y) == [3, 3, 2] and ds.X.loc[1, "TSH"] == 0.00025
    assert ds.costs.acquisition_cost(["FTI"]) == pytest.approx(25.92)
    text = gzip.decompress((tmp_path / "home" / "thyroid" / "train.csv.gz").read_bytes()).decode()
    assert text.splitlines()[1] == "0.73,0,1,0,0,0,0,0,1,0,0,0,0,0,0,0,0.0006,0.015,0.12,0.082,0.146,3"


def test_convert_rank_small_miniboone_higgs_yahoo(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "rank.train").write_text("0 10:0.89 11:0.75 300:0.43\n1 1:0.69 11:0.64\n2 2:0.5\n")
    (raw / "rank.train.query").write_text("2\n1\n")
    (raw / "rank.test").write_text("4 1:0.74\n0 5:0.1\n")
    (raw / "rank.test.query").write_text("2\n")
    datasets.convert("rank_small", raw, data_home=tmp_path / "home")
    ds = datasets.load("rank_small", data_home=tmp_path / "home")
    assert ds.X.shape == (5, 300) and list(ds.y) == [0, 1, 2, 4, 0]
    assert list(ds.qid) == [0, 0, 1, 2, 2]
    assert ds.X.loc[0, "f9"] == 0.89 and ds.X.loc[0, "f299"] == 0.43 and ds.X.loc[1, "f0"] == 0.69
    (raw / "rank.test.query").write_text("3\n")
    with pytest.raises(ValueError, match="sum to 3"):
        datasets.convert("rank_small", raw, data_home=tmp_path / "home")

    for f in ("mbne_tiny_tr", "mbne_tiny_tv", "mbne_tiny_te"):
        (raw / f).write_text("0 1:4.844370 2:1.061090 50:0.277912\n1 3:-2.5\n")
    datasets.convert("miniboone_tiny", raw, data_home=tmp_path / "home")
    ds = datasets.load("miniboone_tiny", data_home=tmp_path / "home")
    assert ds.X.shape == (6, 50) and ds.X.loc[0, "f0"] == 4.84437 and ds.X.loc[1, "f2"] == -2.5
    assert {k: len(v) for k, v in ds.splits.items()} == {"train": 2, "valid": 2, "test": 2}

    row = "\t".join(["1"] + ["0.869"] * 28) + "\n"
    (raw / "binary.train").write_text(row * 3)
    (raw / "binary.test").write_text(row.replace("1\t", "0\t", 1))
    datasets.convert("higgs_small", raw, data_home=tmp_path / "home")
    ds = datasets.load("higgs_small", data_home=tmp_path / "home")
    assert ds.X.shape == (4, 28) and list(ds.y) == [1, 1, 1, 0]

    (raw / "yahoo_cs_cost").write_text("".join(f"{c}\n\n" for c in [1, 5, 20, 50, 100, 150, 200] * 74 + [1]))
    datasets.convert("yahoo_costs", raw, data_home=tmp_path / "home")
    c = datasets.yahoo_costs(1000, data_home=tmp_path / "home")
    assert set(np.unique(c)) == {1.0, 5.0, 20.0, 50.0, 100.0, 150.0, 200.0}


def test_convert_needs_the_original_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="adult.zip"):
        datasets.convert("adult", tmp_path, data_home=tmp_path / "home")


class _FakeWeb:
    """Stands in for urllib.request.urlopen: serves fixed bytes per URL, records requests."""

    def __init__(self, files: dict[str, bytes]):
        self.files, self.requested = files, []

    def __call__(self, request, timeout=None):
        url = request.full_url if isinstance(request, urllib.request.Request) else request
        self.requested.append(url)
        if url not in self.files:
            raise AssertionError(f"unexpected URL {url}")
        return io.BytesIO(self.files[url])


def _heart_zip_bytes(tmp_path: Path) -> bytes:
    lines = _cleveland_lines(datasets.load_demo())
    return _zip(tmp_path / "fixture.zip", {"processed.cleveland.data": "\n".join(lines) + "\n"}).read_bytes()


def test_download_without_network(tmp_path, monkeypatch):
    url = registry.REGISTRY["heart"].sources[0].url
    assert url == "https://archive.ics.uci.edu/static/public/45/heart+disease.zip"
    web = _FakeWeb({url: _heart_zip_bytes(tmp_path)})
    monkeypatch.setattr(urllib.request, "urlopen", web)
    home = tmp_path / "home"
    folder = datasets.download("heart", data_home=home)
    assert folder == home / "heart" and web.requested == [url]
    ds = datasets.load("heart", data_home=home)
    pd.testing.assert_frame_equal(ds.X, datasets.load_demo().X)
    assert sorted(p.name for p in home.iterdir()) == ["heart"]  # downloads cleaned up
    # already there and verified: no new request unless forced
    datasets.download("heart", data_home=home)
    assert len(web.requested) == 1
    datasets.download("heart", data_home=home, force=True)
    assert len(web.requested) == 2


def test_download_goes_to_the_user_cache_by_default(tmp_path, monkeypatch, no_data_home):
    url = registry.REGISTRY["heart"].sources[0].url
    monkeypatch.setattr(urllib.request, "urlopen", _FakeWeb({url: _heart_zip_bytes(tmp_path)}))
    assert datasets.download("heart") == no_data_home / "heart"
    assert datasets.load("heart").path == no_data_home / "heart"


def test_download_verifies_recorded_sha256(tmp_path, monkeypatch):
    spec = registry.REGISTRY["heart"]
    data = _heart_zip_bytes(tmp_path)
    monkeypatch.setattr(urllib.request, "urlopen", _FakeWeb({spec.sources[0].url: data}))
    wrong = dataclasses.replace(spec, sources=(dataclasses.replace(spec.sources[0], sha256="f" * 64),))
    monkeypatch.setitem(registry.REGISTRY, "heart", wrong)
    with pytest.raises(ChecksumError, match="heart"):
        datasets.download("heart", data_home=tmp_path / "home")
    assert not (tmp_path / "home" / "heart").exists()
    right = dataclasses.replace(
        spec, sources=(dataclasses.replace(spec.sources[0], sha256=hashlib.sha256(data).hexdigest()),)
    )
    monkeypatch.setitem(registry.REGISTRY, "heart", right)
    assert datasets.download("heart", data_home=tmp_path / "home").is_dir()


def test_every_dataset_has_a_public_source():
    for name, spec in registry.REGISTRY.items():
        assert spec.sources and all(s.url.startswith("https://") for s in spec.sources), name
        assert spec.origin.startswith("https://"), name
    assert registry.REGISTRY["higgs_small"].origin.endswith("/280/higgs.zip")
    assert registry.REGISTRY["adult"].sources[0].url.endswith("/2/adult.zip")


def test_every_registered_dataset_has_a_converter():
    assert set(converters.CONVERTERS) == set(registry.REGISTRY)


def test_the_package_exposes_its_public_names_lazily():
    # thrifty.datasets is a package of modules; its names are those of the modules that define them.
    assert datasets.load is thrifty.datasets.dataset.load and datasets.convert is fetch.convert
    assert datasets.list_datasets is registry.list_datasets and datasets.ChecksumError is fetch.ChecksumError
