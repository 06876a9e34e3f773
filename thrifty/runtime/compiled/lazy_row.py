"""One-row lazy requests of a compiled forest plan (a service's request), with their per-row
state prepared once per plan and reused across requests.

``lazy_rounds(compiled, n_rows=1)`` (any ``rounds=`` policy, no ``chunk_size``) asks its
compiled plan for a ``LazyRow``: what a request needs that depends only on the plan and the
cost model (the native lazy blocks, the state's starting values, one request pair per feature,
the fixed cost) is built once, and each request takes a ``RowState`` (the row's inputs, known
flags and native state, their addresses read once) from a small free-list, resets it and gives
it back when it ends, however it ends (finished, failed, or its generator closed or
collected). A state is used by one request at a time, so requests interleaved on one thread or
running on several threads at once each have their own.

A round is then the generator's step, one native call (``ir_lazy``'s ``lazyrun`` over the one
row) and two scalar writes (under ``rounds="parallel"`` also the interpreter's look-ahead, on
the row's native state in place; a prefetch's features are charged into the tested set at the
end, as ``Policy.request`` charges them). The result is read from the row's state when the row
finishes, without evaluating its trees again: the scores, position, splits and tested features
the lazy blocks leave are exactly what the interpreter's resumable kernel leaves
(``NativeLazyExecutor`` hands the same numbers over), and the feature cost of a set of tested
features is settled once per set (``settle``, the interpreter's) and kept. The ``Evaluation``
computes each field when first read, so a caller that reads the score alone pays for no cost
report.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.forest.links import decision_threshold, raw_to_proba
from thrifty.runtime.compiled.layout import LAZY_FIELDS
from thrifty.runtime.compiled.serving import _when_read
from thrifty.runtime.compiled.tables import ForestCode
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret import kernels
from thrifty.runtime.interpret.executors import Context, trees_record
from thrifty.runtime.interpret.results import settle
from thrifty.runtime.lazy.policies import Policy
from thrifty.runtime.lazy.providers import Requests, check_answer, column
from thrifty.runtime.plans import Full, Sequential

_F = {name: j for j, name in enumerate(LAZY_FIELDS)}
_FLOAT64 = np.dtype(np.float64)
_ONE = (1,)
# The row ids of every request of a one-row evaluation (row 0), shared and read-only.
_ROW = np.zeros(1, dtype=np.int64)
_ROW.flags.writeable = False
# States a LazyRow keeps for reuse (more requests at once allocate their own).
KEEP = 8
# Tested-feature sets whose settled cost a LazyRow keeps (later sets are settled each time).
SETTLED = 4096
# Cost models per compiled plan whose LazyRow is kept (``lazy_row``).
_COST_MODELS = 8


def _value(v: Any, f: int, round32: bool) -> float:
    """The one value sent for feature ``f`` as the row's input (``providers.column``'s checks;
    rounded to float32 for a forest that reads its inputs so, as ``round32`` does)."""
    value = column(v, 1, f)[0]
    if round32:
        with np.errstate(over="ignore"):
            value = np.float64(np.float32(value))
    return float(value)


class RowState:
    """One row's lazy evaluation: its inputs ``X`` (1, F), ``known`` flags, tested features
    (``touched``: written by the native code for forests of more than 64 features) and the
    native state ``S`` (``layout.LAZY_FIELDS`` after the raw scores), with the native call's
    arguments, whose addresses never change."""

    __slots__ = ("S", "X", "x", "known", "k", "touched", "blocked", "args", "pos", "cur", "inputs", "want")

    def __init__(self, row: LazyRow) -> None:
        F = row.F
        self.S = row.template.copy()
        self.X = np.zeros((1, F))
        self.known = np.zeros((1, F), dtype=np.bool_)
        self.touched = np.zeros((1, F), dtype=np.bool_)
        # One-dimensional views: a scalar write is cheaper through one index than two.
        self.x, self.k = self.X.reshape(F), self.known.reshape(F)
        ints = self.S[row.K :].view(np.int64)
        self.blocked = ints[_F["blocked"] : _F["blocked"] + 1]
        # What ``look_ahead`` reads and writes (``rounds="parallel"``): views of the state.
        self.pos, self.cur = ints[_F["pos"] : _F["pos"] + 1], ints[_F["cur"] : _F["cur"] + 1]
        self.inputs = (self.X, self.known, False)
        self.want = np.zeros((1, F), dtype=np.bool_)
        work = self.S.ctypes.data + 8 * (row.K + _F["work"])  # the one-row work list: row 0
        # ``lazyrun``'s arguments as ctypes objects, passed as they are (``LazyRow.run`` has no
        # argtypes to convert them with): a call costs about half a µs less.
        pointers = (
            self.X.ctypes.data,
            self.S.ctypes.data,
            row.code.T.ctypes.data,
            self.touched.ctypes.data,
            work,
        )
        one = ctypes.c_int64(1)
        self.args = (*map(ctypes.c_void_p, pointers), one, one, ctypes.c_void_p(self.known.ctypes.data))

    def reset(self, template: np.ndarray, masked: bool) -> None:
        """Back to a row that has fetched nothing. ``X`` keeps its stale values: a value is
        read only where ``known`` says it was fetched."""
        self.S[:] = template
        self.known.fill(False)
        if not masked:
            self.touched.fill(False)


class LazyRow:
    """What a one-row lazy request of a compiled Full or Sequential plan needs that depends
    only on the plan and the cost model ``costs`` (aligned to the plan's features); ``rounds``
    runs one request.

    Parameters
    ----------
    plan : Full or Sequential
    code : ForestCode
        The plan's native code (its lazy blocks are compiled or loaded here).
    costs : CostModel
        Prices, aligned to the plan's features (``costs_for``).
    """

    def __init__(self, plan: Full | Sequential, code: ForestCode, costs: CostModel) -> None:
        f = plan.forest
        self.code, self.forest, self.costs = code, f, costs
        native = code.lazy_code()
        self.native = native  # keeps the code ``run`` points into alive
        # ``lazyrun`` (``objects.LAZY_RUN``: eight 64-bit words) called with ctypes objects of
        # exactly those types, so without argtypes (``RowState.args``).
        address = ctypes.cast(native.run, ctypes.c_void_p).value
        assert address is not None  # the engine's function, loaded
        self.run: Callable[..., None] = ctypes.CFUNCTYPE(None)(address)
        self.K, self.F = f.n_outputs, f.n_features
        self.masked = code.masked
        self.round32 = f.input_dtype != "float64"
        self.fixed = costs.fixed_cost(plan.feature_usage())
        self.names = costs.feature_names or plan.feature_names
        self.outputs = (f.link, f.classes, f.n_outputs) if f.is_classifier else None
        self.prices = (costs.tree_cost, costs.split_cost)
        if f.is_classifier:
            # Each class as its own one-element array (a result's labels are a copy of one).
            classes = np.asarray(f.classes) if f.classes is not None else np.arange(max(2, self.K))
            self.labels = [classes[j : j + 1].copy() for j in range(len(classes))]
            self.threshold = decision_threshold(f.link)
        self.template = np.zeros(self.K + len(LAZY_FIELDS))
        self.template[: self.K] = f.start
        ints = self.template[self.K :].view(np.int64)
        ints[_F["cur"]] = ints[_F["blocked"]] = -1
        # Each round's one pair, built once per feature (the list around it is new each round).
        self.pairs = [(j, _ROW) for j in range(self.F)]
        self.free: list[RowState] = []
        # What ``rounds="parallel"`` walks (the interpreter's record of the trees).
        self.trees, self.order = trees_record(f), plan.schedule.order
        # Tested set (a word of bits, or the row's bytes of ``touched``) -> (acquired, cost).
        self.settled: dict[Any, tuple[np.ndarray, float]] = {}

    def rounds(self, policy: Policy | None = None) -> Generator[Requests, list[np.ndarray], Evaluation]:
        """One request's rounds: ``lazy_rounds(..., n_rows=1)``'s generator, in order (``policy``
        None) or under a ``rounds=`` policy (``lazy.policies``) asking for several features."""
        # list.pop and list.append are atomic: threads share the free-list without a lock.
        try:
            state = self.free.pop()
            state.reset(self.template, self.masked)
        except IndexError:
            state = RowState(self)
        try:
            run, args, pairs, round32 = self.run, state.args, self.pairs, self.round32
            x, k, blocked = state.x, state.k, state.blocked
            first = True
            while True:
                blocked[0] = -1
                run(*args)
                f = int(blocked[0])
                if f < 0:
                    # A prefetch was fetched (and is charged) if the row waited for a round.
                    charged = (
                        policy.prefetch if policy is not None and policy.prefetches and not first else None
                    )
                    return self._result(state, charged)
                if policy is None:
                    values = yield [pairs[f]]
                    check_answer(values, 1)
                    v = values[0]
                    # What providers send (a float64 array of one value) goes straight in.
                    if type(v) is np.ndarray and v.dtype is _FLOAT64 and v.shape == _ONE and not round32:
                        x[f] = v.item()
                    else:
                        x[f] = _value(v, f, round32)
                    k[f] = True
                    continue
                request = self._request(state, f, policy, first)
                first = False
                values = yield request
                check_answer(values, len(request))
                for (g, _), v in zip(request, values):
                    if type(v) is np.ndarray and v.dtype is _FLOAT64 and v.shape == _ONE and not round32:
                        x[g] = v.item()
                    else:
                        x[g] = _value(v, g, round32)
                    k[g] = True
        finally:
            if len(self.free) < KEEP:
                self.free.append(state)

    def _request(self, state: RowState, f: int, policy: Policy, first: bool) -> Requests:
        """A round's pairs under ``policy`` (``Policy.request`` on one row): the feature ``f``
        the row waits for, what the trees up to its next exit wait for (parallel), and on the
        first round the prefetched features not known yet."""
        want = state.want
        want[0, f] = True
        if policy.parallel:
            assert policy.last is not None  # policy_for sets it for parallel policies
            # Where the row stopped is in its native state: pos and cur read in place.
            kernels.look_ahead(
                _ROW, state.inputs, self.trees, self.order, policy.last, state.pos, state.cur, want
            )
        if first and policy.prefetches:
            assert policy.prefetch is not None
            want[0, policy.prefetch] |= ~state.known[0, policy.prefetch]
        features = np.flatnonzero(want[0]).tolist()
        want.fill(False)
        return [self.pairs[g] for g in features]

    def _result(self, state: RowState, charged: np.ndarray | None) -> RowEvaluation:
        """The row's evaluation from its final state; the features ``charged`` (a prefetch's)
        are paid whether the trees tested them or not, as ``Policy.request`` charges them."""
        S = state.S.copy()
        touched = None if self.masked else state.touched.copy()
        if charged is not None:
            if touched is not None:
                touched[0, charged] = True
            else:
                # Bit f of the tested word is feature f; bit 63 is the int64's sign bit.
                word = sum(1 << int(f) for f in set(charged.tolist()))
                S[self.K :].view(np.int64)[_F["bits"]] |= word - (1 << 64) if word >> 63 else word
        return RowEvaluation(S, touched, self)

    def settle(self, key: Any, ev: RowEvaluation) -> tuple[np.ndarray, float]:
        """The acquired features (1, F) and feature cost of the row of ``ev``, whose tested set
        is ``key`` (the interpreter's ``settle``), kept under ``key`` for the next row testing
        the same features."""
        ctx = Context(np.zeros((1, self.F)), np.ones((1, self.F), dtype=np.bool_), True, self.costs)
        if ev._touched is not None:
            ctx.touched[:] = ev._touched
        else:
            # Bit f of the row's word is set when its paths tested feature f (F <= 64).
            word = ev._ints[_F["bits"] : _F["bits"] + 1]
            if sys.byteorder != "little":
                word = word.byteswap()
            ctx.touched[0] = np.unpackbits(word.view(np.uint8), count=self.F, bitorder="little")
        acquired, feature = settle(ctx)
        acquired.flags.writeable = False  # kept: each result gets a copy
        out = (acquired, float(feature[0]))
        if len(self.settled) < SETTLED:
            self.settled[key] = out
        return out


class RowEvaluation(Evaluation):
    """The ``Evaluation`` of a one-row lazy request, read from the row's final native state
    ``S`` (and its ``touched`` bytes for forests of more than 64 features): each field is cut
    from it, or computed, when first read. It is an ``Evaluation`` in every way a caller sees
    and pickles as the plain ``Evaluation`` it stands for."""

    def __init__(self, S: np.ndarray, touched: np.ndarray | None, row: LazyRow) -> None:
        self._S, self._touched, self._row = S, touched, row
        if row.K == 1 and not row.forest.base_last:
            # Nearly every caller reads the score: set here, without the descriptor's call.
            self.raw = S[:1]

    @_when_read
    def _ints(self) -> np.ndarray:
        return self._S[self._row.K :].view(np.int64)

    def _field(self, name: str) -> np.ndarray:
        j = _F[name]
        return self._ints[j : j + 1]

    @_when_read
    def _scores(self) -> np.ndarray:
        """The raw scores as an (1, K) matrix (``Forest.finish`` of the trees' sums)."""
        return self._row.forest.finish(self._S[: self._row.K].reshape(1, -1))

    @_when_read
    def raw(self) -> np.ndarray:
        return self._scores[:, 0] if self._row.K == 1 else self._scores

    @_when_read
    def exit(self) -> np.ndarray:
        return self._field("pos")

    @_when_read
    def proba(self) -> np.ndarray | None:
        outputs = self._row.outputs
        return None if outputs is None else raw_to_proba(self._scores, outputs[0])

    @_when_read
    def labels(self) -> np.ndarray | None:
        row = self._row
        if row.outputs is None:
            return None
        # ``labels_from`` on one row, in scalars: the argmax of several outputs (the first of
        # equal ones), else the score against the link's threshold unless an exit forced it.
        if row.K > 1:
            return row.labels[int(np.argmax(self._scores[0]))].copy()
        forced = int(self._ints[_F["dir"]])
        positive = forced > 0 if forced != 0 else float(self._scores[0, 0]) > row.threshold
        return row.labels[int(positive)].copy()

    @_when_read
    def cost(self) -> CostReport:
        row = self._row
        ints = self._ints
        # The tested set: the row's bytes of ``touched`` (over 64 features), or its word of bits.
        key: Any = self._touched.tobytes() if self._touched is not None else int(ints[_F["bits"]])
        acquired, feature = row.settled.get(key) or row.settle(key, self)
        trees, nodes = int(ints[_F["pos"]]), int(ints[_F["nodes"]])
        tree_cost, split_cost = row.prices
        # As ``results.assemble`` forms them (the same float64 operations: bit for bit).
        evaluation = tree_cost * trees + split_cost * nodes
        money = np.array([feature, evaluation, feature + evaluation])
        counts = np.array([trees, nodes], dtype=np.int64)
        return CostReport(
            money[0:1],
            money[1:2],
            money[2:3],
            counts[0:1],
            counts[1:2],
            acquired.copy(),
            row.fixed,
            row.names,
        )

    def __reduce__(self) -> tuple:
        # Pickles (to a Dask client, say) as the plain Evaluation it stands for.
        return (Evaluation, (self.raw, self.proba, self.labels, self.exit, self.cost))


def lazy_row(compiled: Any, costs: CostModel | None) -> LazyRow | None:
    """The ``LazyRow`` of ``compiled`` (a ``CompiledPlan``) under ``costs`` (None: its own),
    kept on it per cost model object, or None for plans other than Full and Sequential."""
    plan, code = compiled.plan, compiled.forest_code
    if code is None or not isinstance(plan, (Full, Sequential)):
        return None
    if costs is None:
        costs = compiled.costs
    kept: dict[int, tuple[Any, LazyRow]] = compiled.lazy_rows
    hit = kept.get(id(costs))
    if hit is not None and hit[0] is costs:
        return hit[1]
    row = LazyRow(plan, code, costs_for(plan, costs))
    if len(kept) < _COST_MODELS:
        kept[id(costs)] = (costs, row)  # the object is kept too: its id is not reused
    return row
