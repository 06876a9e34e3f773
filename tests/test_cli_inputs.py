"""The command line on data files as users write them: odd header names, repeated names, no costs."""

import json
import subprocess
import sys

import lightgbm
import numpy as np
import pandas as pd
import pytest

import thrifty
from tests._helpers.names import LIGHTGBM_OK, NASTY
from thrifty import cli
from thrifty.cli import main


def _files(folder, names, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(200, len(names))), columns=names)
    y = (X.iloc[:, 0] + X.iloc[:, 1] > 0).astype(int).to_numpy()
    X.assign(target=y).to_csv(folder / "data.csv", index=False)
    prices = {n: float(i + 1) for i, n in enumerate(names)}
    (folder / "costs.json").write_text(json.dumps(prices))
    return X, y, prices


def test_evaluate_and_info_read_a_lightgbm_model_on_a_csv_with_odd_names(tmp_path, capsys):
    X, y, prices = _files(tmp_path, LIGHTGBM_OK)
    # The model keeps LightGBM's forms of the names (blood_pressure); the CSV and the cost
    # file spell them as the user did (blood pressure).
    model = lightgbm.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, y)
    thrifty.save(thrifty.Forest.from_model(model), tmp_path / "model.json")
    args = [str(tmp_path / "model.json"), str(tmp_path / "data.csv"), "--costs", str(tmp_path / "costs.json")]
    assert main(["evaluate", *args, "--out", str(tmp_path / "report.csv")]) == 0
    out = capsys.readouterr().out
    report = pd.read_csv(tmp_path / "report.csv")
    acquired = report[[c for c in report.columns if c.startswith("acquired:")]].to_numpy()
    prices_in_model_order = [prices[n] for n in LIGHTGBM_OK]
    np.testing.assert_allclose(report["feature"], acquired @ prices_in_model_order)
    np.testing.assert_array_equal(report["prediction"], model.predict(X))
    assert f"accuracy: {(model.predict(X) == y).mean():.4g} over the 200 rows of" in out
    assert main(["info", args[0], "--data", args[1], "--costs", args[3]]) == 0
    assert f"mean {report['total'].mean():.4g}" in capsys.readouterr().out


def test_evaluate_reads_a_cegb_model_whose_names_lightgbm_refuses(tmp_path, capsys):
    X, y, prices = _files(tmp_path, NASTY)
    est = thrifty.CEGBClassifier(n_estimators=8, progress=False).fit(X, y)
    thrifty.save(est, tmp_path / "model.json")
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "model.json"),
                str(tmp_path / "data.csv"),
                "--costs",
                str(tmp_path / "costs.json"),
                "--out",
                str(tmp_path / "report.csv"),
            ]
        )
        == 0
    )
    report = pd.read_csv(tmp_path / "report.csv")
    assert [c[len("acquired:") :] for c in report.columns if c.startswith("acquired:")] == NASTY
    np.testing.assert_array_equal(report["prediction"], est.predict(X))


