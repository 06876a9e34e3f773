"""LLVM IR of ``lanes``: one row through a forest plan with trees in the lanes of vectors.

``lanes(X, S, T, i, n)`` evaluates row ``i`` from its state in ``S`` exactly as ``run`` does for
a work list of that one row (same raw scores bit for bit, splits visited, tested features,
position and exit side). Each block of ``lanes.BLOCK`` positions (``lanes.GROUPS`` vectors of
``lanes.LANES``, independent gathers in flight together) descends its trees together: at each
level every lane gathers its node's record (``lanes.lane_tables``: left child, feature, flags,
and the threshold or category set), the row's value of the node's feature, decides the split
without a branch (the rule of ``thrifty.forest.kernels.next_node``: NaN's side, LightGBM's
``Zero`` missing type, category sets), and steps to its left child plus the decision. The
first ``lanes.TOP_LEVELS`` levels need no gather of records: each lane's few candidate nodes
there are known when the tables are built (``lanes.top_rows``), so their records are plain
vector loads, chosen among by the lane's decisions above. A leaf stays where it is; the block
stops when no lane moved, or after as many levels as its deepest tree has. Each lane then
stores its leaf's record offset, and the leaves' records are added to the row's state position
by position, in the plan's order (so sums round as the interpreter's do), and the plan's exits
tested after each position (``lanes.CHUNK_EXITS`` positions are descended before their leaves
are added, when the plan has exits).

``slanes`` (``scores``) is the same on rank records for plans without exits, adding each leaf's
values alone (``cval``) and no splits nor tested features.

Work per call is a few gathers per level of each block of trees: the only branches that depend
on the row's values are one per level (whether any lane moved) and one per exit test, so a new
row each call costs few mispredictions, where branchy code pays about one every other split.
"""

from __future__ import annotations

import re

import numpy as np

from thrifty.forest.kernels import ZERO
from thrifty.runtime.compiled.ir_lranks import TOP_WORDS, descend, rank_prologue
from thrifty.runtime.compiled.ir_lranks import gather as _gather
from thrifty.runtime.compiled.lanes import (
    BLOCK,
    CAT_WORDS,
    CATEGORICAL,
    DEFAULT_RIGHT,
    FEATURE_SHIFT,
    FLAG_SHIFT,
    GROUPS,
    LANES,
    LEAF,
    NAN_RIGHT,
    TOP_LEVELS,
    TOP_ROWS,
    ZERO_MISSING,
    chunk_of,
    leaf_stride,
)
from thrifty.runtime.compiled.layout import TABLES, Layout, double, formed_ir, state_fields, word_field
from thrifty.runtime.compiled.lranks import RANK_TABLES, Slots

_V = f"<{LANES} x double>"
_I = f"<{LANES} x i64>"
_B = f"<{LANES} x i1>"
_P = f"<{LANES} x ptr>"
_NINF = "0xFFF0000000000000"
_EVERY = "splat (i1 true)"

INTRINSICS = f"""
declare {_V} @llvm.masked.gather.v{LANES}f64.v{LANES}p0({_P}, i32 immarg, {_B}, {_V})
declare {_I} @llvm.masked.gather.v{LANES}i64.v{LANES}p0({_P}, i32 immarg, {_B}, {_I})
declare <{LANES} x i32> @llvm.masked.gather.v{LANES}i32.v{LANES}p0({_P}, i32 immarg, {_B}, <{LANES} x i32>)
declare {_V} @llvm.fabs.v{LANES}f64({_V})
"""


# Forests of at most this many features, on AVX-512, take a row's values from two vector
# registers by a permute (``vpermi2pd``: one instruction, the feature's low four bits choose
# among sixteen values) rather than a gather from memory (eight loads): ``lanes_ir``'s
# ``permute``.
PERMUTE_FEATURES = 16
_PERMUTE = "@llvm.x86.avx512.vpermi2var.pd.512"


def _splat(ty: str, value: str) -> str:
    return f"splat ({ty} {value})"


