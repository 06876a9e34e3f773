"""Bad inputs to ``thrifty compare`` and ``thrifty evaluate``: each is one line naming the problem
and the fix, given before any model is fitted or any file written (``thrifty/cli_inputs.py``,
``thrifty/comparison/inputs.py``)."""

import lightgbm
import numpy as np
import pandas as pd
import pytest

import thrifty
import thrifty.comparison
from thrifty.cli import main
from thrifty.cli_inputs import read_table
from thrifty.comparison.inputs import check_data

NAMES = ["glucose", "mass", "age", "bp"]


def frame(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)).round(2), columns=NAMES)
    return X, (X["glucose"] + X["mass"] > 0).astype(int).to_numpy()


def write(folder, kind):
    """A data file with one flaw (``kind``), as the issue's users wrote them."""
    X, y = frame()
    data = X.assign(target=y)
    if kind == "high":
        data["glucose"] = data["glucose"].astype(object)
        data.loc[5, "glucose"] = "high"
    elif kind == "rare":
        data.loc[0, "target"] = 2
    elif kind == "text":
        data["target"] = np.where(y == 1, "pos", "neg")
    elif kind == "only_target":
        data = data[["target"]]
    elif kind == "empty":
        data = data.iloc[:0]
    path = folder / f"{kind}.csv"
    data.to_csv(path, index=False, sep=";" if kind == "semicolon" else ",")
    return path


@pytest.fixture
def no_run(monkeypatch):
    """compare itself must not start: the checks come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("compare ran")

    monkeypatch.setattr(thrifty.comparison, "compare", refuse)


@pytest.mark.parametrize(
    "kind, options, message",
    [
        # one "high" among numbers made glucose a 99-category feature, silently
        (
            "high",
            [],
            "column 'glucose' of '{path}' holds numbers but 1 cell(s) are not, the first 'high' on "
            "line 7; correct or blank them, or pass --categorical glucose",
        ),
        # a class of one row: LightGBMError "Number of classes should be specified..."
        ("rare", [], "class 2 has 1 row; compare needs at least 5 rows of each class"),
        # text labels in a regression: "could not convert string to float: 'pos'"
        (
            "text",
            ["--task", "regression"],
            "a regression needs numeric labels, but the labels are text ('neg', 'pos')",
        ),
        # the target alone: "Forced splits file includes feature index 0..."
        ("only_target", [], "'{path}' has no feature columns, only the label"),
        # a header and no rows: "y has a single class ([])"
        ("empty", [], "'{path}' has no rows (a header only?)"),
        # --categorical naming a column the file lacks
        ("high", ["--categorical", "sugar"], "--categorical names column(s) ['sugar'] that"),
    ],
)
def test_compare_refuses_bad_data_in_one_line_before_running(
    tmp_path, capsys, no_run, kind, options, message
):
    path = write(tmp_path, kind)
    assert main(["compare", str(path), "--out", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith("thrifty: error: ") and err.count("\n") == 1
    assert message.format(path=path) in err


def test_an_unwritable_out_is_refused_before_the_run(tmp_path, capsys, no_run):
    (tmp_path / "a_file").write_text("")
    path = write(tmp_path, "plain")
    assert main(["compare", str(path), "--out", str(tmp_path / "a_file" / "out")]) == 2
    assert "cannot write to" in capsys.readouterr().err


def test_categorical_makes_a_column_of_numbers_and_text_categories(tmp_path, monkeypatch):
    seen = {}

    def spy(X, *args, **kwargs):
        seen["X"] = X
        raise thrifty.exceptions.InputError("stop here")

    monkeypatch.setattr(thrifty.comparison, "compare", spy)
    path = write(tmp_path, "high")
    assert main(["compare", str(path), "--categorical", "glucose", "--out", str(tmp_path / "o")]) == 2
    assert isinstance(seen["X"]["glucose"].dtype, pd.CategoricalDtype)
    assert "high" in seen["X"]["glucose"].cat.categories


@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_the_delimiter_is_sniffed(tmp_path, sep):
    X, y = frame()
    X.assign(target=y).to_csv(tmp_path / "data.csv", index=False, sep=sep)
    got, labels, _ = read_table(tmp_path / "data.csv", "target")
    assert list(got.columns) == NAMES and (labels == y).all()
    pd.testing.assert_frame_equal(got, X)


def test_a_time_limit_that_fits_nothing_fails_naming_it(tmp_path, capsys):
    path = write(tmp_path, "plain")
    out = tmp_path / "out"
    code = main(["compare", str(path), "--time-limit", "0.001", "--methods", "lightgbm", "--out", str(out)])
    assert code == 2
    assert "no model was fitted within --time-limit 0.001 s; give more seconds" in capsys.readouterr().err
    assert not (out / "report.md").exists()


@pytest.fixture
def model01(tmp_path):
    X, y = frame()
    forest = thrifty.Forest.from_model(lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y))
    thrifty.save(forest, tmp_path / "model.json")
    return tmp_path / "model.json"


def test_evaluate_on_labels_of_another_encoding_fails_before_writing(tmp_path, capsys, model01):
    path = write(tmp_path, "text")
    report = tmp_path / "cost_report.csv"
    assert main(["evaluate", str(model01), str(path), "--out", str(report)]) == 2
    err = capsys.readouterr().err
    assert "none of the labels of" in err and "(neg, pos) is one of the model's classes (0, 1)" in err
    assert not report.exists()


def test_evaluate_checks_its_out_before_evaluating(tmp_path, capsys, model01):
    (tmp_path / "a_file").write_text("")
    path = write(tmp_path, "plain")
    assert main(["evaluate", str(model01), str(path), "--out", str(tmp_path / "a_file" / "r.csv")]) == 2
    assert "cannot write to" in capsys.readouterr().err


@pytest.mark.parametrize(
    "n_X, n_y, qid, message",
    [
        # was: compare ran on the 195 rows both had, or raised IndexError
        (200, 195, None, "X has 200 rows but y has 195 labels; give one label per row"),
        (200, 200, np.zeros(190), "X has 200 rows but qid has 190; give one query id per row"),
    ],
)
def test_rows_and_labels_must_agree_in_number(n_X, n_y, qid, message):
    X, y = frame(200)
    with pytest.raises(ValueError, match=message):
        check_data(X.iloc[:n_X], y[:n_y], qid)
    with pytest.raises(ValueError, match=message):  # thrifty.compare checks before any fit
        thrifty.compare(X.iloc[:n_X], y[:n_y], qid=qid, progress=False)
