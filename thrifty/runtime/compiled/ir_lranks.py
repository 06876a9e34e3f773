"""LLVM IR of one row through the lanes on compact rank records (``lranks``).

``ir_lanes.lanes_ir(..., compact=True)`` is ``clanes_{key}``: the lanes' function with two
changes. First (``rank_prologue``), the row's ranks are computed once per call into ``%rk``, a
32-bit integer per slot (``lranks.Slots``): for each group of ``lanes.LANES`` numerical slots,
a gather of the row's values, then ``s`` steps of a branch-free search down the slots'
breadth-first key tables (a gather of one key per lane per step), NaN and, for slots of
LightGBM's ``Zero`` type, ``|x| <= ZERO`` ranked -1; for each categorical feature, the row of
its slots' ranks for the row's category (``lranks.Slots.cat``: 0 in a set, 1 out, -1 for NaN)
copied a vector at a time. Second (``descend``), a level of a vector of trees gathers one word per lane (its
node's record), then the rank of the record's slot, and steps right when the rank is above the
record's threshold rank, compared signed (NaN left) or unsigned (NaN right) as the record says.
"""

from __future__ import annotations

import re

from thrifty.forest.kernels import ZERO
from thrifty.runtime.compiled.lanes import BLOCK, LANES, TOP_LEVELS
from thrifty.runtime.compiled.layout import double
from thrifty.runtime.compiled.lranks import RANK_SHIFT, SLOT_SHIFT, SLOT_ZERO, UNSIGNED_BIT, Slots

_V = f"<{LANES} x double>"
_I = f"<{LANES} x i64>"
_R = f"<{LANES} x i32>"
_B = f"<{LANES} x i1>"
_P = f"<{LANES} x ptr>"
_EVERY = "splat (i1 true)"
# Rows of ``ctop`` per block: one record word per candidate of each top level.
TOP_WORDS = 2**TOP_LEVELS - 1


def _splat(ty: str, value: str) -> str:
    return f"splat ({ty} {value})"


def gather(ty: str, base: str, index: str, out: str, mask: str = _EVERY) -> list[str]:
    """``out``: per lane, the ``ty`` at ``base[index]`` (lanes outside ``mask`` read nothing: 0)."""
    vt = f"<{LANES} x {ty}>"
    suffix = {"double": "f64", "i64": "i64", "i32": "i32"}[ty]
    passthru = "poison" if mask == _EVERY else "zeroinitializer"
    return [
        f"  {out}p = getelementptr {ty}, ptr {base}, {_I} {index}",
        f"  {out} = call {vt} @llvm.masked.gather.v{LANES}{suffix}.v{LANES}p0({_P} {out}p, i32 8, "
        f"{_B} {mask}, {vt} {passthru})",
    ]