def lanes_ir(
    lay: Layout,
    key: str,
    permute: bool = False,
    compact: bool = False,
    declare: bool = True,
    scores: bool = False,
) -> str:
    """``lanes_{key}(X, S, T, i, n)``: row ``i`` of the ``n`` rows of ``X`` run through the plan
    from its state in ``S`` (``layout.state_fields``), as ``run`` runs it. Plans with bin exits
    are not served (``ir_serving`` runs them with ``run``). ``permute`` (AVX-512 targets only,
    forests of at most ``PERMUTE_FEATURES`` features): the row's values are held in two vectors
    and each lane's value taken from them by a permute instead of gathered. ``compact``:
    ``clanes_{key}``, the same on compact rank records (``ir_lranks``; no permute).
    ``declare``: with the intrinsics' declarations (once per module). ``scores`` (plans
    without exits, with ``compact``): ``slanes_{key}``, the raw scores alone, each leaf's
    values read from ``cval`` (``lranks.rank_tables``); the state's other fields are left as
    they were (``ServingPath``'s one row computes them only when read)."""
    K, W, F = lay.K, lay.words, lay.F
    # A leaf record's words in ``lleaf`` (padded: a record never straddles two cache lines).
    R = leaf_stride(K + 1 + W)
    if scores:
        if not compact or bool(lay.exits.any()):
            raise ValueError("scores-only lanes are for compact records of plans without exits")
        R = K
    f = lay.forest
    P = len(lay.order)
    chunk = chunk_of(lay.exits)
    t = {name: j for j, name in enumerate(TABLES)}
    off = {name: K + j for j, name in enumerate(state_fields(W))}
    cats = (f.feature >= 0) & (f.cat_start >= 0)
    any_cat = bool(cats.any())
    cat_words = bool((f.cat_size[cats] > 2).any())
    any_zero = bool(((f.missing_type == 2) & (f.feature >= 0) & (f.cat_start < 0)).any())
    exits = bool(lay.exits.any())

    name = "slanes" if scores else "clanes" if compact else "lanes"
    L: list[str] = [
        f"define void @{name}_{key}(ptr noalias %X, ptr noalias %S, ptr noalias %T, i64 %i, i64 %n) {{",
        "entry:",
    ]
    tables: tuple[str, ...] = (
        "leaf",
        "eps_pos",
        "eps_neg",
        "lrec",
        "lblock",
        "lslot",
        "lclass",
        "cat_bits",
        "ltop",
    )
    if compact:
        permute = False
        tables += RANK_TABLES
    for name in tables:
        # The leaf records in the lanes' numbering (``lanes.lane_tables``' ``lleaf``).
        at = t["cval" if scores else "lleaf"] if name == "leaf" else t[name]
        L += [f"  %{name}a = getelementptr ptr, ptr %T, i64 {at}", f"  %{name} = load ptr, ptr %{name}a"]
    L += [
        f"  %xo = mul i64 %i, {F}",
        "  %row = getelementptr double, ptr %X, i64 %xo",
        f"  %ids = alloca [{chunk} x i64], align 64",
    ]
    if permute:
        if F > PERMUTE_FEATURES:
            raise ValueError(f"a permute takes at most {PERMUTE_FEATURES} features, not {F}")
        # The row's values in two vectors (features 0-7, 8-15; zeros past the last), read once.
        for half in (0, 1):
            prev = "zeroinitializer"
            for j in range(LANES):
                m = LANES * half + j
                if m >= F:
                    continue
                L += [
                    f"  %xe{m}p = getelementptr double, ptr %row, i64 {m}",
                    f"  %xe{m} = load double, ptr %xe{m}p",
                    f"  %xv{m} = insertelement {_V} {prev}, double %xe{m}, i64 {j}",
                ]
                prev = f"%xv{m}"
            L.append(f"  %x{half} = fadd {_V} {prev}, {_splat('double', '-0.0')}")
    # The row's state, kept in allocas that LLVM promotes to registers.
    for c in range(K):
        L += [
            f"  %rawo{c} = mul i64 %n, {c}",
            f"  %rawk{c} = add i64 %rawo{c}, %i",
            f"  %rawp{c} = getelementptr double, ptr %S, i64 %rawk{c}",
            f"  %raw0{c} = load double, ptr %rawp{c}",
            f"  %acc{c} = alloca double",
            f"  store double %raw0{c}, ptr %acc{c}",
        ]
    for name in () if scores else ("nodes", *(word_field("bits", w) for w in range(W))):
        L += [
            f"  %{name}o = mul i64 %n, {off[name]}",
            f"  %{name}k = add i64 %{name}o, %i",
            f"  %{name}p = getelementptr i64, ptr %S, i64 %{name}k",
            f"  %{name}0 = load i64, ptr %{name}p",
            f"  %{name}A = alloca i64",
            f"  store i64 %{name}0, ptr %{name}A",
        ]
    for name in ("pos", "dir"):
        L += [
            f"  %{name}o = mul i64 %n, {off[name]}",
            f"  %{name}k = add i64 %{name}o, %i",
            f"  %{name}p = getelementptr i64, ptr %S, i64 %{name}k",
        ]
    came = "entry"
    if compact:
        prologue, came = rank_prologue(Slots(f), came)
        L += prologue
    L += [
        "  br label %chunk",
        "chunk:",
        f"  %c = phi i64 [0, %{came}], [%c1, %cnext]",
        f"  %c0 = mul i64 %c, {chunk}",
        f"  %cmore = icmp slt i64 %c0, {P}",
        "  br i1 %cmore, label %cbody, label %done",
        "cbody:",
        f"  %rest = sub i64 {P}, %c0",
        f"  %few = icmp slt i64 %rest, {chunk}",
        f"  %len = select i1 %few, i64 %rest, i64 {chunk}",
        f"  %lenb = add i64 %len, {BLOCK - 1}",
        f"  %nb = udiv i64 %lenb, {BLOCK}",
        f"  %bfirst = mul i64 %c, {chunk // BLOCK}",
        "  br label %block",
        "block:",
        "  %b = phi i64 [0, %cbody], [%b1, %leaves]",
        "  %bmore = icmp slt i64 %b, %nb",
        "  br i1 %bmore, label %bbody, label %pos",
        "bbody:",
        "  %blk = add i64 %bfirst, %b",
        f"  %br = mul i64 %blk, {1 + BLOCK}",
        "  %bdp = getelementptr i64, ptr %lblock, i64 %br",
        "  %levels = load i64, ptr %bdp",
    ]
    # The first levels read the block's records with plain loads (``_top``).
    top_rows, top_table = (TOP_WORDS, "ctop") if compact else (TOP_ROWS, "ltop")
    L += [
        f"  %topo = mul i64 %blk, {top_rows * BLOCK}",
        f"  %top = getelementptr i64, ptr %{top_table}, i64 %topo",
    ]
    for level in range(TOP_LEVELS):
        for k in range(GROUPS):
            if compact:
                L += descend(k, top=level)
            else:
                L += _descend(k, any_zero, any_cat, cat_words, top=level, permute=permute)
    last = TOP_LEVELS - 1
    L += [
        "  br label %level",
        "level:",
        f"  %d = phi i64 [{TOP_LEVELS}, %bbody], [%d1, %lbody]",
        *(f"  %node_{k} = phi {_I} [%next_t{last}{k}, %bbody], [%next_{k}, %lbody]" for k in range(GROUPS)),
        "  %lmore = icmp slt i64 %d, %levels",
        "  br i1 %lmore, label %lbody, label %leaves",
        "lbody:",
    ]
    for k in range(GROUPS):
        L += descend(k) if compact else _descend(k, any_zero, any_cat, cat_words, permute=permute)
    # No lane moved: every tree of the block is at its leaf for this row.
    moved = []
    for k in range(GROUPS):
        L += [
            f"  %mv{k} = icmp ne {_I} %next_{k}, %node_{k}",
            f"  %mb{k} = bitcast {_B} %mv{k} to i{LANES}",
        ]
        moved.append(f"%mb{k}")
    acc_m = moved[0]
    for k in range(1, GROUPS):
        L.append(f"  %mo{k} = or i{LANES} {acc_m}, {moved[k]}")
        acc_m = f"%mo{k}"
    L += [
        f"  %still = icmp ne i{LANES} {acc_m}, 0",
        "  %d1 = add i64 %d, 1",
        "  br i1 %still, label %level, label %leaves",
        "leaves:",
        f"  %bo = mul i64 %b, {BLOCK}",
    ]
    for k in range(GROUPS):
        L += _leaf_lanes(k, R)
    L += [
        "  %b1 = add i64 %b, 1",
        "  br label %block",
        "pos:",
        "  %j = phi i64 [0, %block], [%j1, %pnext]",
        "  %jmore = icmp slt i64 %j, %len",
        "  br i1 %jmore, label %pbody, label %cnext",
        "pbody:",
        "  %p = add i64 %c0, %j",
        "  %slp = getelementptr i64, ptr %lslot, i64 %p",
        "  %slot = load i64, ptr %slp",
        "  %idp = getelementptr i64, ptr %ids, i64 %slot",
        "  %id = load i64, ptr %idp",
    ]
    L += _add_leaf(K, W, lay.acc32, exits, lay.finish, counts=not scores)
    L += [
        "pnext:",
        "  %j1 = add i64 %j, 1",
        "  br label %pos",
        "cnext:",
        "  %c1 = add i64 %c, 1",
        "  br label %chunk",
        "done:",
    ]
    L += [*_store_state(K, W, str(P), None, counts=not scores), "  ret void"]
    if exits:
        L += [
            "exit:",
            "  %xpos = add i64 %p, 1",
            "  %xdir = select i1 %gp, i64 1, i64 -1",
            *_store_state(K, W, "%xpos", "%xdir", "x"),
            "  ret void",
        ]
    L.append("}")
    head = (INTRINSICS if declare else "") + (
        f"declare {_V} {_PERMUTE}({_V}, {_I}, {_V})\n" if permute else ""
    )
    return head + "\n".join(L) + "\n"


