"""Where every benchmark leaves its figures: the last stdout line, and a JSON file that
``benchmarks/report.py`` reads (``results/<bench>.json``; ``<bench>_quick.json`` for --quick)."""

from __future__ import annotations

import json
import os
from pathlib import Path

# Benchmarks time plans with every entry in place: ``thrifty.compile`` waits for the
# scores-only entries it would compile in the background (``shapes.compile_timed`` times both).
os.environ.setdefault("THRIFTY_BACKGROUND", "off")
RESULTS = Path(__file__).resolve().parent / "results"


def emit(figures: dict, quick: bool) -> None:
    """Write ``figures`` (with ``"bench"``) to the results folder and print it as the last line."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    name = f"{figures['bench']}{'_quick' if quick else ''}.json"
    (RESULTS / name).write_text(json.dumps({**figures, "quick": quick}, indent=1) + "\n")
    print(json.dumps(figures))