def rank_prologue(slots: Slots, came_from: str) -> tuple[list[str], str]:
    """The row's ranks into ``%rk`` (an i32 per slot, ``slots.always`` ranked 0): lines that
    continue the entry block ``came_from`` (which holds ``%row`` and the ``c*`` tables) and end
    in the block returned, which the caller goes on with."""
    NG = slots.numeric
    L = [
        f"  %rk = alloca [{slots.always + LANES} x i32], align 64",
        "  br label %rg",
        "rg:",
        f"  %g = phi i64 [0, %{came_from}], [%g1, %rgd]",
        f"  %gm = icmp slt i64 %g, {NG}",
        "  br i1 %gm, label %rgb, label %cg",
        "rgb:",
        f"  %go = mul i64 %g, {LANES}",
        "  %gfp = getelementptr i64, ptr %cfeat, i64 %go",
        f"  %gf = load {_I}, ptr %gfp, align 8",
        *gather("double", "%row", "%gf", "%gx"),
        "  %gbp = getelementptr i64, ptr %cbase, i64 %go",
        f"  %gb = load {_I}, ptr %gbp, align 8",
        "  %gsp = getelementptr i64, ptr %csteps, i64 %g",
        "  %gs = load i64, ptr %gsp",
        "  br label %rs",
        "rs:",
        "  %s = phi i64 [0, %rgb], [%s1, %rsb]",
        f"  %k = phi {_I} [zeroinitializer, %rgb], [%k1, %rsb]",
        "  %sm = icmp slt i64 %s, %gs",
        "  br i1 %sm, label %rsb, label %rgd",
        "rsb:",
        f"  %ki = add {_I} %gb, %k",
        *gather("double", "%cthr", "%ki", "%key"),
        # NaN keys pad the table: false, as for keys not below the value.
        f"  %lt = fcmp olt {_V} %key, %gx",
        f"  %k2 = shl {_I} %k, {_splat('i64', '1')}",
        f"  %k3 = add {_I} %k2, {_splat('i64', '1')}",
        f"  %ltz = zext {_B} %lt to {_I}",
        f"  %k1 = add {_I} %k3, %ltz",
        "  %s1 = add i64 %s, 1",
        "  br label %rs",
        "rgd:",
        # After s steps k is 2**s - 1 + rank.
        "  %full = shl i64 1, %gs",
        "  %fm = sub i64 %full, 1",
        f"  %fv0 = insertelement {_I} poison, i64 %fm, i64 0",
        f"  %fv = shufflevector {_I} %fv0, {_I} poison, <{LANES} x i32> zeroinitializer",
        f"  %rank = sub {_I} %k, %fv",
        f"  %gnan = fcmp uno {_V} %gx, zeroinitializer",
        "  %gflp = getelementptr i64, ptr %cflag, i64 %go",
        f"  %gfl = load {_I}, ptr %gflp, align 8",
        f"  %gzb = and {_I} %gfl, {_splat('i64', str(SLOT_ZERO))}",
        f"  %gzf = icmp ne {_I} %gzb, zeroinitializer",
        f"  %gax = call {_V} @llvm.fabs.v{LANES}f64({_V} %gx)",
        f"  %gz = fcmp ole {_V} %gax, {_splat('double', double(ZERO))}",
        f"  %gzz = and {_B} %gzf, %gz",
        f"  %gmiss = or {_B} %gnan, %gzz",
        f"  %grr = select {_B} %gmiss, {_I} {_splat('i64', '-1')}, {_I} %rank",
        f"  %gr32 = trunc {_I} %grr to {_R}",
        "  %grkp = getelementptr i32, ptr %rk, i64 %go",
        f"  store {_R} %gr32, ptr %grkp, align 4",
        "  %g1 = add i64 %g, 1",
        "  br label %rg",
        "cg:",
        "  %h = phi i64 [0, %rg], [%h1, %cpd]",
        f"  %hm = icmp slt i64 %h, {len(slots.cat_features)}",
        "  br i1 %hm, label %cgb, label %rdone",
        "cgb:",
        "  %ho = mul i64 %h, 5",
        *(
            line
            for j, name in enumerate(("hf", "hc", "hat", "hs0", "hn"))
            for line in (
                f"  %{name}o = add i64 %ho, {j}",
                f"  %{name}p = getelementptr i64, ptr %ccf, i64 %{name}o",
                f"  %{name} = load i64, ptr %{name}p",
            )
        ),
        "  %vp = getelementptr double, ptr %row, i64 %hf",
        "  %v = load double, ptr %vp",
        # ``next_node``'s rule: the code trunc(v) for -1 < v < C (the feature's codes), any
        # other number its row C, NaN its row C + 1.
        "  %ab = fcmp ogt double %v, -1.0",
        "  %cd = sitofp i64 %hc to double",
        "  %be = fcmp olt double %v, %cd",
        "  %in = and i1 %ab, %be",
        "  %safe = select i1 %in, double %v, double 0.0",
        "  %code = fptosi double %safe to i64",
        "  %c1 = select i1 %in, i64 %code, i64 %hc",
        "  %nan = fcmp uno double %v, 0.0",
        "  %hc1 = add i64 %hc, 1",
        "  %c2 = select i1 %nan, i64 %hc1, i64 %c1",
        f"  %width = mul i64 %hn, {LANES}",
        "  %rowo = mul i64 %c2, %width",
        "  %src = add i64 %hat, %rowo",
        "  br label %cp",
        "cp:",
        "  %q = phi i64 [0, %cgb], [%q1, %cpb]",
        "  %qm = icmp slt i64 %q, %hn",
        "  br i1 %qm, label %cpb, label %cpd",
        "cpb:",
        f"  %qo = mul i64 %q, {LANES}",
        "  %qs = add i64 %src, %qo",
        "  %qsp = getelementptr i32, ptr %ccat, i64 %qs",
        f"  %qv = load {_R}, ptr %qsp, align 4",
        "  %qd = add i64 %hs0, %qo",
        "  %qdp = getelementptr i32, ptr %rk, i64 %qd",
        f"  store {_R} %qv, ptr %qdp, align 4",
        "  %q1 = add i64 %q, 1",
        "  br label %cp",
        "cpd:",
        "  %h1 = add i64 %h, 1",
        "  br label %cg",
        "rdone:",
        f"  %alwp = getelementptr i32, ptr %rk, i64 {slots.always}",
        "  store i32 0, ptr %alwp",
    ]
    # Names and blocks of their own beside the lanes' (``_rk``).
    shared = {"row", "cfeat", "cbase", "csteps", "cthr", "cflag", "ccat", "ccf", "rk", came_from}
    L = [re.sub(r"%(\w+)", lambda m: m[0] if m[1] in shared else f"{m[0]}_rk", line) for line in L]
    return [re.sub(r"^(\w+):$", r"\1_rk:", line) for line in L], "rdone_rk"


