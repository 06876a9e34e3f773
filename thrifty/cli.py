"""The ``thrifty`` command: ``demo``, ``compare``, ``info``, ``evaluate`` and ``serve``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from thrifty._version import __version__
from thrifty.cli_inputs import (
    check_labels,
    compare_data,
    evaluation_data,
    is_file,
    read_budgets,
    read_plan,
    read_table,
    read_time_limit,
    writable,
)
from thrifty.costs import CostModel
from thrifty.exceptions import InputError, ThriftyError

# Errors a user causes: thrifty's own (a bad cost file, a feature the model lacks, a budget no
# model meets), raised with a message that says what to fix, and OSError (a missing or
# unreadable file). The CLI shows their message alone. Anything else (a ValueError, TypeError,
# KeyError, ... from thrifty's code or a library it calls) is a bug and keeps its traceback.
USER_ERRORS = (ThriftyError, OSError)


#: What a MODEL argument may be (read by thrifty.load_model).
MODEL_HELP = "a thrifty JSON model or plan, or a library's model file (as compare --model)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``thrifty`` command line; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 2 on a usage or user error (one ``thrifty: error: ...`` line on stderr).
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and bad usage
        return int(exc.code or 0)
    try:
        return int(args.run(args) or 0)
    except USER_ERRORS as exc:
        print(f"thrifty: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="thrifty",
        description="Tree-ensemble predictions that pay only for the features and trees they need.",
    )
    parser.add_argument("--version", action="version", version=f"thrifty {__version__}")
    sub = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    demo = sub.add_parser(
        "demo",
        help="cost-accuracy trade-offs on the embedded heart-disease data",
        description="Train a LightGBM baseline on the embedded heart-disease "
        "data (real dollar costs per test), sweep cheaper models, and write a "
        "frontier table, plots and a markdown report.",
    )
    demo.add_argument("--out", default="thrifty-demo", type=Path, help="output folder (default: %(default)s)")
    demo.add_argument("--quick", action="store_true", help="2-fold cross-validation (for tests)")
    demo.set_defaults(run=_demo)

    cmp = sub.add_parser(
        "compare",
        help="every method over budgets on one cost-quality frontier",
        description="Run every method that applies to the data's task over a "
        "sweep of budgets, evaluate each model on held-out rows with exact "
        "per-example costs, and write the table, the Pareto front, a plot, a "
        "markdown report and the recommended models.",
    )
    cmp.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="a shared dataset name (its train/valid/test splits) or a CSV or Parquet "
        "file with a target column (25%% of its rows are held out for testing)",
    )
    cmp.add_argument(
        "--costs",
        type=Path,
        metavar="FILE",
        help='feature costs: JSON {"name": cost} or CSV feature,cost (default: the '
        "dataset's costs for a dataset name, else 1 per feature)",
    )
    cmp.add_argument(
        "--target",
        default="target",
        metavar="NAME",
        help="label column of a data file (default: %(default)s)",
    )
    cmp.add_argument(
        "--task",
        choices=("binary", "multiclass", "ranking", "regression"),
        help="default: inferred from the labels",
    )
    cmp.add_argument(
        "--methods",
        metavar="NAMES",
        help="comma-separated method names (default: all that apply); see --list",
    )
    cmp.add_argument("--list", action="store_true", help="list the methods and exit")
    cmp.add_argument(
        "--budgets",
        metavar="B1,B2,...",
        help="mean costs per example (default: fractions of the plain model's cost)",
    )
    cmp.add_argument(
        "--time-limit",
        metavar="SECONDS",
        help="time allowance for the whole run (default: none - every planned fit runs, and the "
        "result does not depend on the machine's speed or load). Given, an explicit cut: the "
        "methods share it (each fits its cheapest candidate first), nothing starts once it is "
        "spent, and the report names the methods and settings it left out",
    )
    cmp.add_argument("--quick", action="store_true", help="fewer budgets and points per method")
    cmp.add_argument(
        "--split",
        metavar="HOW",
        help="how rows are held out: random (default; a shared dataset's own order where it has "
        "one, e.g. flights by date), ordered (rows in time order: the latest held out) or "
        "time=COLUMN[,COLUMN...] (the latest by these columns)",
    )
    cmp.add_argument(
        "--categorical",
        metavar="COLUMNS",
        help="comma-separated columns of a data file to treat as categories (text columns "
        "are; a column of numbers with a few text cells is an error unless named here)",
    )
    cmp.add_argument(
        "--model",
        metavar="FILE",
        help="your own fitted model as the plain model (the baseline and the start of the "
        "post-hoc methods) instead of a LightGBM model compare fits: a LightGBM .txt, XGBoost "
        ".json/.ubj, CatBoost .cbm, YDF directory, ONNX or thrifty JSON file. The test rows may "
        "overlap the rows it was trained on: give rows it did not see",
    )
    cmp.add_argument(
        "--trust-pickle",
        action="store_true",
        help="allow --model to be a pickle/joblib file (unpickling runs code from the file: only "
        "for a file you made)",
    )
    where = cmp.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run the fits as tasks on a local Dask cluster of N worker processes "
        "(needs thrifty[dask]); the output is the same as without it",
    )
    where.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the fits on a running Dask cluster (e.g. tcp://host:8786; its "
        "workers need thrifty installed)",
    )
    cmp.add_argument(
        "--out", default="thrifty-compare", type=Path, help="output folder (default: %(default)s)"
    )
    cmp.set_defaults(run=_compare)

    data_help = (
        "a CSV or Parquet file (a TARGET column, if present, is the label; a 'qid' "
        "column the query id) or a shared dataset name (its test split)"
    )
    info = sub.add_parser(
        "info",
        help="describe a saved model or plan",
        description="Describe a model or plan saved with thrifty.save; with "
        "--data, also its cost per example on that data.",
    )
    info.add_argument("model", type=Path, metavar="MODEL", help=MODEL_HELP)
    _model_file_options(info)
    info.add_argument("--data", metavar="DATA", help=data_help)
    _common(info)
    info.set_defaults(run=_info)

    ev = sub.add_parser(
        "evaluate",
        help="per-example cost report of a model on data",
        description="Evaluate a saved model or plan on data and write what each "
        "prediction cost (and the prediction) to CSV.",
    )
    ev.add_argument("model", type=Path, metavar="MODEL", help=MODEL_HELP)
    _model_file_options(ev)
    ev.add_argument("data", metavar="DATA", help=data_help)
    _common(ev)
    ev.add_argument(
        "--out",
        type=Path,
        default=Path("cost_report.csv"),
        help="CSV file for the per-example report (default: %(default)s)",
    )
    ev.set_defaults(run=_evaluate)

    srv = sub.add_parser(
        "serve",
        help="serve a model over HTTP, fetching missing features lazily",
        description="Answer POST /predict with predictions and what each cost; "
        "features a request row does not give are fetched from --provider, only "
        "when a tree needs them. GET /health describes the model.",
    )
    srv.add_argument("model", type=Path, metavar="MODEL", help=MODEL_HELP)
    _model_file_options(srv)
    srv.add_argument(
        "--provider",
        metavar="URL",
        help="where missing features come from: a feature service (http://...) or a "
        "database URL (sqlite:///features.db, duckdb:///..., postgresql://...)",
    )
    srv.add_argument("--table", metavar="NAME", help="database table of features (one record per key)")
    srv.add_argument("--key-column", metavar="NAME", help="the table's column of keys")
    srv.add_argument(
        "--key",
        default="id",
        metavar="FIELD",
        help="field of a request row holding its key (default: %(default)s)",
    )
    srv.add_argument(
        "--costs",
        type=Path,
        metavar="FILE",
        help='feature costs: JSON {"name": cost} or CSV feature,cost (default: 1 each)',
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    srv.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    srv.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="most time one request may take (default: %(default)s)",
    )
    srv.add_argument(
        "--max-rows", type=int, default=1000, help="most rows per request (default: %(default)s)"
    )
    srv.add_argument(
        "--max-body",
        type=int,
        default=1 << 20,
        metavar="BYTES",
        help="largest request body (default: %(default)s)",
    )
    srv.add_argument(
        "--max-concurrency",
        type=int,
        default=64,
        metavar="N",
        help="requests evaluated at once; up to 256 more wait for a slot, then 503 (idle "
        "connections do not count; default: %(default)s)",
    )
    srv.add_argument(
        "--trees",
        choices=("in-order", "parallel"),
        default="in-order",
        help="'parallel' lets the trees of a Full plan fetch their features in the same "
        "rounds (default: %(default)s)",
    )
    srv.add_argument(
        "--rounds",
        choices=("in-order", "parallel"),
        default=None,
        help="what each store round fetches: features in the plan's order, or those of every "
        "tree up to the next exit at once (fewer round trips, same cost; default: in-order)",
    )
    srv.add_argument(
        "--prefetch",
        type=Path,
        metavar="CSV",
        help="calibration rows (a CSV with the model's columns): the first round also fetches "
        "every feature at least --prefetch-p of them use (charged to every row; see "
        "docs/runtime.md)",
    )
    srv.add_argument(
        "--prefetch-p",
        type=float,
        default=0.5,
        metavar="P",
        help="share of calibration rows that must use a feature to prefetch it (default: %(default)s)",
    )
    srv.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="kernel threads per request (default: %(default)s; more only pays for large requests)",
    )
    srv.set_defaults(run=_serve)
    return parser


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--costs",
        type=Path,
        metavar="FILE",
        help='feature costs: JSON {"name": cost} or CSV feature,cost (default: the '
        "dataset's costs for a dataset name, else 1 per feature)",
    )
    p.add_argument(
        "--target",
        default="target",
        metavar="NAME",
        help="label column of a data file (default: %(default)s)",
    )


# ---------------------------------------------------------------------- commands
# Each command imports the machinery it runs, so that `thrifty --help` and a command's own
# argument errors answer without loading numba, scikit-learn or LightGBM (about 2 s).


def _demo(args: argparse.Namespace) -> int:
    from thrifty.demo import run_demo

    writable(args.out, folder=True)
    result = run_demo(args.out, quick=args.quick)
    print(result.summary())
    return 0


def _compare(args: argparse.Namespace) -> int:
    from thrifty.comparison import METHODS, compare

    if args.list:
        w1, w2 = max(len(k) for k in METHODS), max(len(m.name) for m in METHODS.values())
        print(
            "\n".join(
                f"{k:<{w1}}  {m.name:<{w2}}  {m.family:<11}  {', '.join(m.tasks)}" for k, m in METHODS.items()
            )
        )
        return 0
    if args.data is None:
        raise InputError("compare needs DATA: a shared dataset name or a CSV/Parquet file")
    X, y, qid, splits, costs, units = compare_data(args)
    if args.split is not None:
        splits["split"] = args.split
    methods = "all" if not args.methods else [m.strip() for m in args.methods.split(",") if m.strip()]
    budgets = None if args.budgets is None else read_budgets(args.budgets)
    time_limit = None if args.time_limit is None else read_time_limit(args.time_limit)
    writable(args.out, folder=True)
    with _executor(args) as executor:
        result = compare(
            X,
            y,
            costs,
            task=args.task,
            methods=methods,
            budgets=budgets,
            time_limit=time_limit,
            quick=args.quick,
            qid=qid,
            executor=executor,
            model=args.model,
            trust_pickle=args.trust_pickle,
            **splits,
        )
    if not len(result.table):
        # An empty report would read as if no budget could be met: say what stopped the run.
        if time_limit is not None and result.stopped_early:
            raise InputError(
                f"no model was fitted within --time-limit {args.time_limit} s; give more "
                "seconds (e.g. --time-limit 60) or leave the limit out"
            )
        why = "; ".join(f"{m} {n}: {r}".replace("  ", " ") for m, n, r in result.skipped[:3])
        raise InputError(f"no method produced a model ({why or 'none applies to the data'})")
    files = result.write(args.out, title=f"thrifty compare: {args.data}", **units)
    print(result.summary(**units))
    print(f"wrote {', '.join(f.name for f in files if f.parent == args.out)} to {args.out}/")
    return 0


def _executor(args: argparse.Namespace) -> Any:
    """``--workers`` / ``--scheduler``: a Dask client to run compare's fits on (else nothing)."""
    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext()
    if args.workers is not None and args.workers < 1:
        raise InputError(f"--workers {args.workers} must be at least 1")
    try:
        from thrifty.dask import cluster_client
    except ImportError as exc:
        raise InputError(f"{exc}; or leave --workers/--scheduler out to run here") from None
    return cluster_client(workers=args.workers, scheduler=args.scheduler)


