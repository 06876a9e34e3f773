"""The work of one :func:`thrifty.compare` run beyond its list of fit tasks: which task builds
on which (``Method.after``), and what was left out of the table - settings a method could not
offer, and the explicit cut of a time allowance (``Comparison.cut``)."""

from __future__ import annotations

from typing import Any

from thrifty.comparison.methods import METHODS

__all__ = ["after_of", "cut_of", "skipped_of", "task_seconds_of"]

Missing = list[tuple[str, str, str]]


def after_of(chosen: list, first: int) -> list[int | None]:
    """Per task of one set of rows (``chosen``'s methods in order, from index ``first``), the
    index of the task it builds on (``Method.after``), when that method runs too."""
    at = {m.key: first + i for i, m in enumerate(chosen)}
    return [at.get(m.after) if m.after is not None else None for m in chosen]


def skipped_of(results: list, n_folds: int) -> Missing:
    """The candidates a method could not offer, with its reason (a budget it cannot meet,
    a setting offered on some folds only), for methods the time allowance did not cut."""
    out: dict[tuple[str, str], str] = {}
    for r in results:
        for cand, reason in r.skipped:
            out.setdefault((METHODS[r.method].name, cand), reason)
    for key, _, partial in _partial(results):
        if not _was_cut(results, key):
            for cand, n in partial:
                out.setdefault(
                    (METHODS[key].name, cand),
                    f"offered on {n} of {n_folds} folds only (not comparable); left out",
                )
    return [(m, n, why) for (m, n), why in out.items()]


def cut_of(results: list, n_folds: int) -> Missing:
    """What the time allowance left out of the selection: (method, setting, what), in the
    methods' order. Empty without an allowance (no task is ever stopped then)."""
    out = []
    of = f" of {n_folds} folds" if n_folds > 1 else ""
    ran_of = {key: (ran, partial) for key, ran, partial in _partial(results)}
    for key in dict.fromkeys(r.method for r in results):
        if not _was_cut(results, key):
            continue
        name = METHODS[key].name
        ran, partial = ran_of.get(key, ([], []))
        if not ran:
            out.append((name, "", "not run: the time allowance ran out before it started"))
            continue
        if len(ran) < n_folds:
            out.append((name, "", f"not run on {n_folds - len(ran)}{of}: the time allowance ran out"))
        out += [
            (name, cand, f"fitted on {n}{of} only: the time allowance ran out; left out")
            for cand, n in partial
        ]
        stopped = [r for r in ran if r.stopped]
        if stopped:
            shortest = min(stopped, key=lambda r: len(r.rows))
            what = f"any setting after {shortest.rows[-1]['name']}" if shortest.rows else "every setting"
            where = f" on {len(stopped)}{of}" if n_folds > 1 else ""
            out.append((name, what, f"not fitted{where}: the time allowance ran out"))
    return out


def task_seconds_of(results: list, n_folds: int) -> dict[str, list[float]]:
    """Where the selection's time went: per method (by name, in the methods' order), the
    wall-clock seconds of its task on each fold (0 where it did not start), as kept (under a
    time allowance, both passes' where the refinement pass got further than the first, else the
    first pass's; models the first pass fitted and handed over are not counted again)."""
    out: dict[str, list[float]] = {}
    for r in results:
        per = out.setdefault(METHODS[r.method].name, [0.0] * n_folds)
        if 0 <= r.fold < n_folds and r.started:
            per[r.fold] = round(float(r.seconds), 2)
    return out


def _was_cut(results: list, key: str) -> bool:
    return any(r.stopped or not r.started for r in results if r.method == key)


def _partial(results: list) -> list[tuple[str, list[Any], list[tuple[str, int]]]]:
    """Per method that ran: (key, its started results, the candidates it offered on some of
    those folds only, with on how many)."""
    by_method: dict[str, list] = {}
    for r in results:
        if r.started:
            by_method.setdefault(r.method, []).append(r)
    out = []
    for key, ran in by_method.items():
        seen = [[row["name"] for row in r.rows] for r in ran]
        every = set.intersection(*map(set, seen))
        cands = dict.fromkeys(c for names in seen for c in names if c not in every)
        out.append((key, ran, [(c, sum(c in names for names in seen)) for c in cands]))
    return out
