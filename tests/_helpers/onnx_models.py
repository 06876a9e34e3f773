"""onnxruntime as the reference of the ONNX tests: sessions on one thread, and the raw scores of a
tree-ensemble model (its post-transform removed), decoded from onnxruntime's output layout."""

from __future__ import annotations

from typing import Any

import numpy as np

# Sessions by model, the model kept alive beside its session so that its id is never reused.
_SESSIONS: dict[int, tuple[Any, Any]] = {}


def session(model: Any) -> Any:
    """An onnxruntime session on one thread (with more, onnxruntime sums the trees in
    per-thread parts, in an order that depends on the thread count), made once per model."""
    import onnxruntime as ort

    if id(model) not in _SESSIONS:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        made = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        _SESSIONS[id(model)] = (model, made)
    return _SESSIONS[id(model)][1]


def run(model: Any, X: np.ndarray, width: int = 1) -> list[np.ndarray]:
    """onnxruntime's outputs on ``X`` (cast to the model's input type), ZipMap dictionaries
    turned into arrays; 2-d outputs of no rows get ``width`` (binary classifiers: 2) columns."""
    sess = session(model)
    dtype = np.float32 if sess.get_inputs()[0].type == "tensor(float)" else np.float64
    with np.errstate(over="ignore"):  # values beyond float32's range become infinities, as in the forest
        X = np.asarray(X, dtype=dtype).reshape(-1, X.shape[1])
    outputs = sess.run(None, {sess.get_inputs()[0].name: X})
    out = []
    for o in outputs:
        if isinstance(o, list):  # ZipMap: one dictionary per row
            o = np.array([[d[k] for k in sorted(d)] for d in o])
        o = np.asarray(o)
        if len(X) == 0 and o.ndim != 1:
            o = o.reshape(0, max(2, width) if o.shape[-1] != 1 else 1)
        out.append(o)
    return out


_UNTRANSFORMED: dict[int, tuple[Any, Any]] = {}


def _untransformed(model: Any) -> Any:
    """A copy of ``model`` whose ensemble has post_transform NONE (made once per model)."""
    import onnx

    if id(model) not in _UNTRANSFORMED:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        node = next(n for n in m.graph.node if n.op_type.startswith("TreeEnsemble"))
        for a in node.attribute:
            if a.name == "post_transform":
                if a.type == onnx.AttributeProto.STRING:
                    a.s = b"NONE"
                else:
                    a.i = 0
        _UNTRANSFORMED[id(model)] = (model, m)
    return _UNTRANSFORMED[id(model)][1]


def ort_raw(model: Any, X: np.ndarray, width: int) -> np.ndarray:
    """The ensemble's ``width`` scores before its post-transform, shape (n, width) as the forest's.

    The post-transform is set to NONE; a binary classifier then writes its score ``s`` as its
    second column (the first is ``-s`` or ``1 - s``, or the negative class's own score).
    """
    m = _untransformed(model)
    node = next(n for n in m.graph.node if n.op_type.startswith("TreeEnsemble"))
    outputs = run(m, X, width)
    if len(X) == 0:  # ZipMap's list of no dictionaries has no width
        return np.zeros((0, width))
    scores = outputs[1 if node.op_type == "TreeEnsembleClassifier" else 0].astype(np.float64)
    return scores[:, 1:] if node.op_type == "TreeEnsembleClassifier" and width == 1 else scores
