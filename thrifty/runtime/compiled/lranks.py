"""Compact rank records for one row with trees in vector lanes (``ir_lranks``).

The lanes of ``ir_lanes`` read two words per node (left child, feature and flags; then the
threshold as a double) and gather the row's value of the node's feature: 16 bytes of records
per node and three gathers per level. Here the row's values are turned once per call into
integer *ranks*, one per *slot*, and a node is one 64-bit word naming its slot and its
threshold's rank: one gather of records and one of ranks per level, half the bytes.

A slot is what a split decides on:

* a numerical feature (its splits without LightGBM's ``Zero`` missing type): the rank ``r(x)``
  of the row's value among the sorted distinct non-NaN thresholds of the forest's numerical
  splits on it, ``#{t : t < x}``, and ``-1`` for NaN. As ``ir_ranks``' module docstring proves,
  a split of threshold ``t_j`` sends ``x`` right exactly when ``r(x) > j`` for every number, and
  NaN's side is the comparison's signedness (``-1 > j`` is false signed, true unsigned);
* the same feature for its ``Zero`` splits: the same rank, but ``-1`` also for ``|x| <= ZERO``
  (``thrifty.forest.kernels.ZERO``), which those splits send to their default child as NaN;
* a (categorical feature, category set) pair: ``-1`` for NaN, 0 for a value in the set (left),
  1 otherwise (right), by ``thrifty.forest.kernels.next_node``'s rule (codes ``trunc(x)`` for
  ``-1 < x < 32 * words``; sets of one word hold no code from 32 up); a split tests ``r > 0``.
  These ranks are tabled per feature and category (``Slots``), and a call copies one row;
* a last slot whose rank is always 0: a leaf tests ``0 > 0`` on it and stays (its record's
  left child is itself), and a NaN threshold whose NaN side is right tests ``0 > -1``.

A record: its left child (bits 0-30; its right child is next to it, ``lanes.lane_tables``'
numbering), whether NaN goes right (bit 31: compare unsigned), its slot (bits 32-47) and its
threshold's rank ``j`` as a signed 16-bit integer (bits 48-63). So at most ``MAX_SLOTS`` slots
and ``MAX_RANK`` thresholds per feature (``ranks_ok``).

Numerical ranks are computed by groups of ``lanes.LANES`` slots of equal search depth: each
slot's thresholds are stored in breadth-first (Eytzinger) order of a complete search tree
padded with NaN to ``2**s - 1`` keys (a comparison with NaN is false, so ``t < x`` holds on a
prefix of the sorted keys): ``s`` steps ``k = 2k + 1 + (key[k] < x)`` from ``k = 0`` end at
``k = 2**s - 1 + r(x)``, and the first levels of every search share one cache line.
"""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO
from thrifty.runtime.compiled.lanes import BLOCK, LANES, TOP_LEVELS, set_words

# Bits of a record: left child (0-30), NaN right (31), slot (32-47), threshold rank (48-63).
UNSIGNED_BIT, SLOT_SHIFT, RANK_SHIFT = 31, 32, 48
MAX_SLOTS = (1 << 16) - 1
# Thresholds of one feature: a rank ``j`` up to this stays a non-negative int16.
MAX_RANK = (1 << 15) - 1
# Bits of a slot's flags (``cflag``): zero counts as missing.
SLOT_ZERO = 1
# Entries of the categorical slots' rank table (``Slots.cat``, int32) a forest may have (16 MB).
MAX_CAT_TABLE = 1 << 22
# The names of the tables, appended to ``layout.TABLES``.
RANK_TABLES = ("crec", "ctop", "cfeat", "cbase", "cflag", "csteps", "cthr", "ccat", "ccf", "cval")


