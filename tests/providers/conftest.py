"""A small real model, its QWYC plan and data, shared by the provider and serving tests."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty import CostModel

NAMES = ["age", "bp", "chol", "hr", "st", "ca"]
PRICES = [1.0, 2.0, 7.5, 3.0, 11.0, 40.0]


@pytest.fixture(scope="session")
def small_model():
    """(QWYC plan over a 12-tree LightGBM model, X with NaNs, costs).

    The plan exits after 1 to 10 trees; its rounds of lazy evaluation need up to 4 features.
    """
    lgb = pytest.importorskip("lightgbm")
    pd = pytest.importorskip("pandas")
    from thrifty import Forest, qwyc

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, len(NAMES)))
    y = (
        X[:, 0]
        + 0.5 * X[:, 4]
        - 0.8 * X[:, 5]
        + 0.7 * X[:, 1] * X[:, 3]
        + 0.4 * X[:, 2]
        + 0.5 * rng.normal(size=300)
        > 0
    ).astype(int)
    X[rng.random(X.shape) < 0.05] = np.nan
    model = lgb.LGBMClassifier(n_estimators=12, num_leaves=8, min_child_samples=5, verbose=-1).fit(
        pd.DataFrame(X, columns=NAMES), y
    )
    plan = qwyc(Forest.from_model(model), X, alpha=0.002)
    costs = CostModel(dict(zip(NAMES, PRICES)), feature_names=NAMES, tree_cost=0.25)
    return plan, X, costs


def write_store(url: str, X: np.ndarray, keys: list, columns: list[str], table: str = "patients") -> object:
    """A SQL table of one record per row (in shuffled order): key ``pid``, the feature columns
    (NaN stored as NULL) and a text column ``note``. Returns the SQLAlchemy engine."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    meta = sa.MetaData()
    key_type = sa.String if isinstance(keys[0], str) else sa.Integer
    tbl = sa.Table(
        table,
        meta,
        sa.Column("pid", key_type, primary_key=True, autoincrement=False),
        *(sa.Column(c, sa.Double) for c in columns),
        sa.Column("note", sa.String),
    )
    meta.create_all(engine)
    order = np.random.default_rng(0).permutation(len(keys))
    records = [
        {"pid": keys[i], "note": "x", **{c: None if np.isnan(v) else float(v) for c, v in zip(columns, X[i])}}
        for i in order
    ]
    with engine.begin() as conn:
        conn.execute(tbl.insert(), records)
    return engine
