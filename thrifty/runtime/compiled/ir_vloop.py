"""Scores-only vector blocks whose trees are data, not code: loops over split records
(``ir_vraw`` takes them by ``use_loops`` where ``supported``).

``ir_vraw``'s blocks are straight-line code: a 64-tree block of 255-leaf trees is about 560 KB
of instructions run once per vector of 32 rows, fetched from the second-level cache each time,
with a 194 KB stack frame (docs/runtime.md, "Where a scores-only block's time goes"). Here
the same leaf masks are built by three small loops over tables that are constants of the
module:

1. each rankable feature's 16-bit rank (``ir_ranks.rank_ir``), stored twice to a buffer: as is
   and with its sign bit flipped, so that every split's test is one unsigned compare
   (``r >s j`` is ``r ^ 0x8000 >u j ^ 0x8000``);
2. each distinct compare of the block (rank slot, threshold rank: RapidScorer's merged
   thresholds) once per vector of rows, its 32 lanes' outcomes stored as a 32-bit word;
3. per tree, a loop of rounds, each updating every mask word of the tree (held in registers)
   with one record: a compare's outcome word and a constant of the leaves kept, which clear a
   split's left-subtree leaves in the lanes going right (``ir_vector._leaf_mask``'s bits: an
   AND with the constant, then a 16-bit masked move). A record is two 16-bit byte offsets
   loaded apart, the rounds walking the records by a pointer (no scalar arithmetic per
   record), and the constant a 32-bit broadcast. The rounds come in tiers (``TIERS``), over
   all the words, then the first 15, 14, ..., 1 (a split clears its left subtree, so the left
   words have the most records: on higgs_small's 500 trees 363 records a tree in rounds of all
   16 words, 306 in tiers of 16, 8 and 4 words, 276 in these, for 250 splits' records). A
   word with no record left in a round takes one that keeps every leaf; the words past a
   tree's last are emptied by its first round (a one-leaf tree has no other record). Then the
   exit leaf (``ir_narrow.exit_leaf_narrow``) and its value added, trees in the plan's order.
   (A first version kept the words in a buffer, updated by a flat loop over the records: 1.5
   times the straight blocks' time on 16 trees.)

So the leaves and the sums are ``ir_vraw``'s bit for bit, from code of a few hundred
instructions whatever the block's size. Only 16-bit rank blocks of one output whose splits all
compare ranks (``supported``).
"""

from __future__ import annotations

import numpy as np

from thrifty.forest.kernels import MISSING_AS_ZERO
from thrifty.runtime.compiled.ir_narrow import exit_leaf_narrow
from thrifty.runtime.compiled.ir_ranks import block_thresholds, rank_ir, rankable
from thrifty.runtime.compiled.ir_vector import _Emitter, _ranges, _splat
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.targets import env_choice
from thrifty.runtime.compiled.vblocks import raw_trees

# The bits of a rank and of a mask word: loop blocks are AVX-512's 16-bit rank blocks (32 rows).
BITS = 16
LANES = 32
# Environment variable forcing loop blocks on ("on": wherever ``supported``), off ("off") or
# the rule ("auto", ``use_loops``).
LOOP_ENV = "THRIFTY_VLOOP"
LOOP_KINDS = ("auto", "on", "off")
# Leaves per tree on average above which the rule takes loop blocks: measured on higgs_small's
# 255-leaf trees only (docs/runtime.md, "Where a scores-only block's time goes").
LOOP_LEAVES = 128
# ... and for plans of at least this many positions: a loop block shares compares between its
# trees, and 16 of higgs_small's trees took 1.26 to 1.53 of the straight blocks' time (64: 0.79
# to 0.99).
LOOP_MIN_TREES = 64
# Positions per loop block unless ``THRIFTY_RAW_TREES`` sets them (``loop_blocks``): its code
# does not grow with the block, and longer blocks share more compares (higgs_small: 78 distinct
# compares per tree in blocks of 64, 44 in blocks of 128, 24 in blocks of 250). Measured on
# higgs_small's 500 trees (paired, loaded): 0.71 of the straight blocks' time in blocks of 128,
# 0.79 in blocks of 64; before the tiers of rounds, blocks of 250 and 500 measured no better
# than blocks of 128. With the cheaper rounds (every tier size, records loaded by a pointer),
# blocks of 256 took 0.946 [0.89, 0.99] of blocks of 128 and one block of 500 0.991
# (docs/runtime.md, "Loop blocks").
LOOP_TREES = 256
# Distinct compares per block a record can name (its byte offset is 16 bits).
MAX_COMPARES = 1 << 14
# Bytes per constant of leaves kept: a 16-bit word twice, broadcast to the vector as it is
# loaded (``vpbroadcastd`` from memory, a load with no ALU work: a 548-byte table for
# higgs_small's 137 constants, not 8.7 KB of vectors; 0.93 of the time paired).
KEEP_BYTES = 4
# The tiers of rounds, as sixteenths of a block's mask words: rounds over the first
# ``ceil(words * t / 16)`` words, largest first (``_tiers``). Every size, as each tier costs a
# loop of a few instructions and a branch: on higgs_small, paired, tiers of 16, 14, ..., 2 words
# took 0.95 of the time of tiers of 16, 8 and 4, and every size 0.93 (docs/runtime.md).
TIERS = tuple(range(16, 0, -1))


