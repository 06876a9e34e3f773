"""The serving path of a compiled forest plan: one native call from the matrix to settled costs.

A compiled ``Full`` or ``Sequential`` plan (any number of features), evaluated with its own
cost model on a numeric matrix, needs none of the executor machinery: the generated ``serve``
runs the plan from a fresh state to each row's settled costs and acquired features
(``ir_serving``), and the ``Evaluation`` is read from that one buffer. Everything that
depends only on the plan and the cost model is prepared once per compiled plan.

A call of at most ``SMALL`` rows (a service's call) costs about 1 µs besides the trees: one
check of the input, one copy into buffers of the calling thread, one native call whose one
argument, a call context, is built once per thread and row count, and one copy of the state
out. Every field of the result (scores, exits, probabilities, labels, each cost) is cut from
that copy when first read. One row runs with the trees in vector lanes (``ir_lanes``), without
a branch on its values; for a plan without exits ``evaluate`` takes the lanes' scores alone
(``ScoresEvaluation``: the other fields from one more call when read). Results are the
interpreter's, bit for bit (the tests check it).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.forest import is_dataframe, to_matrix
from thrifty.forest.kernels import SERIAL_ROWS, threads
from thrifty.forest.links import labels_from, raw_to_proba
from thrifty.runtime.compiled.ir_serving import CONTEXT, SCORES, lane_ranks, lane_rows, scores_lanes
from thrifty.runtime.compiled.layout import COST_TABLES, n_words, word_field
from thrifty.runtime.compiled.tables import ForestCode, parallel
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.plans import Full, Sequential

# Rows a call serves from per-thread buffers allocated once (a service's calls).
SMALL = 128
# Rows beyond which a batch takes the chunked path (working memory stays bounded).
LARGE = 1 << 16
# Positions from which one row takes the scores-only lanes by default (``ServingPath.scores``):
# they save work per position, and their result costs a fixed 0.1-0.2 µs more in Python (it
# keeps a copy of the row). Paired (``benchmarks/lanes_ab.py``, one run of 15 rounds, load
# 3-7), scores only over the full rank-record lanes, median: rank300 (500 trees) 0.684,
# synth136 (1,000) 0.728, mtpl2 (1,000) 0.912, higgs255 (500) 0.938, Adult (500) 0.949;
# NYC_taxi (100) 1.005, airline (100) 1.010.
SCORES_POSITIONS = 256

# Where the words of a call's context lie (``ir_serving.CONTEXT``).
_X, _S, _LO, _HI, _N = (CONTEXT.index(name) for name in ("X", "S", "lo", "hi", "n"))
_FLOAT64 = np.dtype(np.float64)
_INT64 = np.dtype(np.int64)
T = TypeVar("T")


class ServingPath:
    """Serve the ``Full``/``Sequential`` plan ``plan`` compiled as ``code`` under ``costs``
    (aligned to the plan's features). Build with ``serving_path``.

    ``lane_rows``: calls of up to this many rows run each row alone with the trees in vector
    lanes (``ir_lanes``), larger ones the rows in the lanes (``ir_serving.lane_rows``: one for
    plans without exits; 0 never, which the benchmarks compare against). Read into each call's
    context: set it before the first call. ``lane_ranks``: whether those lanes read compact
    rank records (``ir_lranks``; ``ir_serving.lane_ranks``), read the same way. ``scores``:
    whether ``evaluate``'s calls of up to ``lane_rows`` rows take the scores-only lanes
    (``ir_serving.scores_lanes``) and return a ``ScoresEvaluation`` (the other fields from one
    more call when read): by default where the plan has them and at least ``SCORES_POSITIONS``
    positions; read when this thread's first call builds its contexts."""

    def __init__(self, plan: Full | Sequential, code: ForestCode, costs: CostModel) -> None:
        f = plan.forest
        P = len(code.layout.order) if code.layout is not None else 0
        assert code.code.serve is not None  # serving_path builds one only then
        self.entry = code.code.serve
        self.code = code
        self.F, self.K, self.W = f.n_features, f.n_outputs, code.width
        # The shape of an input past its number of rows.
        self._tail = (self.F,)
        self.round32 = int(f.input_dtype == "float32")
        self.lane_rows = lane_rows(code.layout) if code.layout is not None else 0
        self.lane_ranks = lane_ranks(code.layout) if code.layout is not None else 0
        self.scores = code.layout is not None and scores_lanes(code.layout) and P >= SCORES_POSITIONS
        self.outputs = (f.link, f.classes, f.n_outputs) if f.is_classifier else None
        # The state holds the trees' sums; raw scores are ``Forest.finish`` of them.
        self.finish = f.finish if f.base_last else None
        # Whether a result's raw scores are the state's first words as they are (one output,
        # no ``finish``): a result then takes them when it is made (``ServingEvaluation``).
        self.plain = self.K == 1 and self.finish is None
        self.fixed = costs.fixed_cost(plan.feature_usage())
        self.names = costs.feature_names or plan.feature_names
        # What a DataFrame's columns are matched and coded by (``array_of``): the plan's own
        # objects, which the conversion's caches know by identity.
        self._feature_names, self._categories = plan.feature_names, plan.categories
        self.fields = {name: j for j, name in enumerate(code.fields)}
        # Each unit's features as a bit set of ``words`` words (feature m: bit m % 64 of word m // 64).
        self.words = code.words
        unit_bits = np.zeros((len(costs.unit_cost), self.words), dtype=np.int64)
        for u in range(len(unit_bits)):
            for m in costs.unit_feat[costs.unit_ptr[u] : costs.unit_ptr[u + 1]].tolist():
                unit_bits[u, m // 64] |= np.int64(1) << np.int64(m % 64)
        named = {
            "closure_ptr": costs.closure_ptr,
            "closure_units": costs.closure_units,
            "unit_cost": costs.unit_cost,
            "unit_bits": unit_bits,
            "prices": np.array([costs.tree_cost, costs.split_cost], dtype=np.float64),
            "unit_words": np.array([n_words(len(costs.unit_cost))], dtype=np.int64),
        }
        self._cost_tables = [np.ascontiguousarray(named[name]) for name in COST_TABLES]
        self._C = np.array([a.ctypes.data for a in self._cost_tables], dtype=np.int64)
        self._local = threading.local()
        self._template: np.ndarray | None = None  # see _context_of
        # What ``evaluate`` returns for an input ``serve`` does not take (``bind``).
        self._general: Callable[..., Evaluation] | None = None
        # Scores first (``raw_path.RawPath``): ``evaluate`` returns ``first(X, n, n_threads)``
        # for float64 matrices of more than ``first_rows`` rows (never, without one).
        self.first: Callable[[np.ndarray, int, int | None], Evaluation] | None = None
        self.first_rows = LARGE

    def bind(self, general: Callable[..., Evaluation]) -> Callable[..., Evaluation]:
        """``evaluate``, with ``general(X, n_threads=...)`` for inputs the serving path does not
        take: the compiled plan's ``evaluate`` in its place (``CompiledPlan``)."""
        self._general = general
        return self.evaluate

    def evaluate(self, X: Any, *, n_threads: int | None = None) -> Evaluation:
        """The ``Evaluation`` of the rows of ``X``: ``serve``'s, else the general path's (see
        ``bind``). A call of at most ``SMALL`` rows runs here without calling ``serve``: on a
        one-row call each Python call is a twentieth of thrifty's side of the call (a call to
        ``serve`` from the compiled plan's own ``evaluate`` took 0.2 µs of Adult's 4.4)."""
        if type(X) is np.ndarray:
            shape = X.shape
            if shape[1:] == self._tail and (X.dtype is _FLOAT64 or X.dtype.kind in "fiub"):
                n = shape[0]
                # ``==`` too: an unpickled float64 array's dtype is an equal object, not numpy's.
                if self.first_rows < n <= LARGE and (X.dtype is _FLOAT64 or X.dtype == _FLOAT64):
                    return self.first(X, n, n_threads)  # type: ignore[misc]
                if n <= SMALL:
                    try:
                        M, S, _, ctx, quick = self._local.calls[n]
                    except AttributeError:
                        self._local.calls = self._calls()
                        M, S, _, ctx, quick = self._local.calls[n]
                    M[...] = X
                    self.entry(ctx)
                    if quick:
                        return ScoresEvaluation(S[: self.K * n].copy(), M.copy(), self, n_threads)
                    return ServingEvaluation(S.copy(), n, self)
        ev = self.serve(X, n_threads)
        if ev is not None:
            return ev
        assert self._general is not None, "bind the serving path to its plan first"
        return self._general(X, n_threads=n_threads)

    def context(self, X: np.ndarray, S: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray:
        """The call context of ``serve`` (``ir_serving.CONTEXT``) for rows ``[lo, hi)`` of the
        ``n`` rows of ``X`` with state ``S``."""
        words = {
            "X": X.ctypes.data,
            "S": S.ctypes.data,
            "T": self.code.T.ctypes.data,
            "C": self._C.ctypes.data,
            "lo": lo,
            "hi": hi,
            "n": n,
            "round32": self.round32,
            "lane_rows": self.lane_rows,
            "lane_ranks": self.lane_ranks,
        }
        return np.array([words[name] for name in CONTEXT], dtype=np.int64)

    def _context_of(self, X: np.ndarray, S: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray:
        """:meth:`context`, from a template built once: a call above ``SMALL`` rows spent about
        4 µs building the dict and the array (a tenth of a 100-row call on NYC_taxi)."""
        if self._template is None:
            self._template = self.context(X, S, 0, 0, 0)
        ctx = self._template.copy()
        ctx[_X], ctx[_S], ctx[_LO], ctx[_HI], ctx[_N] = X.ctypes.data, S.ctypes.data, lo, hi, n
        return ctx

    def _calls(self) -> list[tuple[np.ndarray, np.ndarray, int, int, bool]]:
        """This thread's calls of 0 to ``SMALL`` rows: per row count, the input buffer as an
        ``(n, F)`` matrix, the state buffer of ``n`` rows, ``serve``'s argument (the address
        of the call's context), the argument ``evaluate`` passes (the scores-only context for
        calls the scores-only lanes take, else the same) and whether it is that one."""
        X = np.zeros(SMALL * self.F)
        S = np.zeros(self.W * SMALL)
        rows = np.arange(SMALL + 1)
        contexts = np.repeat(self.context(X, S, 0, 0, 0)[None], 2 * (SMALL + 1), axis=0)
        contexts[:, CONTEXT.index("hi")] = contexts[:, CONTEXT.index("n")] = np.tile(rows, 2)
        contexts[SMALL + 1 :, CONTEXT.index("lane_ranks")] = SCORES
        at, step = contexts.ctypes.data, contexts.strides[0]
        calls = []
        for n in rows.tolist():
            quick = self.scores and n <= self.lane_rows
            full = at + step * n
            calls.append(
                (
                    X[: n * self.F].reshape(n, self.F),
                    S[: self.W * n],
                    full,
                    full + step * (SMALL + 1) if quick else full,
                    quick,
                )
            )
        # The buffers live as long as the views and the contexts do.
        self._local.keep = (X, S, contexts)
        return calls

    def array_of(self, X: Any) -> np.ndarray | None:
        """The matrix of ``X``, a DataFrame of at most ``LARGE`` rows or a list of rows of
        numbers, as the general path makes it (``to_matrix``, its errors included); None for
        anything else, which the general path takes (and reports on). A one-row DataFrame or
        list took the general path: 6 ms and 185 µs on Adult, against 5 µs for an array."""
        if type(X) is list:
            try:
                M = np.asarray(X)
            except ValueError:  # ragged rows: the general path says so
                return None
            return M if M.dtype.kind in "fiub" else None
        if is_dataframe(X) and len(X) <= LARGE:
            return to_matrix(X, self.F, self._feature_names, self._categories)
        return None

    def serve(self, X: Any, n_threads: int | None = None) -> Evaluation | None:
        """The ``Evaluation`` of the rows of ``X``, or None when ``X`` is not a numeric ndarray
        of the plan's width and at most ``LARGE`` rows (the general path handles it)."""
        # Each step of a small call is counted in tens of nanoseconds (a one-row call is a few
        # µs): one compare of the shape's tail, the dtype's identity before its kind.
        if type(X) is not np.ndarray:
            X = self.array_of(X)
            if X is None:
                return None
        shape = X.shape
        if shape[1:] != self._tail or (X.dtype is not _FLOAT64 and X.dtype.kind not in "fiub"):
            return None
        n = shape[0]
        if n <= SMALL:  # as in ``evaluate``, every field at once
            try:
                M, S, ctx, _, _ = self._local.calls[n]
            except AttributeError:
                self._local.calls = self._calls()
                M, S, ctx, _, _ = self._local.calls[n]
            M[...] = X
            self.entry(ctx)
            # The result owns a copy: the buffers serve the thread's next call.
            return ServingEvaluation(S.copy(), n, self)
        if n > LARGE:
            return None
        # ``serve`` rounds float32 forests' inputs in place: on a copy, never on the caller's X.
        M = np.array(X, dtype=np.float64, order="C") if self.round32 else np.ascontiguousarray(X, np.float64)
        S = np.empty(self.W * n)
        if n < SERIAL_ROWS:  # one call on this thread: parallel would make one part of it
            ctx = self._context_of(M, S, 0, n, n)
            self.entry(ctx.ctypes.data)
            return ServingEvaluation(S, n, self)

        def part(lo: int, hi: int) -> None:
            ctx = self._context_of(M, S, lo, hi, n)  # alive until serve returns
            self.entry(ctx.ctypes.data)

        with threads(n_threads):
            parallel(part, n)
        return ServingEvaluation(S, n, self)


class _when_read(Generic[T]):
    """A field computed when first read, then kept in the instance's ``__dict__`` (which later
    reads and assignments then use: this descriptor defines no ``__set__``). Unlike
    ``functools.cached_property`` it takes no lock: two threads reading a field at once at
    worst both compute the same value."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> T:
        if obj is None:
            return self  # type: ignore[return-value]  # read on the class: the descriptor
        value = obj.__dict__[self.name] = self.compute(obj)
        return value


class ServingEvaluation(Evaluation):
    """An ``Evaluation`` read from the state buffer ``S`` of ``n`` rows that ``serve`` filled
    (``layout.state_fields`` after the raw scores): each field is cut from it, or computed for
    probabilities, labels and acquired features, when first read.

    It is an ``Evaluation`` in every way a caller sees (fields are read, assigned and compared
    alike); it pickles as the plain ``Evaluation`` it stands for."""

    def __init__(self, S: np.ndarray, n: int, path: ServingPath) -> None:
        self._S = S
        self._n = n
        self._path = path
        if path.plain:
            # Nearly every caller reads the scores: a slice here costs less than the
            # descriptor's call (about a quarter of a µs). A forest whose base comes after
            # the sum (``Forest.base_last``) reads them through ``raw`` below.
            self.raw = S[:n]

    @_when_read
    def _words(self) -> np.ndarray:
        return self._S.view(_INT64)

    def _field(self, name: str, of: np.ndarray) -> np.ndarray:
        """The field ``name`` of every row, in ``of`` (the state as float64 or int64 words)."""
        at = (self._path.K + self._path.fields[name]) * self._n
        return of[at : at + self._n]

    @_when_read
    def raw(self) -> np.ndarray:
        K, n, finish = self._path.K, self._n, self._path.finish
        raw = self._S[:n] if K == 1 else self._S[: K * n].reshape(K, n).T.copy()
        return raw if finish is None else finish(raw.reshape(n, K)).reshape(raw.shape)

    @_when_read
    def exit(self) -> np.ndarray:
        return self._field("pos", self._words)

    @_when_read
    def cost(self) -> CostReport:
        return ServingCostReport(self)

    @_when_read
    def proba(self) -> np.ndarray | None:
        outputs = self._path.outputs
        return None if outputs is None else raw_to_proba(self.raw, outputs[0])

    @_when_read
    def labels(self) -> np.ndarray | None:
        outputs = self._path.outputs
        if outputs is None:
            return None
        link, classes, K = outputs
        return labels_from(self.raw, self._field("dir", self._words), link, classes, K)

    def __reduce__(self) -> tuple:
        # Pickles (to a Dask client, say) as the plain Evaluation it stands for.
        return (Evaluation, (self.raw, self.proba, self.labels, self.exit, self.cost))


class LaterFields(Evaluation):
    """An ``Evaluation`` whose raw scores came from a scores-only entry and whose other fields
    come from one call of the serving path ``serving`` on the kept rows ``M`` when first read,
    equal bit for bit to what that call gives at once (``ScoresEvaluation``,
    ``raw_path.DeferredEvaluation``). It pickles as the plain ``Evaluation`` it stands for."""

    def __init__(self, M: np.ndarray, serving: ServingPath, n_threads: int | None) -> None:
        self._M, self._serving, self._threads = M, serving, n_threads

    @_when_read
    def _full(self) -> Evaluation:
        ev = self._serving.serve(self._M, self._threads)
        assert ev is not None  # the serving path takes every matrix the scores-only call took
        return ev

    @_when_read
    def exit(self) -> np.ndarray:
        return self._full.exit

    @_when_read
    def cost(self) -> CostReport:
        return self._full.cost

    @_when_read
    def proba(self) -> np.ndarray | None:
        return self._full.proba

    @_when_read
    def labels(self) -> np.ndarray | None:
        return self._full.labels

    def __reduce__(self) -> tuple:
        return (Evaluation, (self.raw, self.proba, self.labels, self.exit, self.cost))


class ScoresEvaluation(LaterFields):
    """The ``Evaluation`` of a call that ran the scores-only lanes (``ServingPath.scores``):
    ``raw`` from the state's first ``K * n`` words ``out``, the other fields as
    ``LaterFields``'. A one-row call then skips the leaves' splits and tested features and
    the pricing: on the ranker's 300 features, each leaf's record is 7 words (5 of tested
    features) where its value is one."""

    def __init__(self, out: np.ndarray, M: np.ndarray, path: ServingPath, n_threads: int | None) -> None:
        super().__init__(M, path, n_threads)
        if path.plain:
            self.raw = out
        else:
            self._out = out

    @_when_read
    def raw(self) -> np.ndarray:
        # As ``ServingEvaluation.raw``.
        K, n, finish = self._serving.K, len(self._M), self._serving.finish
        raw = self._out if K == 1 else self._out.reshape(K, n).T.copy()
        return raw if finish is None else finish(raw.reshape(n, K)).reshape(raw.shape)


class ServingCostReport(CostReport):
    """The ``CostReport`` of a ``ServingEvaluation``: each per-example field is cut from the
    evaluation's buffer when first read. It pickles as a plain ``CostReport``."""

    def __init__(self, ev: ServingEvaluation) -> None:
        self._ev = ev
        self.fixed = ev._path.fixed
        self.feature_names = ev._path.names

    @_when_read
    def feature(self) -> np.ndarray:
        return self._ev._field("cost", self._ev._S)

    @_when_read
    def evaluation(self) -> np.ndarray:
        return self._ev._field("evaluation", self._ev._S)

    @_when_read
    def total(self) -> np.ndarray:
        return self._ev._field("total", self._ev._S)

    @_when_read
    def n_trees(self) -> np.ndarray:
        # Its own array: the exits are the same numbers, but a caller may change either.
        return self._ev._field("pos", self._ev._words).copy()

    @_when_read
    def n_nodes(self) -> np.ndarray:
        return self._ev._field("nodes", self._ev._words)

    @_when_read
    def acquired(self) -> np.ndarray:
        ev = self._ev
        n, F, W = ev._n, ev._path.F, ev._path.words
        words = np.stack([ev._field(word_field("acq", w), ev._words) for w in range(W)], axis=1)
        if sys.byteorder != "little":
            words = words.byteswap()
        # Bit f % 64 of a row's word f // 64 is feature f: the words' little-endian bytes unpack
        # in that order.
        bits = np.unpackbits(words.view(np.uint8).reshape(n, 8 * W), axis=1, count=F, bitorder="little")
        return bits.view(np.bool_)

    def __reduce__(self) -> tuple:
        return (
            CostReport,
            (
                self.feature,
                self.evaluation,
                self.total,
                self.n_trees,
                self.n_nodes,
                self.acquired,
                self.fixed,
                self.feature_names,
                self.latency,
            ),
        )


def serving_path(plan: Any, code: ForestCode | None, costs: CostModel) -> ServingPath | None:
    """The serving path of a compiled plan, or None when it has none (not a forest plan)."""
    if code is None or code.code.serve is None or not isinstance(plan, (Full, Sequential)):
        return None
    return ServingPath(plan, code, costs)