def _model_file_options(parser: argparse.ArgumentParser) -> None:
    """How a command reading MODEL treats a file edited since it was saved, and pickles."""
    parser.add_argument(
        "--accept-edited",
        action="store_true",
        help="load MODEL even if it was changed since thrifty.save wrote it (its checksum does "
        "not match): for a deliberate edit; save it again to record a new checksum",
    )
    parser.add_argument(
        "--trust-pickle",
        action="store_true",
        help="allow MODEL to be a pickle/joblib file (unpickling runs code from the file: only "
        "for a file you made)",
    )


def _info(args: argparse.Namespace) -> int:
    if args.costs is not None and args.data is None:
        raise InputError("--costs prices a model's features on data; give --data DATA too")
    from thrifty.forest import Forest
    from thrifty.model_files import load_model
    from thrifty.runtime.evaluate import evaluate
    from thrifty.runtime.plans import as_plan

    model = load_model(args.model, verify=not args.accept_edited, trust_pickle=args.trust_pickle)
    plan = as_plan(model)
    forests = [c for c in plan.components() if isinstance(c, Forest)]
    names = plan.feature_names or [f"f{i}" for i in range(plan.n_features)]
    used = [names[i] for i in np.flatnonzero(plan.feature_usage())]
    depths = np.concatenate([f.tree_depths() for f in forests]) if forests else np.zeros(0, int)
    kind = "forest" if model is not plan else plan.kind
    rows = [
        ("model", str(args.model)),
        ("kind", kind + (f" (from {forests[0].source})" if forests and forests[0].source else "")),
        ("task", plan.task),
        ("link", plan.link),
        ("outputs", str(plan.n_outputs)),
    ]
    if plan.classes is not None:
        rows.append(("classes", ", ".join(str(c) for c in plan.classes)))
    rows += [
        ("trees", str(sum(f.n_trees for f in forests))),
        ("nodes", str(sum(f.n_nodes for f in forests))),
        ("depth", f"max {depths.max()}, mean {depths.mean():.1f}" if len(depths) else "-"),
        ("features", f"{len(used)} of {plan.n_features} used: {', '.join(used)}"),
    ]
    if args.data is not None:
        X, _, _, costs = evaluation_data(args, plan)
        s = evaluate(plan, X, costs).cost.summary()
        _warn_unpriced(costs)
        rows += [
            ("data", f"{args.data} ({len(X)} examples)"),
            (
                "cost per example",
                (
                    f"mean {s['mean']:.4g}, median {s['median']:.4g}, "
                    f"90% {s['q90']:.4g}, 99% {s['q99']:.4g}, max {s['max']:.4g}"
                ),
            ),
            ("trees per example", f"mean {s['mean_trees']:.4g}"),
        ]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    import pandas as pd

    from thrifty.runtime.evaluate import evaluate

    plan = read_plan(args.model, verify=not args.accept_edited, trust_pickle=args.trust_pickle)
    X, y, qid, costs = evaluation_data(args, plan)
    check_labels(y, plan, repr(args.data))
    writable(args.out, folder=False)
    ev = evaluate(plan, X, costs)
    _warn_unpriced(costs)
    frame = _predictions(ev, plan)
    report = pd.concat([frame, ev.cost.to_frame()], axis=1)
    report.to_csv(args.out, index=False)
    s = ev.cost.summary()
    lines = [
        (
            f"{len(report)} examples; cost per example: mean {s['mean']:.4g}, median "
            f"{s['median']:.4g}, 90% {s['q90']:.4g}, max {s['max']:.4g}; trees per example: "
            f"mean {s['mean_trees']:.4g}"
        )
    ]
    if y is not None:
        from thrifty import metrics

        name, value = metrics.score(plan.task, y, ev, qid=qid)
        lines.append(
            f"{name}: {value:.4g} over the {len(y)} rows of {args.data}"
            + (" (its test split)" if not is_file(args.data) else "")
        )
    lines.append(f"wrote {args.out}")
    print("\n".join(lines))
    return 0


