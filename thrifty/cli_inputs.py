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
    "check_labels",
    "compare_data",
    "evaluation_data",
    "is_file",
    "read_budgets",
    "read_plan",
    "read_table",
    "read_time_limit",
    "writable",
]

# Like the commands, each reader imports what it needs (pandas, the datasets, the runtime,
# thrifty.comparison) only when it runs, so that `thrifty --help` answers without loading numba,
# scikit-learn or LightGBM.


def compare_data(args: argparse.Namespace) -> tuple[Any, Any, Any, dict[str, Any], Any, dict[str, Any]]:
    """Training rows, labels, qid, the other splits, costs, and how the report writes them
    (``thrifty.comparison.numbers.units``: cost unit, target unit, what a row is) for ``compare``."""
    from thrifty.comparison.inputs import check_data
    from thrifty.comparison.numbers import units

    path = Path(args.data)
    if is_file(args.data):
        X, y, qid = read_table(path, args.target)
        if y is None:
            raise InputError(
                f"{str(path)!r} has no column {args.target!r}; name the label column with --target"
            )
        check_data(X, y, qid, args.task, what=repr(str(path)))
        X = _categorical(X, _names(args.categorical), str(path))
        names = [str(c) for c in X.columns]
        costs = CostModel.from_file(args.costs, names) if args.costs is not None else None
        return X, y, qid, {}, costs, units(None)
    from thrifty import datasets

    ds = datasets.load(args.data)
    X, y, qid = ds.subset("train")
    splits: dict[str, Any] = {}
    if "valid" in ds.splits:
        splits["X_val"], splits["y_val"], splits["qid_val"] = ds.subset("valid")
    splits["X_test"], splits["y_test"], splits["qid_test"] = ds.subset("test")
    splits["split"] = ds.split  # flights: its latest rows, as its test rows are later
    costs = CostModel.from_file(args.costs, ds.feature_names) if args.costs is not None else ds.costs
    return X, y, qid, splits, costs, units(ds.meta)


def _names(text: str | None) -> list[str]:
    """A comma-separated list of column names (``--categorical``)."""
    return [] if not text else [n.strip() for n in text.split(",") if n.strip()]


def _categorical(X: Any, chosen: list[str], where: str) -> Any:
    """Text columns of a data file, and the columns ``chosen``, become pandas categoricals
    (the models split on categories).

    A text column whose cells are mostly numbers is a numeric column with a typing slip
    ("high" among glucose levels): as categories it would lose its order and cost accuracy
    without a word, so it is an error naming the column and its first bad cell, unless chosen.
    """
    import pandas as pd

    unknown = [c for c in chosen if c not in X.columns]
    if unknown:
        raise InputError(
            f"--categorical names column(s) {unknown} that {where!r} does not have; "
            f"its columns are {[str(c) for c in X.columns][:10]}"
        )
    types = pd.api.types
    text = [c for c in X.columns if not (types.is_numeric_dtype(X[c]) or types.is_bool_dtype(X[c]))]
    for c in text:
        if c in chosen:
            continue
        given = X[c].notna()
        bad = given & pd.to_numeric(X[c], errors="coerce").isna()
        if bad.any() and bad.sum() <= given.sum() / 2:
            row = int(bad.to_numpy().argmax())
            raise InputError(
                f"column {str(c)!r} of {where!r} holds numbers but {int(bad.sum())} cell(s) are "
                f"not, the first {X[c].iloc[row]!r} on line {row + 2}; correct or blank them, "
                f"or pass --categorical {c} to treat the column as categories"
            )
    wanted = list(dict.fromkeys([*text, *chosen]))
    return X.astype({c: "category" for c in wanted}) if wanted else X


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


def check_labels(y: Any, plan: Any, data: str) -> None:
    """Refuse labels the model cannot be scored on, before anything is evaluated or written:
    a classifier's labels none of which is one of its classes (a model trained on 0/1 given
    neg/pos), or text labels for a regression."""
    import numpy as np
    import pandas as pd

    if y is None or plan.task == "ranking":
        return
    y = np.asarray(y)
    shown = ", ".join(str(v) for v in pd.unique(y)[:5])
    if plan.task == "regression" and not pd.api.types.is_numeric_dtype(y.dtype):
        raise InputError(
            f"the labels of {data} are text ({shown}) but the model is a regression; give "
            "numeric labels, or --target a column that is not in the data to predict only"
        )
    if plan.classes is not None and len(y) and not np.isin(y, np.asarray(plan.classes)).any():
        raise InputError(
            f"none of the labels of {data} ({shown}) is one of the model's classes "
            f"({', '.join(str(c) for c in plan.classes)}); encode the labels as the model was "
            "trained, or --target a column that is not in the data to predict only"
        )


def writable(out: Path, *, folder: bool) -> None:
    """Check that ``out`` (a folder to create, or a file) can be written, before a run that
    would otherwise fail only at its end."""
    import tempfile

    target = out if folder else out.parent
    try:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target):
            pass
    except OSError as exc:
        # mkdir says "File exists" of a file standing where a folder should be.
        reason = "a file stands in its path" if isinstance(exc, FileExistsError | NotADirectoryError) else exc
        kind = "folder" if folder else "file"
        raise InputError(
            f"cannot write to {str(out)!r} ({reason}); give --out a {kind} you can write to"
        ) from None
    if not folder and out.is_dir():
        raise InputError(
            f"--out {str(out)!r} is a folder; give a file name, e.g. {str(out / 'report.csv')!r}"
        )


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


def read_plan(path: Path, *, verify: bool = True, trust_pickle: bool = False) -> Any:
    """The plan of a model or plan file saved with ``thrifty.save``, or of a library's model
    file (``thrifty.load_model``; ``verify`` and ``trust_pickle``: as its)."""
    from thrifty.model_files import load_model
    from thrifty.runtime.plans import as_plan

    return as_plan(load_model(path, verify=verify, trust_pickle=trust_pickle))


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
            sep = _delimiter(header)
            if sep != ",":
                header = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False, sep=sep)
            df = pd.read_csv(path, sep=sep)
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


def _delimiter(header: Any) -> str:
    """The delimiter of a CSV file from its header read as comma-separated: a header of one
    cell holding semicolons, tabs or bars is split by the most frequent of them (European
    spreadsheets write ``;``)."""
    if header.shape[1] != 1 or not len(header):
        return ","
    cell = str(header.iloc[0, 0])
    counts = {d: cell.count(d) for d in ";\t|"}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


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
