"""What the ``thrifty`` command reads: a DATA argument (a CSV or Parquet file, or a shared
dataset's splits) as features, labels, query ids and costs, a saved model as its plan, and the
numbers ``compare`` takes as options."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest.names import align, check_unique

__all__ = [
    "compare_data",
    "evaluation_data",
    "is_file",
    "read_budgets",
    "read_plan",
    "read_table",
    "read_time_limit",
]

# Like the commands, each reader imports what it needs (pandas, the datasets, the runtime,
# thrifty.comparison) only when it runs, so that `thrifty --help` answers without loading numba,
# scikit-learn or LightGBM.


def compare_data(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, Any], Any, str | None]:
    """Training rows, labels, qid, the other splits, costs and cost unit for ``compare``."""
    path = Path(args.data)
    if is_file(args.data):
        X, y, qid = read_table(path, args.target)
        if y is None:
            raise InputError(
                f"{str(path)!r} has no column {args.target!r}; name the label column with --target"
            )
        X = _categorical(X)
        names = [str(c) for c in X.columns]
        costs = CostModel.from_file(args.costs, names) if args.costs is not None else None
        return X, y, qid, {}, costs, None
    from thrifty import datasets
    from thrifty.comparison.report import cost_unit

    ds = datasets.load(args.data)
    X, y, qid = ds.subset("train")
    splits: dict[str, Any] = {}
    if "valid" in ds.splits:
        splits["X_val"], splits["y_val"], splits["qid_val"] = ds.subset("valid")
    splits["X_test"], splits["y_test"], splits["qid_test"] = ds.subset("test")
    costs = CostModel.from_file(args.costs, ds.feature_names) if args.costs is not None else ds.costs
    return X, y, qid, splits, costs, cost_unit(ds.meta)


def _categorical(X: Any) -> Any:
    """Text columns of a data file become pandas categoricals (the models split on categories)."""
    import pandas as pd

    types = pd.api.types
    text = [c for c in X.columns if not (types.is_numeric_dtype(X[c]) or types.is_bool_dtype(X[c]))]
    return X.astype({c: "category" for c in text}) if text else X


def evaluation_data(args: argparse.Namespace, plan: Any) -> tuple[Any, Any, Any, Any]:
    """Features, labels, query ids and cost model (None: none given) for a DATA argument."""
    dataset_costs = None
    if is_file(args.data):
        X, y, qid = read_table(Path(args.data), args.target)
    else:
        from thrifty import datasets

        ds = datasets.load(args.data)
        if "test" not in ds.splits:
            raise InputError(f"dataset {ds.name!r} has no test split; give a data file instead")
        X, y, qid = ds.subset("test")
        dataset_costs = ds.costs
    if args.costs is not None:
        costs = CostModel.from_file(args.costs, _cost_names(plan, X))
    elif dataset_costs is not None:
        costs = dataset_costs
    else:
        costs = None  # every feature costs 1; the command warns once it has evaluated
    return X, y, qid, costs


def _cost_names(plan: Any, X: Any) -> list[str]:
    """The model's features under the names the data file spells them (a cost file is
    written against the data's header; LightGBM may have stored ``a b`` as ``a_b``)."""
    columns = [str(c) for c in X.columns]
    if plan.feature_names is None:
        return columns
    order = align(plan.feature_names, columns)
    return plan.feature_names if order is None else [columns[j] for j in order]


def is_file(data: str) -> bool:
    """True when DATA names a data file rather than a shared dataset."""
    path = Path(data)
    return path.exists() or path.suffix.lower() in (".csv", ".gz", ".parquet", ".pq")


def read_plan(path: Path, *, verify: bool = True) -> Any:
    """The plan of a model or plan file saved with ``thrifty.save`` (``verify``: as
    ``thrifty.load``'s)."""
    from thrifty.io import load
    from thrifty.runtime.plans import as_plan

    return as_plan(load(path, verify=verify))


def read_table(path: Path, target: str) -> tuple[Any, Any, Any]:
    """A CSV or Parquet file as (features, the ``target`` column or None, the ``qid`` column or None)."""
    import pandas as pd

    if not path.exists():
        raise FileNotFoundError(f"data file {str(path)!r} does not exist")
    parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        if parquet:
            df = pd.read_parquet(path)
        else:
            # pandas renames a repeated header name ("mass" -> "mass.1"): check the raw header.
            header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
            df = pd.read_csv(path)
    except ImportError as exc:
        raise InputError(
            f"reading {str(path)!r} needs a Parquet engine (pip install pyarrow); or give a CSV file"
        ) from exc
    except ValueError as exc:  # pandas' ParserError and EmptyDataError, UnicodeDecodeError, ArrowInvalid
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"data file {str(path)!r} is not a readable {'Parquet' if parquet else 'CSV'} file ({reason})"
        ) from exc
    if not parquet:
        check_unique([str(c) for c in header.iloc[0]] if len(header) else [], f"{str(path)!r}")
    check_unique([str(c) for c in df.columns], f"{str(path)!r}")
    y = df.pop(target).to_numpy() if target in df.columns else None
    qid = df.pop("qid").to_numpy() if "qid" in df.columns else None
    return df, y, qid


def read_budgets(text: str) -> list[float]:
    """``--budgets``: comma-separated mean costs per example, increasing.

    Checked as :func:`thrifty.compare` checks its ``budgets`` (one rule,
    :func:`thrifty.comparison.settings.check_budgets`), the error in the command line's terms.
    """
    from thrifty.comparison.settings import check_budgets

    values = []
    for part in text.split(","):
        try:
            values.append(float(part))
        except ValueError:
            raise InputError(
                f"--budgets {text!r}: {part.strip()!r} is not a number; give positive "
                "mean costs per example, e.g. --budgets 5,10,20"
            ) from None
    return check_budgets(values, option=f"--budgets {text!r}")


def read_time_limit(text: str) -> float | None:
    """``--time-limit``: positive seconds, checked as :func:`thrifty.compare` checks its
    ``time_limit`` (:func:`thrifty.comparison.settings.check_time_limit`)."""
    from thrifty.comparison.settings import check_time_limit

    try:
        value = float(text)
    except ValueError:
        value = float("nan")  # refused in the same words as a number that is not positive
    return check_time_limit(value, option=f"--time-limit {text!r}")
