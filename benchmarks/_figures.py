"""Where every benchmark leaves its figures: the last stdout line, and a JSON file that
``benchmarks/report.py`` reads (``results/<bench>.json``; ``<bench>_quick.json`` for --quick)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Benchmarks time plans with every entry in place: ``thrifty.compile`` waits for the
# scores-only entries it would compile in the background (``shapes.compile_timed`` times both).
os.environ.setdefault("THRIFTY_BACKGROUND", "off")
RESULTS = Path(__file__).resolve().parent / "results"


@contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """``env`` set in ``os.environ`` for the block (a compile under a forced setting), each
    variable restored after (removed where it was unset)."""
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def emit(figures: dict, quick: bool) -> None:
    """Write ``figures`` (with ``"bench"``) to the results folder and print it as the last line."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"{figures['bench']}{'_quick' if quick else ''}.json"
    (RESULTS / name).write_text(json.dumps({**figures, "quick": quick}, indent=1) + "\n")
    print(json.dumps(figures))