def _tiers(words: int) -> list[int]:
    """The words each tier's rounds update (the first ``size``), largest first."""
    return sorted({max(1, -(-words * t // 16)) for t in TIERS} | {words}, reverse=True)


def use_loops(lay: Layout) -> bool:
    """Whether the scores-only entry's 16-bit rank blocks (AVX-512, ternlog masks) are loop
    blocks where ``supported``: ``THRIFTY_VLOOP`` forces either way; the rule is trees of more
    than ``LOOP_LEAVES`` leaves on average in plans of at least ``LOOP_MIN_TREES`` positions."""
    kind = env_choice(LOOP_ENV, LOOP_KINDS, "a choice")
    if kind != "auto":
        return kind == "on"
    order = np.asarray(lay.order, dtype=np.int64)
    if len(order) < max(1, LOOP_MIN_TREES):
        return False
    return float(np.mean(np.diff(lay.leaf_ptr)[order])) > LOOP_LEAVES


def loop_blocks(lay: Layout) -> list[tuple[int, int]]:
    """The loop blocks ``(start, length)``: ``THRIFTY_RAW_TREES`` positions each when set
    (``vblocks.raw_trees``), else ``LOOP_TREES``."""
    size, n = raw_trees() or LOOP_TREES, len(lay.exits)
    return [(p, min(size, n - p)) for p in range(0, n, size)]


def supported(lay: Layout, p0: int, k: int) -> bool:
    """Whether the block of positions ``[p0, p0 + k)`` can be a loop block: one output (an
    oblivious tree takes a leaf mask here, its leaves in ``vleaf`` as any tree's), at least
    one split and every split on a feature whose splits compare ranks, and at most
    ``MAX_COMPARES`` distinct compares."""
    f = lay.forest
    if lay.K != 1 or k < 1:
        return False
    ok = rankable(f)
    splits = 0
    for t in lay.order[p0 : p0 + k].tolist():
        nodes = f._tree_nodes(int(t))
        feats = f.feature[nodes]
        splits += int(np.sum(feats >= 0))
        if not np.all(ok[feats[feats >= 0]]):
            return False
    # The distinct compares (with the padding's) must fit the records' offsets.
    return splits > 0 and len(loop_tables(lay, p0, k)["compares"]) <= MAX_COMPARES


def _compare(f, node: int, slot: int, thresholds: np.ndarray) -> tuple[int, int]:
    """The split ``node``'s test as (rank buffer index, biased threshold): the lanes whose
    buffer entry is above the threshold (unsigned) go right, as ``ir_ranks.goes_right_rank``."""
    thr = float(f.threshold[node])
    mt = int(f.missing_type[node])
    if np.isnan(thr):
        # Numbers right; NaN right (every rank > -32768) or left (ranks > -1), both signed.
        j = -32768 if (mt == MISSING_AS_ZERO or not bool(f.missing_left[node])) else -1
        return 2 * slot + 1, (j ^ 0x8000) & 0xFFFF
    nan_left = (0.0 <= thr) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
    j = int(np.searchsorted(thresholds, thr))
    # Signed (NaN's -1 below every j) on the flipped copy, unsigned on the rank itself.
    return (2 * slot + 1, j ^ 0x8000) if nan_left else (2 * slot, j)


def loop_tables(lay: Layout, p0: int, k: int) -> dict:
    """The block's records: ``slots`` (features ranked, in buffer order, with their
    thresholds), ``compares`` (rank buffer index << 16 | biased threshold), ``kept`` (the
    distinct 16-bit words of leaves a record keeps), ``records`` (``words`` a round, one per
    mask word: the byte offsets of the compare's outcome word, low half, and of the leaves
    kept, high half), ``tiers`` (the words each tier's rounds update: the first ``size``),
    ``starts`` (per tree, its first record and each tier's rounds), ``leaf`` (each tree's
    first leaf) and ``words`` (mask words per tree, the block's largest)."""
    f = lay.forest
    trees = [int(t) for t in lay.order[p0 : p0 + k].tolist()]
    thresholds = block_thresholds(lay, p0, k)
    # Every feature split on has a slot; one split only at NaN has no thresholds (rank 0 or -1).
    nodes = np.concatenate([f._tree_nodes(t) for t in trees])
    for feat in np.unique(f.feature[nodes][f.feature[nodes] >= 0]).tolist():
        thresholds.setdefault(int(feat), np.zeros(0))
    slots = sorted(thresholds)
    slot_of = {feat: s for s, feat in enumerate(slots)}
    compares: dict[tuple[int, int], int] = {}
    kept: dict[int, int] = {}
    leaves = [int(lay.leaf_ptr[t + 1] - lay.leaf_ptr[t]) for t in trees]
    words = max(-(-n // BITS) for n in leaves) if trees else 1
    records: list[int] = []
    starts: list[int] = []
    tiers = _tiers(words)
    for t, n in zip(trees, leaves, strict=True):
        ranges: list[tuple[int, int, int]] = []
        _ranges(f, int(f.roots[t]), 0, ranges)
        per_word: list[list[tuple[int, int]]] = [[] for _ in range(words)]
        for node, lo, mid in ranges:
            feat = int(f.feature[node])
            c = compares.setdefault(_compare(f, node, slot_of[feat], thresholds[feat]), len(compares))
            for w in range(lo // BITS, (mid - 1) // BITS + 1):
                a, b = max(lo, BITS * w) - BITS * w, min(mid, BITS * w + BITS) - BITS * w
                keep = ~(((1 << b) - 1) ^ ((1 << a) - 1)) & 0xFFFF
                per_word[w].append((c, kept.setdefault(keep, len(kept))))
        # Words past the tree's last are emptied by the compare every lane passes.
        for w in range(-(-n // BITS), words):
            per_word[w].append((compares.setdefault((1, 0), len(compares)), kept.setdefault(0, len(kept))))
        # Rounds of one record per word (the words stay in registers), in tiers over the
        # first ``size`` words (the left words have the most records: a split clears its left
        # subtree); a word with no record left in a round takes one that keeps every leaf.
        noop = (compares.setdefault((1, 0), len(compares)), kept.setdefault(0xFFFF, len(kept)))
        counts = [len(x) for x in per_word]
        rounds, done, first = [], 0, len(records)
        for i, size in enumerate(tiers):
            below = tiers[i + 1] if i + 1 < len(tiers) else 0
            # The words only this tier and those before it update set its rounds.
            r = max(0, max(counts[below:size]) - done)
            for rnd in range(done, done + r):
                for w in range(size):
                    c, q = per_word[w][rnd] if rnd < counts[w] else noop
                    # Byte offsets, in one word: of the compare's outcome (low half), of the
                    # leaves kept (high half).
                    records.append(4 * c | KEEP_BYTES * q << 16)
            rounds.append(r)
            done += r
        starts += [first, *rounds]
    assert len(kept) <= 1024 and len(compares) <= MAX_COMPARES, "a loop block's offsets must fit 16 bits"
    return {
        "slots": [(feat, thresholds[feat]) for feat in slots],
        "compares": [idx << 16 | thr for idx, thr in compares],
        "kept": list(kept),
        "records": records,
        "starts": starts,
        "tiers": tiers,
        "leaf": [int(lay.leaf_ptr[t]) for t in trees],
        "words": words,
    }


def _array(name: str, ty: str, values: list) -> str:
    body = ", ".join(f"{ty} {v}" for v in values) if values else ""
    return f"{name} = private unnamed_addr constant [{len(values)} x {ty}] [{body}], align 64"


def vloop_block_ir(lay: Layout, key: str, m: int, p0: int, k: int) -> str:
    """``rawblk_{key}_{m}(X, out, T, lo, hi, n)`` (``ir_raw``'s contract) for AVX-512's 16-bit
    rank blocks (32 rows a vector) as the module docstring's loops; the scores equal
    ``ir_vraw.vraw_block_ir``'s bit for bit."""
    from thrifty.runtime.compiled.ir_vraw import close_block, open_block

    lanes = LANES
    tab = loop_tables(lay, p0, k)
    S, NC, W = len(tab["slots"]), len(tab["compares"]), tab["words"]
    e = _Emitter(lanes)
    Q, V, B = e.I, e.V, e.B
    H = f"<{lanes} x i16>"
    R = lay.vrecord
    g = f"@lp_{key}_{m}"
    globals_ = [
        _array(f"{g}_c", "i32", tab["compares"]),
        _array(f"{g}_k", "i32", [v | v << 16 for v in tab["kept"]]),
        _array(f"{g}_r", "i32", tab["records"]),
        _array(f"{g}_s", "i32", tab["starts"]),
        _array(f"{g}_l", "i64", [R * v for v in tab["leaf"]]),
    ]
    acc, at, xo = open_block(e, lay, key, m)

    def at_(ty: str, base: str, index: str, bits: str = "i32") -> str:
        return e(f"getelementptr {ty}, ptr {base}, {bits} {index}")

    def splat(ty: str, vty: str, value: str) -> str:
        one = e(f"insertelement {vty} poison, {ty} {value}, i64 0")
        count = vty[1:].split(" x ")[0]
        return e(f"shufflevector {vty} {one}, {vty} poison, <{count} x i32> zeroinitializer")

    # The buffers, in the entry block (once per call, not per vector of rows): ranks (two per
    # slot), compare outcomes.
    rb, kb = "%rbuf", "%kbuf"
    entry = e.lines.index("entry:") + 1
    e.lines[entry:entry] = [
        f"  {rb} = alloca {H}, i32 {2 * S}, align 64",
        f"  {kb} = alloca i32, i32 {max(NC, 1)}, align 64",
    ]
    every = _splat("i1", "true")
    # 1. the ranks, as is and with the sign bit flipped.
    for s, (feat, thr) in enumerate(tab["slots"]):
        cell = e.gep("%X", "double", e(f"add {Q} {xo}, {_splat('i64', str(feat))}"))
        rank = rank_ir(e, e.gather("double", cell, every), thr, f"{g}_t{feat}", globals_, BITS)
        e.lines.append(f"  store {H} {rank}, ptr {at_(H, rb, str(2 * s))}, align 64")
        flipped = e(f"xor {H} {rank}, splat (i16 -32768)")
        e.lines.append(f"  store {H} {flipped}, ptr {at_(H, rb, str(2 * s + 1))}, align 64")
    # 2. every distinct compare of the block, its lanes' outcomes as one word.
    e.lines += ["  br label %cmp", "cmp:", "  %c = phi i32 [0, %body], [%cnext, %cmp]"]
    rec = e(f"load i32, ptr {at_('i32', f'{g}_c', '%c')}")
    rv = e(f"load {H}, ptr {at_(H, rb, e(f'lshr i32 {rec}, 16'))}, align 64")
    right = e(f"icmp ugt {H} {rv}, {splat('i16', H, e(f'trunc i32 {rec} to i16'))}")
    e.lines.append(f"  store i32 {e(f'bitcast {B} {right} to i32')}, ptr {at_('i32', kb, '%c')}")
    e.lines += [
        "  %cnext = add i32 %c, 1",
        f"  %cdone = icmp eq i32 %cnext, {NC}",
        "  br i1 %cdone, label %trees, label %cmp",
    ]
    # 3. the trees in order: their rounds of records into the mask words, then the exit leaf.
    e.lines += [
        "trees:",
        "  %tj = phi i32 [0, %cmp], [%tnext, %tend]",
        f"  %tacc = phi {V} [{acc[0]}, %cmp], [%tacc1, %tend]",
    ]
    per_tree = 1 + len(tab["tiers"])
    row = e(f"mul i32 %tj, {per_tree}")
    # The rounds walk the records by a pointer, each record two 16-bit offsets loaded apart
    # (no scalar arithmetic per record: an index and a shift per record took ports 0 and 5).
    pointer = at_("i32", f"{g}_r", e(f"load i32, ptr {at_('i32', f'{g}_s', row)}"))
    words = ["splat (i16 -1)"] * W
    here = "%trees"
    for L, size in enumerate(tab["tiers"]):
        n_rounds = e(f"load i32, ptr {at_('i32', f'{g}_s', e(f'add i32 {row}, {L + 1}'))}")
        none = e(f"icmp eq i32 {n_rounds}, 0")
        e.lines += [f"  br i1 {none}, label %s_a{L}, label %s_l{L}", f"s_l{L}:"]
        e.lines.append(f"  %s_r{L} = phi i32 [0, {here}], [%s_r{L}n, %s_l{L}]")
        e.lines.append(f"  %s_p{L} = phi ptr [{pointer}, {here}], [%s_p{L}n, %s_l{L}]")
        for w in range(size):
            e.lines.append(f"  %s_w{L}_{w} = phi {H} [{words[w]}, {here}], [%s_w{L}_{w}n, %s_l{L}]")
        for w in range(size):
            # Little-endian halves: the outcome word's byte offset, then the leaves kept's.
            half = [at_("i16", f"%s_p{L}", str(2 * w + i)) for i in (0, 1)]
            ko, co = (e(f"zext i16 {e(f'load i16, ptr {h}')} to i64") for h in half)
            outcome = at_("i8", kb, ko, "i64")
            km = e(f"bitcast i32 {e(f'load i32, ptr {outcome}')} to {B}")
            doubled = e(f"load i32, ptr {at_('i8', f'{g}_k', co, 'i64')}")
            # The AND on 32-bit lanes, as the constant is loaded.
            D = f"<{lanes // 2} x i32>"
            pairs = e(f"bitcast {H} %s_w{L}_{w} to {D}")
            broadcast = splat("i32", D, doubled)
            cleared = e(f"bitcast {D} {e(f'and {D} {pairs}, {broadcast}')} to {H}")
            e.lines.append(f"  %s_w{L}_{w}n = select {B} {km}, {H} {cleared}, {H} %s_w{L}_{w}")
        e.lines += [
            f"  %s_p{L}n = getelementptr i32, ptr %s_p{L}, i64 {size}",
            f"  %s_r{L}n = add i32 %s_r{L}, 1",
            f"  %s_d{L} = icmp eq i32 %s_r{L}n, {n_rounds}",
            f"  br i1 %s_d{L}, label %s_a{L}, label %s_l{L}",
            f"s_a{L}:",
            f"  %s_pa{L} = phi ptr [{pointer}, {here}], [%s_p{L}n, %s_l{L}]",
        ]
        for w in range(size):
            e.lines.append(f"  %s_x{L}_{w} = phi {H} [{words[w]}, {here}], [%s_w{L}_{w}n, %s_l{L}]")
            words[w] = f"%s_x{L}_{w}"
        pointer, here = f"%s_pa{L}", f"%s_a{L}"
    e.lines += ["  br label %tend", "tend:"]
    leaf = exit_leaf_narrow(e, words, False, BITS)
    start = splat("i64", Q, e(f"load i64, ptr {at_('i64', f'{g}_l', '%tj')}"))
    scaled = e(f"mul {Q} {leaf}, {_splat('i64', str(R))}")
    where = e(f"add {Q} {scaled}, {start}")
    value = e.gather("double", e.gep("%vleaf", "double", where), every)
    e.lines += [
        f"  %tacc1 = fadd {V} %tacc, {value}",
        "  %tnext = add i32 %tj, 1",
        f"  %tdone = icmp eq i32 %tnext, {k}",
        "  br i1 %tdone, label %stored, label %trees",
        "stored:",
    ]
    text = close_block(e, ["%tacc1"], at, globals_, BITS)
    # ``open_block``'s loop comes back from the block that stores the scores.
    return text.replace("[%i1, %body]", "[%i1, %stored]")