def test_compare_runs_on_a_csv_with_odd_names(tmp_path, capsys):
    _files(tmp_path, NASTY)
    assert (
        main(
            [
                "compare",
                str(tmp_path / "data.csv"),
                "--costs",
                str(tmp_path / "costs.json"),
                "--methods",
                "lightgbm,cheapest",
                "--quick",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    table = pd.read_csv(tmp_path / "out" / "table.csv")
    assert {"LightGBM, first k trees", "cheapest k features"} <= set(table["method"])


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "{model}", "{data}"],
        ["info", "{model}", "--data", "{data}"],
        ["compare", "{data}", "--quick", "--out", "{tmp}/out"],
    ],
)
def test_a_repeated_header_name_is_one_line_naming_it(tmp_path, capsys, command):
    # pandas would silently rename the second "mass" to "mass.1".
    (tmp_path / "dup.csv").write_text("mass,age,mass,target\n1,2,3,0\n4,5,6,1\n7,8,9,0\n")
    X = pd.DataFrame({"mass": [1.0, 4, 7], "age": [2.0, 5, 8]})
    thrifty.save(
        thrifty.Forest.from_model(
            lightgbm.LGBMClassifier(n_estimators=1, min_child_samples=1, verbose=-1).fit(X, [0, 1, 0])
        ),
        tmp_path / "model.json",
    )
    argv = [a.format(model=tmp_path / "model.json", data=tmp_path / "dup.csv", tmp=tmp_path) for a in command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "duplicate name(s) ['mass']" in err


def test_evaluate_without_costs_warns_that_every_feature_costs_1(tmp_path, capsys):
    X, y, _ = _files(tmp_path, ["a", "b"])
    thrifty.save(
        thrifty.Forest.from_model(lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y)),
        tmp_path / "model.json",
    )
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "model.json"),
                str(tmp_path / "data.csv"),
                "--out",
                str(tmp_path / "r.csv"),
            ]
        )
        == 0
    )
    assert "warning: no --costs given, so every feature costs 1" in capsys.readouterr().err
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "model.json"),
                str(tmp_path / "data.csv"),
                "--out",
                str(tmp_path / "r.csv"),
                "--costs",
                str(tmp_path / "costs.json"),
            ]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, message",
    [
        # a binary file named .csv
        (b"\xff\xfe\x00\x81garbage", "is not a readable CSV file"),
        # an empty file
        (b"", "is not a readable CSV file"),
        # rows longer than the header
        (b"a,b,target\n1,2,0\n1,2,3,4,5\n", "is not a readable CSV file"),
    ],
)
def test_an_unreadable_data_file_is_one_line(tmp_path, capsys, content, message):
    X, y, _ = _files(tmp_path, ["a", "b"])
    thrifty.save(
        thrifty.Forest.from_model(lightgbm.LGBMClassifier(n_estimators=2, verbose=-1).fit(X, y)),
        tmp_path / "model.json",
    )
    (tmp_path / "bad.csv").write_bytes(content)
    assert main(["evaluate", str(tmp_path / "model.json"), str(tmp_path / "bad.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("thrifty: error: ") and err.count("\n") == 1 and message in err


@pytest.mark.parametrize(
    "error",
    [
        thrifty.exceptions.InputError("the costs name a feature 'x' the model lacks"),
        thrifty.exceptions.BudgetError("no candidate meets the budget 1; raise it to >= 2"),
        FileNotFoundError("data file 'x.csv' does not exist"),
        PermissionError("[Errno 13] Permission denied: 'model.json'"),
    ],
)
def test_thriftys_own_errors_and_os_errors_are_one_line(monkeypatch, capsys, error):
    def fails(args):
        raise error

    monkeypatch.setattr(cli, "_info", fails)
    assert main(["info", "model.json"]) == 2
    err = capsys.readouterr().err
    assert err == f"thrifty: error: {error}\n"


@pytest.mark.parametrize(
    "error",
    [
        # a library's ValueError is not a message written for the user
        ValueError("operands could not be broadcast together with shapes (3,) (4,)"),
        TypeError("unsupported operand type(s) for +: 'int' and 'str'"),
        KeyError("feature_names"),
    ],
)
def test_a_bug_is_not_reported_as_a_user_error(monkeypatch, error):
    def broken(args):
        raise error

    monkeypatch.setattr(cli, "_info", broken)
    with pytest.raises(type(error)) as raised:
        main(["info", "model.json"])
    assert raised.value is error


def test_the_command_shows_a_bugs_traceback_and_a_user_errors_line(tmp_path):
    def run(code):
        return subprocess.run(
            [sys.executable, "-c", f"import sys; from thrifty import cli; {code}; sys.exit(cli.main())"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=tmp_path,
        )

    user = run("sys.argv[1:] = ['info', 'nosuch.json']")
    assert user.returncode == 2
    assert user.stderr == "thrifty: error: model file 'nosuch.json' does not exist\n"
    bug = run("cli._info = lambda args: 1 / 0; sys.argv[1:] = ['info', 'nosuch.json']")
    assert bug.returncode == 1
    assert "Traceback (most recent call last)" in bug.stderr and "ZeroDivisionError" in bug.stderr