def descend(k: int, top: int | None = None) -> list[str]:
    """One level of vector ``k``'s trees on compact records: each lane from ``%node_{k}`` to
    ``%next_{k}`` (at the block's level ``top`` below ``lanes.TOP_LEVELS``, its record from the
    block's ``ctop`` rows at ``%top``, chosen by the lane's decisions above; names suffixed
    ``_t{top}{k}``), as ``ir_lanes._descend``."""
    if top is None:
        L = gather("i64", "%crec", "%node", "%rec")
    else:
        first = 2**top - 1
        cands = [f"%cand{q}" for q in range(2**top)]
        L = []
        for q, name in enumerate(cands):
            L += [
                f"  {name}p = getelementptr i64, ptr %top, i64 {(first + q) * BLOCK + LANES * k}",
                f"  {name} = load {_I}, ptr {name}p, align 8",
            ]
        # Candidates side by side differ in the lowest decision left: choose level by level.
        for i in range(top):
            nxt = []
            for m in range(len(cands) // 2):
                out = f"%rec_{i}_{m}"
                L.append(f"  {out} = select {_B} %rl_t{i}{k}, {_I} {cands[2 * m + 1]}, {_I} {cands[2 * m]}")
                nxt.append(out)
            cands = nxt
        L.append(f"  %rec = or {_I} {cands[0]}, zeroinitializer")
    L += [
        f"  %left = and {_I} %rec, {_splat('i64', str((1 << UNSIGNED_BIT) - 1))}",
        f"  %ub = and {_I} %rec, {_splat('i64', str(1 << UNSIGNED_BIT))}",
        f"  %uns = icmp ne {_I} %ub, zeroinitializer",
        f"  %sl0 = lshr {_I} %rec, {_splat('i64', str(SLOT_SHIFT))}",
        f"  %slot = and {_I} %sl0, {_splat('i64', str((1 << (RANK_SHIFT - SLOT_SHIFT)) - 1))}",
        f"  %j = ashr {_I} %rec, {_splat('i64', str(RANK_SHIFT))}",
        *gather("i32", "%rk", "%slot", "%r32"),
        f"  %r = sext {_R} %r32 to {_I}",
        f"  %sg = icmp sgt {_I} %r, %j",
        f"  %ug = icmp ugt {_I} %r, %j",
        f"  %rl = select {_B} %uns, {_B} %ug, {_B} %sg",
        f"  %step = zext {_B} %rl to {_I}",
        f"  %next = add {_I} %left, %step",
    ]
    shared = {"crec", "rk", "top", *(f"rl_t{i}{k}" for i in range(TOP_LEVELS))}
    suffix = str(k) if top is None else f"t{top}{k}"
    return [re.sub(r"%(\w+)", lambda m: m[0] if m[1] in shared else f"{m[0]}_{suffix}", line) for line in L]
