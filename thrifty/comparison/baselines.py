"""The cheapest-k-features baseline's models for :func:`thrifty.compare`: LightGBM models
restricted to the k cheapest features, fitted once per context and shared with the
compositions built on them (the margin cascade of ``forest_methods``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.context import Context
from thrifty.comparison.registry import Candidate, fitted, spread
from thrifty.forest import Forest

__all__ = ["cheapest_models", "only"]


def cheapest_models(ctx: Context) -> Iterator[Candidate]:
    """LightGBM models restricted to the k cheapest features (by price alone), k < n, coarse
    to fine (``spread``), should the allowance stop them; kept in ``ctx``'s shared models
    once all are fitted (``Context.shared``), so that a composition reuses them."""
    if "cheapest" in ctx._cache:
        yield from ctx._cache["cheapest"]
        return
    names = ctx.feature_names
    # A stable sort keeps the data's column order among equally priced features.
    order = np.argsort(ctx.costs.prices(), kind="stable")
    n = len(names)
    ks = sorted({int(k) for k in np.geomspace(1, max(1, n - 1), 4 if ctx.quick else 8).round()})
    found = []
    for k in spread(ks):
        if k >= n:
            continue
        keep = [names[i] for i in order[:k]]
        cand = fitted(
            ctx,
            f"k={k}",
            lambda keep=keep: Forest.from_model(
                ctx.fit_lightgbm(only(ctx.X_train, keep)), feature_names=names
            ),
            k=k,
            features=", ".join(keep),
            price=ctx.costs.acquisition_cost(order[:k].tolist()),
        )
        found.append(cand)
        yield cand
    ctx._cache["cheapest"] = found


def only(X: Any, keep: list[str]) -> Any:
    """``X`` with every column but ``keep`` blanked out (all missing).

    An all-missing column never wins a split, so the model uses only ``keep`` yet still reads
    the full table: every candidate then takes the same test matrix and cost model.
    """
    blank = pd.Series(False, index=X.index)
    return X.assign(**{c: X[c].where(blank) for c in X.columns if c not in keep})