def _warn_unpriced(costs: Any) -> None:
    if costs is None:
        print(
            "thrifty: warning: no --costs given, so every feature costs 1 and the costs "
            'reported count features; give --costs FILE (JSON {"name": cost} or CSV '
            "feature,cost) for real prices",
            file=sys.stderr,
        )


def _serve(args: argparse.Namespace) -> int:
    from thrifty.serve import create_app, run, store_provider

    try:
        import uvicorn  # noqa: F401 (the server thrifty.serve.run builds)
    except ImportError:
        print(
            "thrifty: error: uvicorn is not installed; install it with: pip install 'thrifty[serve]'",
            file=sys.stderr,
        )
        return 2
    plan = read_plan(args.model, verify=not args.accept_edited, trust_pickle=args.trust_pickle)
    costs = CostModel.from_file(args.costs, feature_names=plan.feature_names) if args.costs else None
    provider = store_provider(
        args.provider, plan, table=args.table, key_column=args.key_column, timeout=args.timeout
    )
    rounds: Any = "parallel" if args.rounds == "parallel" else "in_order"
    if args.prefetch is not None:
        from thrifty import prefetch_plan

        if not 0 < args.prefetch_p <= 1:
            raise InputError(f"--prefetch-p must be in (0, 1], got {args.prefetch_p}")
        calibration, _, _ = read_table(args.prefetch, "target")  # a label column is dropped
        rounds = prefetch_plan(
            plan, calibration, costs, p=args.prefetch_p, parallel=args.rounds == "parallel", progress=False
        )
    app = create_app(
        plan,
        provider,
        costs=costs,
        key=args.key,
        max_rows=args.max_rows,
        max_body=args.max_body,
        timeout=args.timeout,
        trees=args.trees,
        rounds=rounds,
        n_threads=args.threads,
        max_concurrency=args.max_concurrency,
    )
    print(f"thrifty serve: {args.model} on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    run(app, host=args.host, port=args.port)
    return 0


def _predictions(ev: Any, plan: Any) -> Any:
    """Prediction columns: label and class probabilities, or the raw score(s)."""
    import pandas as pd

    cols: dict[str, Any] = {}
    if ev.labels is not None:
        cols["prediction"] = ev.labels
        classes = plan.classes if plan.classes is not None else range(ev.proba.shape[1])
        for j, c in enumerate(classes):
            cols[f"proba:{c}"] = ev.proba[:, j]
    elif ev.raw.ndim == 1:
        cols["prediction"] = ev.raw
    else:
        for j in range(ev.raw.shape[1]):
            cols[f"raw:{j}"] = ev.raw[:, j]
    cols["exit"] = ev.exit
    return pd.DataFrame(cols)
