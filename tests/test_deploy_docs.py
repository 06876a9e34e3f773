"""docs/deploy.md's worked example runs as written, and what it prints is what the page says."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "deploy.md"


def test_worked_example_runs_and_matches_the_page(tmp_path, monkeypatch, capsys):
    pytest.importorskip("sqlalchemy")
    from thrifty import evaluate

    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    code = next(block for block in blocks if "sql_provider(engine" in block)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    lazy, plan, data = namespace["lazy"], namespace["plan"], namespace["data"]
    dense = evaluate(plan, namespace["X_test"], data.costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.total, dense.cost.total)
    assert (tmp_path / "heart_plan.json").exists() and (tmp_path / "heart.db").exists()
    printed = " ".join(capsys.readouterr().out.split())
    assert printed in " ".join(text.replace("`", "").split()), printed