def _add_leaf(K: int, W: int, acc32: bool, exits: bool, finish: np.ndarray, counts: bool = True) -> list[str]:
    """Position ``%p``'s leaf (record offset ``%id``, stored by ``_leaf_lanes``) added to the
    row's scores, and (``counts``) its splits and tested features, then the exit test."""
    L: list[str] = ["  %rec0 = add i64 %id, 0"]
    if K > 1:
        L += ["  %clsp = getelementptr i64, ptr %lclass, i64 %p", "  %cls = load i64, ptr %clsp"]
        L += ["  %vec = icmp slt i64 %cls, 0"]
    for c in range(K):
        L += [f"  %a{c} = load double, ptr %acc{c}"]
        at = "%rec0"
        if K > 1 and c:
            # A vector leaf adds value c to output c; a class tree its first value to its class.
            L += [f"  %col{c} = select i1 %vec, i64 {c}, i64 0", f"  %at{c} = add i64 %rec0, %col{c}"]
            at = f"%at{c}"
        L += [
            f"  %wp{c} = getelementptr double, ptr %leaf, i64 {at}",
            f"  %w{c} = load double, ptr %wp{c}",
            f"  %s{c} = fadd double %a{c}, %w{c}",
        ]
        s = f"%s{c}"
        if acc32:
            # XGBoost sums in float32 (the table holds float32(weight * value)).
            L += [f"  %s{c}f = fptrunc double %s{c} to float", f"  %s{c}d = fpext float %s{c}f to double"]
            s = f"%s{c}d"
        if K > 1:
            L += [
                f"  %mine{c} = icmp eq i64 %cls, {c}",
                f"  %take{c} = or i1 %mine{c}, %vec",
                f"  %n{c} = select i1 %take{c}, double {s}, double %a{c}",
            ]
            s = f"%n{c}"
        L += [f"  store double {s}, ptr %acc{c}"]
    if not counts:
        return L + (_exit_test(K, finish) if exits else ["  br label %pnext"])
    L += [
        f"  %dj = add i64 %rec0, {K}",
        "  %djp = getelementptr i64, ptr %leaf, i64 %dj",
        "  %dv = load i64, ptr %djp",
        "  %nd = load i64, ptr %nodesA",
        "  %nd1 = add i64 %nd, %dv",
        "  store i64 %nd1, ptr %nodesA",
    ]
    for w in range(W):
        name = word_field("bits", w)
        L += [
            f"  %bj{w} = add i64 %rec0, {K + 1 + w}",
            f"  %bjp{w} = getelementptr i64, ptr %leaf, i64 %bj{w}",
            f"  %bv{w} = load i64, ptr %bjp{w}",
            f"  %bo{w} = load i64, ptr %{name}A",
            f"  %bn{w} = or i64 %bo{w}, %bv{w}",
            f"  store i64 %bn{w}, ptr %{name}A",
        ]
    return L + (_exit_test(K, finish) if exits else ["  br label %pnext"])


