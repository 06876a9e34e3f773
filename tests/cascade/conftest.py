"""Shared by the cascade tests: an independent precision@k."""

import numpy as np
import pytest


def _precision_at_k(relevant, scores, qid, k=5):
    """Mean over queries of the relevant share of the query's ``k`` best-scored documents (ties
    in input order), the queries' documents picked out one query at a time."""
    shares = []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        best = rows[np.argsort(-scores[rows], kind="stable")[:k]]
        shares.append(relevant[best].sum() / k)
    return float(np.mean(shares))


@pytest.fixture(scope="session")
def precision_by_query():
    """precision@k computed query by query in plain Python (the reference for thrifty.metrics)."""
    return _precision_at_k