class Slots:
    """The slots of the forest ``f`` (module docstring).

    Numerical slots come in groups of ``LANES`` of equal search depth (``steps`` per group,
    ``numeric`` groups; padding lanes repeat their group's last slot): per slot its ``feature``,
    the offset ``base`` of its search tree in ``thr`` and its ``flag`` (``SLOT_ZERO``). Then the
    categorical slots, each feature's sets side by side from a multiple of ``LANES``: their
    ranks for every category are tabled (``cat``, int32: per categorical feature, a row of its
    slots' ranks for each code ``0 .. C - 1`` (``C``: 64, or 32 times its largest set's words),
    then one for any other number, one for NaN), and a call copies one row per feature
    (``cat_features``, int64 rows: feature, ``C``, the rows' offset in ``cat``, its first slot
    and its slots in vectors of ``LANES``). The slot ``always`` (past them all) ranks 0.
    ``key`` maps (kind, feature, set word, large set) to a slot."""

    def __init__(self, f: Forest) -> None:
        cat_word = set_words(f, np.arange(f.n_nodes))
        split = f.feature >= 0
        cat = split & (f.cat_start >= 0)
        num = split & ~cat
        zero = num & (f.missing_type == MISSING_ZERO)
        self.sorted: dict[int, np.ndarray] = {}
        for feat in np.unique(f.feature[num]).tolist():
            t = f.threshold[num & (f.feature == feat)]
            # One of -0.0 and +0.0 (equal as doubles), as ``ir_ranks.block_thresholds``.
            self.sorted[int(feat)] = np.unique(t[~np.isnan(t)])
        by_steps: dict[int, list[tuple[str, int]]] = {}
        for feat, t in self.sorted.items():
            on = num & (f.feature == feat)
            for kind, which in (("num", ~zero), ("zero", zero)):
                if np.any(on & which):
                    by_steps.setdefault(int(len(t)).bit_length(), []).append((kind, feat))
        groups = [
            (s, items[g0 : g0 + LANES])
            for s, items in sorted(by_steps.items())
            for g0 in range(0, len(items), LANES)
        ]
        self.max_thresholds = max((len(t) for t in self.sorted.values()), default=0)
        thr: list[float] = []
        offset: dict[int, int] = {}
        for feat, t in self.sorted.items():
            offset[feat] = len(thr)
            thr += eytzinger(t).tolist()
        self.thr = np.array(thr + [np.nan], dtype=np.float64)
        feature: list[int] = []
        base: list[int] = []
        flag: list[int] = []
        self.key: dict[tuple[str, int, int, int], int] = {}
        for _, group in groups:
            for lane in range(LANES):
                kind, feat = group[min(lane, len(group) - 1)]
                if lane < len(group):
                    self.key[(kind, feat, 0, 0)] = len(feature)
                feature.append(feat)
                base.append(offset[feat])
                flag.append(SLOT_ZERO if kind == "zero" else 0)
        self.steps = np.array([s for s, _ in groups] + [0], dtype=np.int64)
        self.numeric = len(groups)
        sets = sorted(
            {(int(f.feature[n]), int(cat_word[n]), int(f.cat_size[n])) for n in np.flatnonzero(cat)}
        )
        bits = np.append(f.cat_bitsets.astype(np.int64), 0)
        rows, table, at = [], [], 0
        for feat in sorted({m for m, _, _ in sets}):
            mine = [(w, size) for m, w, size in sets if m == feat]
            C = max(64 if size <= 2 else 32 * size for _, size in mine)
            n = -(-len(mine) // LANES) * LANES
            first = len(feature)
            rank = np.ones((C + 2, n), dtype=np.int32)
            rank[C + 1] = -1
            codes = np.arange(C)
            for q, (w, size) in enumerate(mine):
                self.key[("cat", feat, w, int(size > 2))] = first + q
                if size <= 2:
                    # Word 0, then word 1 above it (``lanes.set_words``): codes below 64.
                    inset = np.zeros(C, dtype=bool)
                    inset[:64] = (
                        np.uint64(w & ((1 << 64) - 1)) >> np.arange(64, dtype=np.uint64)
                    ) & np.uint64(1) == 1
                else:
                    start, words = w & 0xFFFFFFFF, w >> 32
                    inside = codes < 32 * words
                    word = bits[np.minimum(start + (codes >> 5), len(bits) - 1)]
                    inset = inside & (((word >> (codes & 31)) & 1) == 1)
                rank[:C, q] = np.where(inset, 0, 1)
            feature += [feat] * n
            base += [0] * n
            flag += [0] * n
            rows.append((feat, C, at, first, n // LANES))
            table.append(rank.reshape(-1))
            at += rank.size
        self.cat = np.concatenate(table) if table else np.zeros(1, dtype=np.int32)
        self.cat_features = np.array(rows, dtype=np.int64).reshape(-1, 5)
        self.always = len(feature)
        self.feature = np.array(feature + [0], dtype=np.int64)
        self.base = np.array(base + [0], dtype=np.int64)
        self.flag = np.array(flag + [0], dtype=np.int64)


def eytzinger(t: np.ndarray) -> np.ndarray:
    """The sorted keys ``t`` padded with NaN to ``2**s - 1`` (``s = bit_length(len(t))``) in
    breadth-first order of the complete search tree whose in-order sequence they are."""
    s = int(len(t)).bit_length()
    m = (1 << s) - 1
    keys = np.full(m, np.nan)
    keys[: len(t)] = t
    out = np.empty(m)
    # Node k of the breadth-first order (children 2k + 1, 2k + 2) holds the key of in-order
    # position ``(2 * (k - 2**d + 1) + 1) * 2**(s - 1 - d) - 1`` at depth d.
    for d in range(s):
        k = np.arange((1 << d) - 1, (1 << (d + 1)) - 1)
        out[k] = keys[(2 * (k - (1 << d) + 1) + 1) * (1 << (s - 1 - d)) - 1]
    return out


def ranks_ok(f: Forest) -> bool:
    """Whether the forest's slots fit the records (``MAX_SLOTS`` slots, at most ``MAX_RANK``
    thresholds per feature) and its categorical ranks the table (``MAX_CAT_TABLE`` entries),
    counted generously: two slots per numerical feature and a group's padding per search
    depth, one per distinct set and a vector's padding per categorical feature."""
    split = f.feature >= 0
    num = split & (f.cat_start < 0)
    feats = np.unique(f.feature[num])
    most = max((len(np.unique(f.threshold[num & (f.feature == m)])) for m in feats.tolist()), default=0)
    cats = split & ~num
    words = set_words(f, np.arange(f.n_nodes))
    table = slots = 0
    for m in np.unique(f.feature[cats]).tolist():
        on = cats & (f.feature == m)
        distinct = len(set(zip(words[on].tolist(), f.cat_size[on].tolist())))
        n = -(-distinct // LANES) * LANES
        slots += n
        table += (max(64, 32 * int(f.cat_size[on].max())) + 2) * n
    slots += 2 * len(feats) + LANES * 20
    return most <= MAX_RANK and slots < MAX_SLOTS and table <= MAX_CAT_TABLE


def rank_tables(f: Forest, lanes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The tables ``ir_lranks`` reads, from the lanes' tables ``lanes``
    (``lanes.lane_tables``: the same renumbered nodes, blocks and leaf records); one-word
    placeholders when the forest's slots do not fit (``ranks_ok``: the code then has none).

    Returns
    -------
    dict
        ``crec`` (one int64 record per renumbered node, the module docstring's), ``ctop`` (per
        block, level ``d < lanes.TOP_LEVELS`` and ``q < 2 ** d``, the record of the node each
        lane reaches by the decisions in ``q``'s bits, as ``lanes.top_rows``), and the slots'
        ``cfeat``, ``cbase``, ``cflag``, ``csteps``, ``cthr``, ``ccat`` and ``ccf`` (``Slots``:
        ``cat`` and ``cat_features``).
    """
    if not ranks_ok(f):
        kinds = {"cthr": np.float64, "ccat": np.int32, "cval": np.float64}
        return {name: np.zeros(1, dtype=kinds.get(name, np.int64)) for name in RANK_TABLES}
    lorig, lrec = lanes["lorig"], lanes["lrec"]
    second, left = lrec[:, 1], lrec[:, 0] & 0xFFFFFFFF
    roots = lanes["lblock"].reshape(-1, 1 + BLOCK)[:, 1:]
    n = len(lorig) - 1
    orig = lorig[:n]
    slots = Slots(f)
    feat = f.feature[orig]
    split = feat >= 0
    cat = split & (f.cat_start[orig] >= 0)
    mt = f.missing_type[orig]
    thr = f.threshold[orig]
    miss_left = f.missing_left[orig].astype(bool)
    zero = split & ~cat & (mt == MISSING_ZERO)
    slot = np.full(n + 1, slots.always, dtype=np.int64)
    j = np.zeros(n + 1, dtype=np.int64)
    uns = np.zeros(n + 1, dtype=np.int64)
    for i in np.flatnonzero(cat).tolist():
        slot[i] = slots.key[("cat", int(feat[i]), int(second[i]), int(f.cat_size[orig[i]] > 2))]
    uns[:n][cat] = ~miss_left[cat]
    num = split & ~cat
    # Each numerical split's slot: its feature's, for its missing type.
    of = {kind: np.full(f.n_features, slots.always, dtype=np.int64) for kind in ("num", "zero")}
    for (kind, m, _, _), at in slots.key.items():
        if kind != "cat":
            of[kind][m] = at
    mine = np.where(zero, of["zero"][np.maximum(feat, 0)], of["num"][np.maximum(feat, 0)])
    nan_right = np.where(mt == MISSING_AS_ZERO, ~(0.0 <= thr), ~miss_left)
    nan_thr = np.isnan(thr)
    # A NaN threshold: numbers go right; NaN (and, for ``Zero``, zero) to its side: always
    # right on the last slot, else right exactly for ranks above -1, signed.
    on = num & nan_thr
    j[:n][on] = -1
    slot[:n][on] = np.where(nan_right[on], slots.always, mine[on])
    on = num & ~nan_thr
    slot[:n][on] = mine[on]
    uns[:n][on] = nan_right[on]
    for m, t in slots.sorted.items():
        at = on & (feat == m)
        j[:n][at] = np.searchsorted(t, thr[at])
    u = np.uint64
    crec = (
        (left.astype(u) & u(0x7FFFFFFF))
        | (uns.astype(u) << u(UNSIGNED_BIT))
        | (slot.astype(u) << u(SLOT_SHIFT))
        | ((j.astype(u) & u(0xFFFF)) << u(RANK_SHIFT))
    ).view(np.int64)
    return {
        "crec": crec,
        "ctop": _top(crec, left, roots),
        "cfeat": slots.feature,
        "cbase": slots.base,
        "cflag": slots.flag,
        "csteps": slots.steps,
        "cthr": slots.thr,
        "ccat": slots.cat,
        "ccf": slots.cat_features,
        "cval": _values(lanes["lleaf"], f.n_outputs),
    }


def _values(lleaf: np.ndarray, K: int) -> np.ndarray:
    """``cval`` (see ``rank_tables``), in an array that starts on a 64-byte line."""
    flat = np.zeros(lleaf.shape[0] * K + 8, dtype=np.float64)
    start = (-flat.ctypes.data // 8) % 8
    out = flat[start : start + lleaf.shape[0] * K].reshape(-1, K)
    out[:] = lleaf[:, :K]
    return out


def _top(crec: np.ndarray, left: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """``ctop`` (blocks x (2 ** TOP_LEVELS - 1) x BLOCK, flat)."""
    rows, nodes = [], [roots]
    for _ in range(TOP_LEVELS):
        rows += [crec[n] for n in nodes]
        lft = [left[n] for n in nodes]
        step = [(left[n] != n).astype(np.int64) for n in nodes]
        nodes = lft + [c + s for c, s in zip(lft, step)]
    return np.ascontiguousarray(np.stack(rows, axis=1), dtype=np.int64).reshape(-1)