def _leaf_lanes(k: int, R: int) -> list[str]:
    """At the end of a block's descent: each lane of vector ``k`` stores its leaf's record
    offset in ``lleaf`` (the leaf records in the lanes' own numbering: its node times ``R``,
    ``lanes.leaf_stride``) in ``%ids``, so that adding a position's leaf reads no node record
    (lanes of the spare leaf, past a chunk's end, are never read). Before, each lane gathered
    its leaf's index in the forest from the leaf's node record: one more cache line per tree;
    without it, 0.86 to 1.01 of the call's time on Adult's 500 trees in six paired runs on a
    loaded machine, median 0.89."""
    L = [
        f"  %io = add i64 %bo, {LANES * k}",
        f"  %rec = mul {_I} %node_{k}, {_splat('i64', str(R))}",
        "  %ip = getelementptr i64, ptr %ids, i64 %io",
        f"  store {_I} %rec, ptr %ip, align 8",
    ]
    shared = {"ids", "bo", f"node_{k}"}
    return [re.sub(r"%(\w+)", lambda m: m[0] if m[1] in shared else f"{m[0]}_l{k}", line) for line in L]


def _top(k: int, level: int) -> list[str]:
    """Vector ``k``'s records at a ``level`` below ``lanes.TOP_LEVELS`` from the block's
    ``ltop`` rows at ``%top`` (``lanes.top_rows``): plain loads of each lane's ``2 ** level``
    candidates, chosen by its steps at the levels above (``%rl_t{i}{k}``), where a gather
    would wait for the previous level's node."""
    first = 2 * (2**level - 1)
    cands = []
    for q in range(2**level):
        rec, thr = f"%rec{q}", f"%thr{q}"
        cands.append((rec, thr))
    L = []
    for q, (rec, thr) in enumerate(cands):
        for w, (name, ty) in enumerate(((rec, _I), (thr, _V))):
            L += [
                f"  {name}p = getelementptr i64, ptr %top, i64 {(first + 2 * q + w) * BLOCK + LANES * k}",
                f"  {name} = load {ty}, ptr {name}p, align 8",
            ]
    # Candidates side by side differ in the lowest decision left: choose by it, level by level.
    for i in range(level):
        nxt = []
        for m in range(len(cands) // 2):
            (r0, t0), (r1, t1) = cands[2 * m], cands[2 * m + 1]
            rec, thr = f"%rec_{i}_{m}", f"%thr_{i}_{m}"
            L += [
                f"  {rec} = select {_B} %rl_t{i}{k}, {_I} {r1}, {_I} {r0}",
                f"  {thr} = select {_B} %rl_t{i}{k}, {_V} {t1}, {_V} {t0}",
            ]
            nxt.append((rec, thr))
        cands = nxt
    ((rec, thr),) = cands
    # Copies under the names the level's rule reads (x + -0.0 is x for every x; LLVM folds both).
    return L + [
        f"  %rec = or {_I} {rec}, zeroinitializer",
        f"  %thr = fadd {_V} {thr}, {_splat('double', '-0.0')}",
    ]


def _descend(
    k: int, any_zero: bool, any_cat: bool, cat_words: bool, top: int | None = None, permute: bool = False
) -> list[str]:
    """One level of vector ``k``'s trees: each lane from ``%node{k}`` to ``%next{k}`` (at the
    block's level ``top`` below ``lanes.TOP_LEVELS``, its records from ``_top``, names suffixed
    ``_t{top}{k}``)."""
    every = _EVERY
    L: list[str] = []
    if top is None:
        # A node's record: two words, its split then its threshold.
        L.append(f"  %twice = shl {_I} %node, {_splat('i64', '1')}")
        L.append(f"  %second = or {_I} %twice, {_splat('i64', '1')}")
        L += _gather("i64", "%lrec", "%twice", "%rec", every)
        L += _gather("double", "%lrec", "%second", "%thr", every)
    else:
        L += _top(k, top)
    L += [
        f"  %fs = lshr {_I} %rec, {_splat('i64', str(FEATURE_SHIFT))}",
        f"  %feat = and {_I} %fs, {_splat('i64', str((1 << (FLAG_SHIFT - FEATURE_SHIFT)) - 1))}",
        f"  %fl = lshr {_I} %rec, {_splat('i64', str(FLAG_SHIFT))}",
        f"  %left = and {_I} %rec, {_splat('i64', str((1 << 32) - 1))}",
    ]
    if permute:
        # Bits 0-2 of a lane's feature choose among a vector's values, bit 3 the vector.
        L.append(f"  %v = call {_V} {_PERMUTE}({_V} %x0, {_I} %feat, {_V} %x1)")
    else:
        L += _gather("double", "%row", "%feat", "%v", every)
    L += [
        f"  %nan = fcmp uno {_V} %v, zeroinitializer",
        # Unordered: a NaN threshold sends every number right (no value is <= NaN).
        f"  %gt = fcmp ugt {_V} %v, %thr",
        f"  %nrb = and {_I} %fl, {_splat('i64', str(NAN_RIGHT))}",
        f"  %nr = icmp ne {_I} %nrb, zeroinitializer",
        f"  %r0 = select {_B} %nan, {_B} %nr, {_B} %gt",
    ]
    r = "%r0"
    if any_zero:
        L += [
            f"  %zb = and {_I} %fl, {_splat('i64', str(ZERO_MISSING))}",
            f"  %zf = icmp ne {_I} %zb, zeroinitializer",
            f"  %av = call {_V} @llvm.fabs.v{LANES}f64({_V} %v)",
            # Unordered: NaN counts as zero too.
            f"  %z = fcmp ule {_V} %av, {_splat('double', double(ZERO))}",
            f"  %zz = and {_B} %zf, %z",
            f"  %drb = and {_I} %fl, {_splat('i64', str(DEFAULT_RIGHT))}",
            f"  %dr = icmp ne {_I} %drb, zeroinitializer",
            f"  %r1 = select {_B} %zz, {_B} %dr, {_B} {r}",
        ]
        r = "%r1"
    if any_cat:
        L += [
            f"  %cb = and {_I} %fl, {_splat('i64', str(CATEGORICAL))}",
            f"  %ic = icmp ne {_I} %cb, zeroinitializer",
            f"  %nn = xor {_B} %nan, {every}",
            f"  %c1 = and {_B} %ic, %nn",
            f"  %tb = bitcast {_V} %thr to {_I}",
            f"  %ab = fcmp ogt {_V} %v, {_splat('double', double(-1.0))}",
        ]
        # A set of up to 64 codes is the record's second word (codes 32-63 of a one-word set
        # are not in it, as the interpreter finds them past the set's range); a larger one is
        # read from ``cat_bits``.
        lim = _splat("double", double(64.0))
        if cat_words:
            L += [
                f"  %twb = and {_I} %fl, {_splat('i64', str(CAT_WORDS))}",
                f"  %tw = icmp ne {_I} %twb, zeroinitializer",
                f"  %size = lshr {_I} %tb, {_splat('i64', '32')}",
                f"  %sized = sitofp {_I} %size to {_V}",
                f"  %limw = fmul {_V} %sized, {_splat('double', double(32.0))}",
                f"  %lim = select {_B} %tw, {_V} %limw, {_V} {lim}",
            ]
            lim = "%lim"
        L += [
            f"  %be = fcmp olt {_V} %v, {lim}",
            f"  %in0 = and {_B} %ab, %be",
            f"  %in = and {_B} %in0, %c1",
            # fptosi truncates toward zero, as the interpreter's int() does; lanes outside
            # the set's range convert 0.0 and read no word.
            f"  %safe = select {_B} %in, {_V} %v, {_V} zeroinitializer",
            f"  %code = fptosi {_V} %safe to {_I}",
            f"  %c63 = and {_I} %code, {_splat('i64', '63')}",
            f"  %bw = lshr {_I} %tb, %c63",
        ]
        bw = "%bw"
        if cat_words:
            L += [
                f"  %start = and {_I} %tb, {_splat('i64', str((1 << 32) - 1))}",
                f"  %wo = lshr {_I} %code, {_splat('i64', '5')}",
                f"  %wi = add {_I} %start, %wo",
                f"  %inw = and {_B} %in, %tw",
            ]
            L += _gather("i32", "%cat_bits", "%wi", "%word", "%inw")
            L += [
                f"  %wz = zext <{LANES} x i32> %word to {_I}",
                f"  %sh = and {_I} %code, {_splat('i64', '31')}",
                f"  %bww = lshr {_I} %wz, %sh",
                f"  %bwa = select {_B} %tw, {_I} %bww, {_I} %bw",
            ]
            bw = "%bwa"
        L += [
            f"  %bit = trunc {_I} {bw} to {_B}",
            f"  %mem = and {_B} %in, %bit",
            f"  %catr = xor {_B} %mem, {every}",
            f"  %r2 = select {_B} %c1, {_B} %catr, {_B} {r}",
        ]
        r = "%r2"
    # A leaf stays: every value sends it to its left child, itself.
    L += [
        f"  %lfb = and {_I} %fl, {_splat('i64', str(LEAF))}",
        f"  %moves = icmp eq {_I} %lfb, zeroinitializer",
        f"  %rl = and {_B} {r}, %moves",
    ]
    r = "%rl"
    L += [
        f"  %step = zext {_B} {r} to {_I}",
        f"  %next = add {_I} %left, %step",
    ]
    # Every name this level defines gets the vector's suffix.
    shared = {"lrec", "row", "cat_bits", "top", "x0", "x1", *(f"rl_t{i}{k}" for i in range(TOP_LEVELS))}
    suffix = str(k) if top is None else f"t{top}{k}"
    return [re.sub(r"%(\w+)", lambda m: m[0] if m[1] in shared else f"{m[0]}_{suffix}", line) for line in L]


def _exit_test(K: int, finish: np.ndarray) -> list[str]:
    """After position ``%p``: the score (or, for several outputs, the leading score's margin
    over the runner-up, ``interpret.kernels._exit_score``) against the position's thresholds
    (infinite where it has no exit); the scores formed from the sums when ``finish``
    (``Schedule.finish``) is not empty."""
    out = [f"  %m{c} = load double, ptr %acc{c}" for c in range(K)]
    code, scores = formed_ir(finish, [f"%m{c}" for c in range(K)], "double", "g")
    out += code
    if K == 1:
        g = scores[0]
    else:
        top = second = _NINF
        for c, m in enumerate(scores):
            out += [
                f"  %gt{c} = fcmp ogt double {m}, {top}",
                f"  %gs{c} = fcmp ogt double {m}, {second}",
                f"  %s2{c} = select i1 %gs{c}, double {m}, double {second}",
                f"  %sc{c} = select i1 %gt{c}, double {top}, double %s2{c}",
                f"  %tc{c} = select i1 %gt{c}, double {m}, double {top}",
            ]
            top, second = f"%tc{c}", f"%sc{c}"
        out.append(f"  %ge = fsub double {top}, {second}")
        g = "%ge"
    return out + [
        "  %epp = getelementptr double, ptr %eps_pos, i64 %p",
        "  %ep = load double, ptr %epp",
        "  %enp = getelementptr double, ptr %eps_neg, i64 %p",
        "  %en = load double, ptr %enp",
        f"  %gp = fcmp ogt double {g}, %ep",
        f"  %gn = fcmp olt double {g}, %en",
        "  %gx = or i1 %gp, %gn",
        "  br i1 %gx, label %exit, label %pnext",
    ]


def _store_state(
    K: int, W: int, pos: str, direction: str | None, x: str = "", counts: bool = True
) -> list[str]:
    """Store the row's scores, and (``counts``) splits, tested features and position (and exit
    side)."""
    out = []
    for c in range(K):
        out += [f"  %{x}fa{c} = load double, ptr %acc{c}", f"  store double %{x}fa{c}, ptr %rawp{c}"]
    if not counts:
        return out
    for name in ("nodes", *(word_field("bits", w) for w in range(W))):
        out += [f"  %{x}f{name} = load i64, ptr %{name}A", f"  store i64 %{x}f{name}, ptr %{name}p"]
    out.append(f"  store i64 {pos}, ptr %posp")
    if direction is not None:
        out.append(f"  store i64 {direction}, ptr %dirp")
    return out
