"""Runtimes that benchmarks/runtime.py times beside thrifty's compiled plans: onnxruntime on the
LightGBM model converted by onnxmltools, and CatBoost's own ``predict`` on a CatBoost model of the
same shape (thrifty compiled on it once ``Forest.from_model`` imports CatBoost)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# Timing helpers of runtime.py: (fn_a, fn_b, fn_c or None, repeats) -> medians, and
# ({name: fn}, X) -> mean seconds per one-row call.
Paired = Callable[..., tuple[float, float, float | None]]
OneRow = Callable[..., dict]


def onnxruntime_part(
    booster: Any, forest: Any, full: Any, M: np.ndarray, repeats: int, paired: Paired, one_row: OneRow
):
    """thrifty compiled against onnxruntime (one thread) on the LightGBM model converted by
    onnxmltools: batch seconds and one-row calls. Null figures, with the reason, without
    onnxruntime or onnxmltools."""
    try:
        import onnxruntime as ort
        from onnxmltools import convert_lightgbm
        from onnxmltools.convert.common.data_types import FloatTensorType
    except ImportError as exc:
        return _null(
            "onnxruntime", f"not installed ({exc.name}): pip install 'thrifty[onnx]' onnxmltools"
        ), []
    from thrifty import Forest

    model = convert_lightgbm(
        booster, initial_types=[("X", FloatTensorType([None, M.shape[1]]))], zipmap=False
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # onnxmltools declares a label of shape (1,): not a warning per call
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    M32 = M.astype(np.float32)  # onnxmltools' model takes float32, as LightGBM's ONNX users feed it
    # Exactness check: the ONNX model imported is onnxruntime's arithmetic bit for bit.
    scores = session.run(None, {name: M32})[1][:, 1]
    imported = Forest.from_model(model)
    assert np.max(np.abs(imported.predict_proba(M)[:, 1] - scores)) < 1e-6

    def ort_batch() -> Any:
        return session.run(None, {name: M32})

    t_ort, t_comp, _ = paired(ort_batch, lambda: full.evaluate(M, n_threads=1), None, repeats)
    singles = one_row(
        {
            "onnxruntime": lambda x: session.run(None, {name: x.astype(np.float32)}),
            "compiled_full": lambda x: full.evaluate(x, n_threads=1),
        },
        M,
    )
    trees_rows = forest.n_trees * len(M)
    figures = {
        "onnxruntime_version": ort.__version__,
        "onnxruntime_ns_per_tree_row": round(t_ort / trees_rows * 1e9, 2),
        "onnxruntime_one_row_us": round(singles["onnxruntime"] * 1e6, 1),
        "compiled_ratio_vs_onnxruntime_batch": round(t_comp / t_ort, 3),
        "compiled_ratio_vs_onnxruntime_one_row": round(singles["compiled_full"] / singles["onnxruntime"], 3),
    }
    return figures, [("onnxruntime (onnxmltools model), 1 thread", t_ort)]


def catboost_part(
    M_tr: np.ndarray,
    y_tr: np.ndarray,
    M: np.ndarray,
    costs: Any,
    n_trees: int,
    repeats: int,
    paired: Paired,
    one_row: OneRow,
):
    """CatBoost's own predict (raw scores, one thread) on a CatBoost model of ``n_trees``
    symmetric trees of depth 5 (32 leaves, as the LightGBM model's), and thrifty compiled on it
    when ``Forest.from_model`` imports CatBoost models; null figures with the reason otherwise."""
    try:
        import catboost
    except ImportError as exc:
        return _null("catboost", f"not installed ({exc.name}): pip install catboost"), []
    import thrifty
    from thrifty import Forest

    model = catboost.CatBoostClassifier(
        iterations=n_trees,
        depth=5,
        learning_rate=0.1,
        thread_count=1,
        random_seed=0,
        verbose=False,
        allow_writing_files=False,
    ).fit(M_tr, y_tr)

    def predict(x: np.ndarray) -> Any:
        return model.predict(x, prediction_type="RawFormulaVal", thread_count=1)

    figures: dict[str, Any] = {"catboost_version": catboost.__version__, "catboost_trees": model.tree_count_}
    try:
        forest = Forest.from_model(model)
    except (TypeError, ValueError) as exc:  # no CatBoost importer yet, or a model it refuses
        reason = f"thrifty cannot import the CatBoost model: {str(exc).split(';')[0]}"
        t_cb, _, _ = paired(lambda: predict(M), lambda: None, None, repeats)
        singles = one_row({"catboost": predict}, M)
        return {
            **figures,
            "catboost_ns_per_tree_row": round(t_cb / (model.tree_count_ * len(M)) * 1e9, 2),
            "catboost_one_row_us": round(singles["catboost"] * 1e6, 1),
            "compiled_ratio_vs_catboost_batch": None,
            "compiled_ratio_vs_catboost_one_row": None,
            "compiled_vs_catboost_reason": reason,
        }, [("catboost predict, 1 thread", t_cb)]
    compiled = thrifty.compile(forest, costs)
    got, theirs = compiled.evaluate(M, n_threads=1).raw, predict(M)
    figures["max_abs_diff_vs_catboost"] = float(np.max(np.abs(got.reshape(theirs.shape) - theirs)))
    t_cb, t_comp, _ = paired(lambda: predict(M), lambda: compiled.evaluate(M, n_threads=1), None, repeats)
    singles = one_row({"catboost": predict, "compiled": lambda x: compiled.evaluate(x, n_threads=1)}, M)
    figures.update(
        catboost_ns_per_tree_row=round(t_cb / (model.tree_count_ * len(M)) * 1e9, 2),
        catboost_one_row_us=round(singles["catboost"] * 1e6, 1),
        compiled_ratio_vs_catboost_batch=round(t_comp / t_cb, 3),
        compiled_ratio_vs_catboost_one_row=round(singles["compiled"] / singles["catboost"], 3),
    )
    return figures, [
        ("catboost predict, 1 thread", t_cb),
        ("thrifty compiled CatBoost evaluate, 1 thread", t_comp),
    ]


def _null(what: str, reason: str) -> dict:
    """The figures of a part that could not run, and why."""
    print(f"  {what}: {reason}; skipped")
    ratios = {
        "onnxruntime": ("compiled_ratio_vs_onnxruntime_batch", "compiled_ratio_vs_onnxruntime_one_row"),
        "catboost": ("compiled_ratio_vs_catboost_batch", "compiled_ratio_vs_catboost_one_row"),
    }[what]
    return {**dict.fromkeys(ratios), f"compiled_vs_{what}_reason": reason}
