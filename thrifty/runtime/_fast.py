"""The serving path of a compiled forest plan: one native call from the matrix to settled costs.

A compiled ``Full`` or ``Sequential`` plan over at most 64 features, evaluated with its own
cost model on a numeric matrix, needs none of the executor machinery: the generated ``eval``
runs the plan from a fresh state to each row's settled costs and acquired features
(``codegen``), and the ``Evaluation`` is cut from that one buffer. Everything that depends only
on the plan and the cost model is prepared here once per compiled plan; a call of a few rows
uses buffers allocated once per thread. Probabilities and labels are computed when first read.
Results are the interpreter's, bit for bit (the tests check it).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.forest.links import labels_from, raw_to_proba
from thrifty.runtime._evaluation import Evaluation
from thrifty.runtime._native_plan import NativeSchedule, parallel
from thrifty.runtime.codegen import COST_TABLES, STATE_FIELDS
from thrifty.runtime.plans import Full, Sequential

# Rows a call serves from per-thread buffers allocated once (a service's calls).
SMALL = 64
# Rows beyond which a batch takes the chunked path (working memory stays bounded).
LARGE = 1 << 16

_FIELD = {name: j for j, name in enumerate(STATE_FIELDS)}


class FastPath:
    """Serve the ``Full``/``Sequential`` plan ``plan`` compiled as ``schedule`` under ``costs``
    (aligned to the plan's features). Build with ``fast_path``."""

    def __init__(self, plan: Full | Sequential, schedule: NativeSchedule, costs: CostModel) -> None:
        f = plan.forest
        assert schedule.native.eval is not None  # fast_path builds one only then
        self.eval = schedule.native.eval
        self.tables = schedule.T.ctypes.data
        self.F, self.K, self.W = f.n_features, f.n_outputs, schedule.width
        self.round32 = f.input_dtype == "float32"
        self.outputs = (f.link, f.classes, f.n_outputs) if f.is_classifier else None
        self.fixed = costs.fixed_cost(plan.feature_usage())
        self.names = costs.feature_names or plan.feature_names
        unit_bits = np.zeros(len(costs.unit_cost), dtype=np.int64)
        for u in range(len(unit_bits)):
            for m in costs.unit_feat[costs.unit_ptr[u] : costs.unit_ptr[u + 1]]:
                unit_bits[u] |= np.int64(1) << np.int64(m)
        named = {
            "closure_ptr": costs.closure_ptr,
            "closure_units": costs.closure_units,
            "unit_cost": costs.unit_cost,
            "unit_bits": unit_bits,
            "prices": np.array([costs.tree_cost, costs.split_cost], dtype=np.float64),
        }
        self._cost_tables = [np.ascontiguousarray(named[name]) for name in COST_TABLES]
        self._C = np.array([a.ctypes.data for a in self._cost_tables], dtype=np.int64)
        self.costs = self._C.ctypes.data
        self._local = threading.local()

    def words(self, n: int) -> int:
        """8-byte words of the buffer of ``n`` rows: the state fields, then the acquired bytes."""
        return self.W * n + -(-n * self.F // 8)

    def _scratch(self) -> tuple[np.ndarray, int, np.ndarray, int]:
        """This thread's input and state buffers for up to ``SMALL`` rows, and their addresses."""
        got = getattr(self._local, "buffers", None)
        if got is None:
            X = np.zeros(SMALL * self.F)
            S = np.zeros(self.words(SMALL))
            got = self._local.buffers = (X, X.ctypes.data, S, S.ctypes.data)
        return got

    def __call__(self, X: np.ndarray) -> Evaluation | None:
        """The ``Evaluation`` of the rows of ``X``, or None when ``X`` is not a numeric matrix
        of the plan's width and at most ``LARGE`` rows (the general path handles it)."""
        if X.ndim != 2 or X.shape[1] != self.F or X.dtype.kind not in "fiub":
            return None
        n = X.shape[0]
        if n <= SMALL:
            xb, x, Sb, s = self._scratch()
            M = xb[: n * self.F].reshape(n, self.F)
            M[:] = X
            if self.round32:
                _round32(M)
            self.eval(x, s, self.tables, self.costs, 0, n, n)
            # The results own a copy: the buffer serves the thread's next call.
            return self._evaluation(Sb[: self.words(n)].copy(), n)
        if n > LARGE:
            return None
        M = np.ascontiguousarray(X, dtype=np.float64)
        if self.round32:
            M = M.copy() if M is X else M
            _round32(M)
        S = np.empty(self.words(n))
        x, s = M.ctypes.data, S.ctypes.data
        parallel(lambda lo, hi: self.eval(x, s, self.tables, self.costs, lo, hi, n), n)
        return self._evaluation(S, n)

    def _evaluation(self, S: np.ndarray, n: int) -> Evaluation:
        K, ints = self.K, S.view(np.int64)

        def field(name: str, of: np.ndarray = ints) -> np.ndarray:
            at = (K + _FIELD[name]) * n
            return of[at : at + n]

        raw = S[:n] if K == 1 else S[: K * n].reshape(K, n).T.copy()
        pos = field("pos")
        acquired = S[self.W * n :].view(np.bool_)[: n * self.F].reshape(n, self.F)
        report = CostReport(
            feature=field("cost", S),
            evaluation=field("evaluation", S),
            total=field("total", S),
            n_trees=pos.copy(),
            n_nodes=field("nodes"),
            acquired=acquired,
            fixed=self.fixed,
            feature_names=self.names,
        )
        if self.outputs is None:
            return Evaluation(raw=raw, proba=None, labels=None, exit=pos, cost=report)
        return ServedEvaluation(raw, pos, report, field("dir"), self.outputs)


class ServedEvaluation(Evaluation):
    """An ``Evaluation`` of a classifier whose probabilities and labels are computed when
    first read (a service often needs only one of them, or neither)."""

    def __init__(
        self,
        raw: np.ndarray,
        exit: np.ndarray,
        cost: CostReport,
        decision: np.ndarray,
        outputs: tuple[str, Any, int],
    ) -> None:
        self.raw, self.exit, self.cost = raw, exit, cost
        self._decision, self._outputs = decision, outputs
        self._proba: np.ndarray | None = None
        self._labels: np.ndarray | None = None

    @property
    def proba(self) -> np.ndarray:  # type: ignore[override]
        if self._proba is None:
            self._proba = raw_to_proba(self.raw, self._outputs[0])
        return self._proba

    @property
    def labels(self) -> np.ndarray:  # type: ignore[override]
        if self._labels is None:
            link, classes, K = self._outputs
            self._labels = labels_from(self.raw, self._decision, link, classes, K)
        return self._labels

    def __reduce__(self) -> tuple:
        # Pickles (to a Dask client, say) as the plain Evaluation it stands for.
        return (Evaluation, (self.raw, self.proba, self.labels, self.exit, self.cost))


def fast_path(plan: Any, schedule: NativeSchedule | None, costs: CostModel) -> FastPath | None:
    """The serving path of a compiled plan, or None when it has none (not a forest plan, more
    than 64 features, or a cost model of more than 64 priced units)."""
    if schedule is None or schedule.native.eval is None or not isinstance(plan, (Full, Sequential)):
        return None
    if len(costs.unit_cost) > 64:
        return None
    return FastPath(plan, schedule, costs)


def _round32(M: np.ndarray) -> None:
    """Round the inputs in place to float32, as scikit-learn and XGBoost read them."""
    with np.errstate(over="ignore"):
        M[:] = M.astype(np.float32)
