"""The README's quickstart runs as written and its claims hold (dense == lazy)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parent.parent / "README.md"


def test_quickstart_runs(capsys):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S).group(1)
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    ev, lazy = namespace["ev"], namespace["lazy"]
    np.testing.assert_array_equal(ev.raw, lazy.raw)
    np.testing.assert_array_equal(ev.cost.total, lazy.cost.total)
    assert 0.0 < ev.cost.mean <= namespace["data"].costs.feature_costs.sum()
    np.testing.assert_allclose(
        ev.raw, namespace["model"].predict(namespace["X_test"], raw_score=True), rtol=1e-9
    )
