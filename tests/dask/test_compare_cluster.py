"""`thrifty compare` with its fits as tasks on the Dask cluster: the same output as run here."""

import contextlib
import functools
import io

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed", reason="the Dask tests need the extra thrifty[dask]")

import thrifty.comparison  # noqa: E402
from thrifty.cli import main  # noqa: E402

FAST = {"n_estimators": 30, "num_leaves": 8, "n_jobs": 1}


def _binary(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "c", "d"])
    y = (X.a + 0.7 * X.b + 0.3 * X.c + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


def test_cli_scheduler_option_gives_the_same_files(client, tmp_path, monkeypatch):
    # Smaller models and 2 folds keep the test short (the CLI's defaults are for real data).
    monkeypatch.setattr(
        thrifty.comparison,
        "compare",
        functools.partial(thrifty.comparison.compare, lightgbm_params=FAST, cv=2),
    )
    X, y = _binary()
    data = tmp_path / "tiny.csv"
    X.assign(target=y).to_csv(data, index=False)
    args = ["compare", str(data), "--quick", "--methods", "lightgbm,qwyc"]
    here, there, err = tmp_path / "here", tmp_path / "there", io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(args + ["--out", str(here)]) == 0
        with contextlib.redirect_stderr(err):
            assert main(args + ["--out", str(there), "--scheduler", client.scheduler.address]) == 0
    # progress: one line per finished method on stderr (not a terminal)
    assert "LightGBM" in err.getvalue() and "QWYC" in err.getvalue()
    # the same content, whatever order the tasks finished in (timings aside)
    for name in ("table.csv", "front.csv"):
        tables = [pd.read_csv(d / name).drop(columns=["fit_seconds"]) for d in (here, there)]
        pd.testing.assert_frame_equal(*tables)
        assert len(tables[0]) >= 2


def test_cli_workers_must_be_positive(tmp_path, capsys):
    X, y = _binary(40)
    data = tmp_path / "tiny.csv"
    X.assign(target=y).to_csv(data, index=False)
    assert main(["compare", str(data), "--workers", "0"]) == 2
    assert "--workers 0 must be at least 1" in capsys.readouterr().err
    assert main(["compare", str(data), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
