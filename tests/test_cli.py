"""Tests of the ``thrifty`` command line, run in-process through ``thrifty.cli.main``."""

import contextlib
import io
import json
import subprocess
import sys

import pandas as pd
import pytest

import thrifty
from thrifty.cli import main
from thrifty.datasets import load_demo
from thrifty.demo import BASELINE_PARAMS


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """One quick demo run shared by the tests: its folder and what it printed."""
    out = tmp_path_factory.mktemp("demo") / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["demo", "--quick", "--out", str(out)])
    return out, code, stdout.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The demo's test split as a CSV with a target column, and its costs as JSON and CSV."""
    folder = tmp_path_factory.mktemp("inputs")
    ds = load_demo()
    X, y, _ = ds.subset("test")
    X.assign(target=y).to_csv(folder / "test.csv", index=False)
    X.drop(columns="chol").to_csv(folder / "12_columns.csv", index=False)
    (folder / "costs.json").write_text(json.dumps(ds.meta["costs"]))
    (folder / "costs.csv").write_text(
        "feature,cost\n" + "".join(f"{k},{v}\n" for k, v in ds.meta["costs"].items())
    )
    (folder / "unknown.json").write_text(json.dumps({**ds.meta["costs"], "bogus": 1.0}))
    (folder / "broken.json").write_text('{"age": 1')
    return folder, len(y), ds


def test_demo_writes_every_file_and_the_sentence(demo):
    out, code, printed = demo
    assert code == 0
    for name in (
        "frontier.csv",
        "frontier.png",
        "cost_histogram.png",
        "report.md",
        "baseline.json",
        "recommended.json",
    ):
        assert (out / name).stat().st_size > 0, name
    report = (out / "report.md").read_text()
    assert "per patient you get" in report and "## Pareto points" in report
    # A method that does not apply says why (ADAPT-LIN's linear models need numeric features).
    assert "- not offered: ADAPT-LIN" in report and "categorical columns" in report
    assert "per patient you get" in printed
    table = pd.read_csv(out / "frontier.csv")
    assert {"cheapest k features", "LightGBM, first k trees", "QWYC"} <= set(table["method"])
    assert {"name", "mean_cost", "q90_cost", "value", "k", "fit_seconds"} <= set(table.columns)
    # More of the cheapest features never costs less per patient.
    cheap = table[table["method"] == "cheapest k features"].sort_values("k")
    assert cheap["mean_cost"].is_monotonic_increasing
    assert str(out) in printed and "per patient you get" in printed
    assert isinstance(thrifty.load(out / "baseline.json"), thrifty.Forest)


def test_info_describes_the_model(demo, files, capsys):
    out, _, _ = demo
    folder, n, _ = files
    assert main(["info", str(out / "baseline.json")]) == 0
    text = capsys.readouterr().out
    trees = BASELINE_PARAMS["n_estimators"]
    assert f"trees     {trees}" in text and "binary" in text and "thal" in text
    assert (
        main(
            [
                "info",
                str(out / "baseline.json"),
                "--data",
                str(folder / "test.csv"),
                "--costs",
                str(folder / "costs.csv"),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert f"({n} examples)" in text and "cost per example" in text


def test_evaluate_writes_the_cost_report(demo, files, tmp_path, capsys):
    out, _, _ = demo
    folder, n, ds = files
    target = tmp_path / "report.csv"
    assert (
        main(
            [
                "evaluate",
                str(out / "baseline.json"),
                str(folder / "test.csv"),
                "--costs",
                str(folder / "costs.json"),
                "--out",
                str(target),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "accuracy" in printed and str(target) in printed
    report = pd.read_csv(target)
    assert len(report) == n
    assert {"prediction", "proba:1", "total", "n_trees", "acquired:thal"} <= set(report.columns)
    ev = thrifty.evaluate(thrifty.load(out / "baseline.json"), ds.subset("test")[0], ds.costs)
    assert report["total"].to_numpy() == pytest.approx(ev.cost.total)


def test_evaluate_defaults_to_cost_report_csv_in_the_working_folder(demo, tmp_path, monkeypatch, capsys):
    out, _, _ = demo
    monkeypatch.chdir(tmp_path)
    # A dataset name: its test split and its own costs.
    assert main(["evaluate", str(out / "baseline.json"), "heart"]) == 0
    assert (tmp_path / "cost_report.csv").exists()
    assert "wrote cost_report.csv" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, message",
    [
        # missing model file
        (["info", "{tmp}/nosuch.json"], "does not exist"),
        # missing data file
        (["evaluate", "{model}", "{inputs}/nosuch.csv"], "does not exist"),
        # a cost file that is not JSON
        (["evaluate", "{model}", "{inputs}/test.csv", "--costs", "{inputs}/broken.json"], "not valid JSON"),
        # a cost for a feature the data lacks
        (["evaluate", "{model}", "{inputs}/test.csv", "--costs", "{inputs}/unknown.json"], "bogus"),
        # a column missing from the data, named (was "X has 12 columns, but the model expects 13")
        (["evaluate", "{model}", "{inputs}/12_columns.csv"], "lacks the model's feature(s) ['chol']"),
        # a JSON file that is not a model
        (["info", "{inputs}/costs.json"], "not a thrifty"),
        # costs without data to price
        (["info", "{model}", "--costs", "{inputs}/costs.json"], "--data"),
        # neither a file nor a dataset name
        (["info", "{model}", "--data", "no-such-dataset"], "no-such-dataset"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(demo, files, tmp_path, capsys, args, message):
    out, _, _ = demo
    folder, _, _ = files
    argv = [a.format(tmp=tmp_path, model=out / "baseline.json", inputs=folder) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("thrifty: error: ") and err.count("\n") == 1
    assert message in err and "Traceback" not in err


def test_version_and_usage(capsys):
    assert main(["--version"]) == 0
    assert thrifty.__version__ in capsys.readouterr().out
    assert main([]) == 2
    assert "usage: thrifty" in capsys.readouterr().err


def test_python_dash_m():
    done = subprocess.run(
        [sys.executable, "-m", "thrifty", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == f"thrifty {thrifty.__version__}"


def test_an_edited_model_is_refused_unless_accepted(demo, files, tmp_path, capsys):
    # A saved model changed since thrifty.save wrote it loads only when the user says the edit
    # is deliberate; evaluate and serve read it the same way.
    out, _, _ = demo
    folder, _, _ = files
    document = json.loads((out / "baseline.json").read_text())
    document["source"] = "edited by hand"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(document))
    assert main(["info", str(edited)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "changed since it was saved" in err and "--accept-edited" in err
    assert main(["info", str(edited), "--accept-edited"]) == 0
    report = tmp_path / "report.csv"
    argv = ["evaluate", str(edited), str(folder / "test.csv"), "--out", str(report)]
    assert main(argv) == 2 and not report.exists()
    assert main([*argv, "--accept-edited"]) == 0 and report.exists()
