"""LLVM IR of the serving path's ``serve``: a forest plan from a fresh state to settled costs.

It is generated (for forests of any number of features) in the module of ``ir_scalar``'s ``run``,
which it calls; the serving path (``serving``) calls it.
"""

from __future__ import annotations

from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_lanes import PERMUTE_FEATURES, lanes_ir
from thrifty.runtime.compiled.lanes import BLOCK, lanes_ok
from thrifty.runtime.compiled.layout import COST_TABLES, TABLES, Layout, state_fields, word_field
from thrifty.runtime.compiled.lranks import ranks_ok

# Rows up to which ``serve`` runs each row alone with trees in vector lanes (``ir_lanes``)
# rather than rows in the lanes of the plan's blocks (``run``); the call context says it.
LANE_ROWS = 1

# The words of ``serve``'s one argument, a call context: the input matrix, the state buffer,
# the plan's tables and the cost tables (addresses), the rows [lo, hi) of n, a flag asking to
# round the inputs to float32 in place first, and the rows up to which a call runs each row
# alone with trees in vector lanes (``LANE_ROWS``; 0: never), and whether those lanes read
# compact rank records (``ir_lranks``: 1) or the node records (0). One argument makes the call cheap from
# Python: ctypes converts every argument on every call (about 0.2 µs for one, 0.8-1.1 µs for
# seven), and a service's contexts are built once per thread and row count (``serving``).
CONTEXT = ("X", "S", "T", "C", "lo", "hi", "n", "round32", "lane_rows", "lane_ranks")
# ``lane_ranks`` asking for the scores-only lanes (``scores_lanes``): the rows' raw scores
# alone, nothing priced (the other fields are left as they were).
SCORES = 2


# Slots of the call's table of tested-feature sets already priced (``_settle_ir``).
MEMO = 64


def serving_ir(lay: Layout, key: str, target: targets.Target | None = None) -> str:
    """``serve(ctx)``: rows ``[lo, hi)`` of the context ``ctx`` (``CONTEXT``) from a fresh state
    to settled costs.

    Rounds the rows' inputs to float32 in place when asked (as scikit-learn and XGBoost read
    them), sets the rows' state (raw scores at the base score, counters at zero), runs the plan
    (``run``), then prices the features each row tested as ``interpret.kernels.settle_costs`` does: only
    the tested features, found as the set bits of ``bits`` in increasing order (word by word),
    each unit of their closures paid once in the same order, so the sums agree bit for bit. It
    stores the feature cost in ``cost``, the acquired features as bits in ``acq`` (the union of
    the paid units' features, ``unit_bits`` holding ``W`` words per unit), and the evaluation
    cost ``tree_cost * pos + split_cost * nodes`` and ``total`` as ``_results.assemble`` forms
    them. Any number of features and priced units (a word per 64 of each). ``target``: the
    target the code is compiled for (default ``targets.current()``; it decides ``permute``)."""
    K, F, W = lay.K, lay.F, lay.words
    off = {name: K + j for j, name in enumerate(state_fields(W))}
    tb = TABLES.index("base")
    args = "\n".join(
        f"  %{name}c = getelementptr i64, ptr %ctx, i64 {j}\n"
        f"  %{name} = load {'ptr' if j < 4 else 'i64'}, ptr %{name}c"
        for j, name in enumerate(CONTEXT)
    )
    loads = "\n".join(
        f"  %{name}a = getelementptr ptr, ptr %C, i64 {i}\n  %{name} = load ptr, ptr %{name}a"
        for i, name in enumerate(COST_TABLES)
    )
    fields = "\n".join(
        f"  %{name}o = mul i64 %n, {o}\n  %{name}S = getelementptr i64, ptr %S, i64 %{name}o"
        for name, o in off.items()
    )
    init = [f"  %basea = getelementptr ptr, ptr %T, i64 {tb}", "  %base = load ptr, ptr %basea"]
    for c in range(K):
        init += [
            f"  %bp{c} = getelementptr double, ptr %base, i64 {c}",
            f"  %bv{c} = load double, ptr %bp{c}",
            f"  %ro{c} = mul i64 %n, {c}",
            f"  %rj{c} = add i64 %ro{c}, %wi",
            f"  %rp{c} = getelementptr double, ptr %S, i64 %rj{c}",
            f"  store double %bv{c}, ptr %rp{c}",
        ]
    for name in ("nodes", *(word_field("bits", w) for w in range(W)), "pos", "dir", "frozen"):
        init += [f"  %z{name} = getelementptr i64, ptr %{name}S, i64 %wi", f"  store i64 0, ptr %z{name}"]
    init_code = "\n".join(init)
    settle = _settle_ir(W)
    evaluate = _evaluate_ir(lay, key)
    last = W - 1
    store_acq = "\n".join(
        f"  %ap{w} = getelementptr i64, ptr %{word_field('acq', w)}S, i64 %i\n  store i64 %ar{w}, ptr %ap{w}"
        for w in range(W)
    )
    memo_results = "\n".join(f"  %ar{w} = phi i64 [%a{w}, %settled], [%ma{w}, %hit]" for w in range(W))
    return (
        (lanes_ir(lay, key, permute=permute(lay, target)) if _lanes(lay) else "")
        + (lanes_ir(lay, key, compact=True, declare=False) if compact(lay) else "")
        + (lanes_ir(lay, key, compact=True, declare=False, scores=True) if scores_lanes(lay) else "")
        + f"""
declare i64 @llvm.cttz.i64(i64, i1)
declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)

define void @serve_{key}(ptr %ctx) {{
entry:
{args}
{loads}
{fields}
  %uwp = load i64, ptr %unit_words
  %paidbytes = mul i64 %uwp, 8
  %paidA = alloca i64, i64 %uwp
  %acqA = alloca i64, i64 {W}
  %memoV = alloca i8, i64 {MEMO}
  %memoT = alloca i64, i64 {MEMO * W}
  %memoC = alloca double, i64 {MEMO}
  %memoA = alloca i64, i64 {MEMO * W}
  call void @llvm.memset.p0.i64(ptr %memoV, i8 0, i64 {MEMO}, i1 false)
  %tcp = getelementptr double, ptr %prices, i64 0
  %tc = load double, ptr %tcp
  %scp = getelementptr double, ptr %prices, i64 1
  %sc = load double, ptr %scp
  %r32on = icmp ne i64 %round32, 0
  br i1 %r32on, label %round, label %start
round:
  %rb = mul i64 %lo, {F}
  %re = mul i64 %hi, {F}
  br label %rloop
rloop:
  %ri = phi i64 [%rb, %round], [%ri1, %rbody]
  %rmore = icmp slt i64 %ri, %re
  br i1 %rmore, label %rbody, label %start
rbody:
  %rxp = getelementptr double, ptr %X, i64 %ri
  %rx = load double, ptr %rxp
  %rxf = fptrunc double %rx to float
  %rxd = fpext float %rxf to double
  store double %rxd, ptr %rxp
  %ri1 = add i64 %ri, 1
  br label %rloop
start:
  br label %fill
fill:
  %wi = phi i64 [%lo, %start], [%wi1, %fillbody]
  %wmore = icmp slt i64 %wi, %hi
  br i1 %wmore, label %fillbody, label %go
fillbody:
  %wp = getelementptr i64, ptr %workS, i64 %wi
  store i64 %wi, ptr %wp
{init_code}
  %wi1 = add i64 %wi, 1
  br label %fill
go:
  %wl = getelementptr i64, ptr %workS, i64 %lo
  %m = sub i64 %hi, %lo
{evaluate}
ran:
  br label %row
row:
  %i = phi i64 [%lo, %ran], [%i1, %rowdone]
  %more = icmp slt i64 %i, %hi
  br i1 %more, label %rowbody, label %done
{settle}rowdone:
  %totr = phi double [%tot{last}, %settled], [%mtot, %hit]
{memo_results}
  %cp = getelementptr double, ptr %costS, i64 %i
  store double %totr, ptr %cp
{store_acq}
  %posp = getelementptr i64, ptr %posS, i64 %i
  %pos = load i64, ptr %posp
  %ndp = getelementptr i64, ptr %nodesS, i64 %i
  %nd = load i64, ptr %ndp
  %posf = sitofp i64 %pos to double
  %ndf = sitofp i64 %nd to double
  %ect = fmul double %tc, %posf
  %ecs = fmul double %sc, %ndf
  %ev = fadd double %ect, %ecs
  %evp = getelementptr double, ptr %evaluationS, i64 %i
  store double %ev, ptr %evp
  %tt = fadd double %totr, %ev
  %ttp = getelementptr double, ptr %totalS, i64 %i
  store double %tt, ptr %ttp
  %i1 = add i64 %i, 1
  br label %row
done:
  ret void
}}
"""
    )


def permute(lay: Layout, target: targets.Target | None = None) -> bool:
    """Whether one row through the lanes takes its values by a permute (``ir_lanes.lanes_ir``):
    on AVX-512 (``target``, default ``targets.current()``), for forests of at most
    ``ir_lanes.PERMUTE_FEATURES`` features (and ``PERMUTE`` on)."""
    return PERMUTE and lay.F <= PERMUTE_FEATURES and (target or targets.current()).name == "avx512"


# Whether ``permute`` may say yes (False is for measuring the gathers it replaces; not part
# of the cache key: compile afresh after changing it).
PERMUTE = True


def _lanes(lay: Layout) -> bool:
    """Whether ``serve`` runs few rows through ``ir_lanes`` (its tables describe the forest,
    and the plan has no bin exits)."""
    return lanes_ok(lay.forest) and not lay.any_bins


def lane_rows(lay: Layout) -> int:
    """The rows up to which ``serve`` takes the lanes by default: ``LANE_ROWS`` for plans
    without exits, 0 for plans with exits (the lanes descend 32 trees at a time, where a row
    that exits after its first tree, as most rows of a QWYC plan do, needs one: ``run`` stops
    there). The lanes are compiled for them too (a context may ask for them). Plans of fewer
    positions than a block of lanes (``lanes.BLOCK``) take ``run`` too: lanes left idle cost as
    much as busy ones (measured one row per call on Adult's LightGBM trees, lanes against
    ``run``: 1.12 times as long at 32 trees, even at 64 and 100, 0.85 at 200)."""
    return LANE_ROWS if _lanes(lay) and not lay.exits.any() and len(lay.order) >= BLOCK else 0


def lane_ranks(lay: Layout) -> int:
    """Whether one row through the lanes reads compact rank records by default (1) or the node
    records (0): the rank records wherever they are compiled (``compact``). Measured paired in
    one process (``benchmarks/lanes_ab.py``: thread CPU time, each block after another engine's
    call; median of 21 rounds, load 10), rank over node records: Adult 0.944, NYC_taxi 0.981,
    airline 0.972, rank300 0.848, synth136 0.811, higgs255 0.771, mtpl2 0.701 (no model
    slower)."""
    return int(compact(lay))


def scores_lanes(lay: Layout) -> bool:
    """Whether ``serve`` has the scores-only lanes too (``ir_lanes.lanes_ir(scores=True)``,
    context word ``lane_ranks`` at ``SCORES``): where ``serve`` has the compact lanes and the
    plan has no exits (``ServingPath`` takes them for the calls of up to ``lane_rows`` rows). A
    call in that mode writes the rows' raw scores alone and prices nothing."""
    return compact(lay) and not lay.exits.any()


def compact(lay: Layout) -> bool:
    """Whether ``serve`` has the lanes on compact rank records too (``ir_lranks``): where it
    has the lanes and the forest's slots fit the records (``lranks.ranks_ok``)."""
    return _lanes(lay) and ranks_ok(lay.forest)


def _evaluate_ir(lay: Layout, key: str) -> str:
    """The ``go`` block's rest: rows ``[lo, hi)`` (``%m`` of them, work list ``%wl``) through
    the plan, then on to ``row``. Up to ``LANE_ROWS`` rows go one by one through ``lanes``
    (trees in the vectors' lanes), more through ``run`` (rows in the lanes). Measured with
    ``benchmarks/one_row.py``, a one-row call through the lanes took 0.82 of the time through
    ``run`` on Adult's 500 trees, 0.60 on 500 trees of 255 leaves, 0.87 on a 300-feature
    ranker and 0.58 on 1,000 trees over 136 features; two rows one after the other about as
    long as ``run`` on both (Adult's first 96 trees), three longer."""
    run = "  call void @run_{key}(ptr %X, ptr %S, ptr %T, ptr null, ptr %wl, i64 %m, i64 %n)\n  br label %ran"
    if not _lanes(lay):
        return run.format(key=key)
    call = f"  call void @lanes_{key}(ptr %X, ptr %S, ptr %T, i64 %li, i64 %n)"
    if compact(lay):
        # With the scores-only lanes, ``lane_ranks`` at ``SCORES`` takes them.
        head = (
            f"""  %sonly = icmp eq i64 %lane_ranks, {SCORES}
  br i1 %sonly, label %lscores, label %lfull
lscores:
  call void @slanes_{key}(ptr %X, ptr %S, ptr %T, i64 %li, i64 %n)
  br label %lstep
lfull:
"""
            if scores_lanes(lay)
            else ""
        )
        call = f"""{head}  %ranked = icmp ne i64 %lane_ranks, 0
  br i1 %ranked, label %lrank, label %lnode
lrank:
  call void @clanes_{key}(ptr %X, ptr %S, ptr %T, i64 %li, i64 %n)
  br label %lstep
lnode:
{call}
  br label %lstep
lstep:"""
    return f"""  %few = icmp sle i64 %m, %lane_rows
  br i1 %few, label %lanes, label %rows
lanes:
  %li = phi i64 [%lo, %go], [%li1, %{"lstep" if compact(lay) else "lane"}]
  %lmore = icmp slt i64 %li, %hi
  br i1 %lmore, label %lane, label %{"lran" if scores_lanes(lay) else "ran"}
{_SCORES_DONE if scores_lanes(lay) else ""}lane:
{call}
  %li1 = add i64 %li, 1
  br label %lanes
rows:
{run.format(key=key)}"""


# After the scores-only lanes nothing is priced: ``serve`` returns.
_SCORES_DONE = f"""lran:
  %sdone = icmp eq i64 %lane_ranks, {SCORES}
  br i1 %sdone, label %done, label %ran
"""


def _settle_ir(W: int) -> str:
    """The blocks from ``rowbody`` to ``rowdone``: the row's tested features, word ``w`` of
    ``bits`` giving features ``64 w`` to ``64 w + 63`` in increasing order, each unit of their
    closures paid once (the sum ``%tot{W - 1}``; units paid are bits of ``%paidA``, a word per
    64 units, ``unit_words`` of them), and the acquired features, the union of the paid units'
    ``unit_bits`` (words ``%acqA``, loaded as ``%a0`` to ``%a{W - 1}``).

    A row that tested the same features as an earlier row of the call takes that row's cost
    and acquired features (``hit``): the same computation on the same bits gives the same
    doubles. They are kept in ``MEMO`` slots (``%memoV`` valid, ``%memoT`` the tested
    features, ``%memoC`` the cost, ``%memoA`` the acquired features), the slot a fold of the
    bits (a forest of at most 6 features: the bits themselves). Rows of a narrow forest test
    few distinct sets: NYC_taxi's 10,000 random rows 4, two consecutive rows the same set 41%
    of the time; pricing a row took about 21 ns of its 100 trees' 100."""
    out = ["rowbody:"]
    for w in range(W):
        out += [
            f"  %bwp{w} = getelementptr i64, ptr %{word_field('bits', w)}S, i64 %i",
            f"  %bits{w} = load i64, ptr %bwp{w}",
        ]
    fold = "%bits0"
    for w in range(1, W):
        out.append(f"  %hx{w} = xor i64 {fold}, %bits{w}")
        fold = f"%hx{w}"
    out += [
        f"  %hs1 = lshr i64 {fold}, 6",
        f"  %hf1 = xor i64 {fold}, %hs1",
        "  %hs2 = lshr i64 %hf1, 12",
        "  %hf2 = xor i64 %hf1, %hs2",
        "  %hs3 = lshr i64 %hf2, 24",
        "  %hf3 = xor i64 %hf2, %hs3",
        f"  %slot = and i64 %hf3, {MEMO - 1}",
        "  %mvp = getelementptr i8, ptr %memoV, i64 %slot",
        "  %mvv = load i8, ptr %mvp",
        "  %mok = icmp ne i8 %mvv, 0",
        f"  %mtb = mul i64 %slot, {W}",
    ]
    acc = "%mok"
    for w in range(W):
        out += [
            f"  %mti{w} = add i64 %mtb, {w}",
            f"  %mtp{w} = getelementptr i64, ptr %memoT, i64 %mti{w}",
            f"  %mtv{w} = load i64, ptr %mtp{w}",
            f"  %me{w} = icmp eq i64 %mtv{w}, %bits{w}",
            f"  %ms{w} = and i1 {acc}, %me{w}",
        ]
        acc = f"%ms{w}"
    out += [f"  br i1 {acc}, label %hit, label %miss", "hit:"]
    out += ["  %mcp = getelementptr double, ptr %memoC, i64 %slot", "  %mtot = load double, ptr %mcp"]
    for w in range(W):
        out.append(f"  %map{w} = getelementptr i64, ptr %memoA, i64 %mti{w}")
        out.append(f"  %ma{w} = load i64, ptr %map{w}")
    out += ["  br label %rowdone", "miss:"]
    out.append("  call void @llvm.memset.p0.i64(ptr %paidA, i8 0, i64 %paidbytes, i1 false)")
    for w in range(W):
        out += [f"  %aw{w} = getelementptr i64, ptr %acqA, i64 {w}", f"  store i64 0, ptr %aw{w}"]
    out.append("  br label %feat0")
    for w in range(W):
        pred, tot = ("miss", "0.0") if w == 0 else (f"feat{w - 1}", f"%tot{w - 1}")
        nxt = f"feat{w + 1}" if w + 1 < W else "settled"
        # A unit newly paid adds its price and its features (selects: no branch per unit).
        acquire = "\n".join(
            f"  %uj{w}_{v} = add i64 %uw{w}, {v}\n"
            f"  %uq{w}_{v} = getelementptr i64, ptr %unit_bits, i64 %uj{w}_{v}\n"
            f"  %uv{w}_{v} = load i64, ptr %uq{w}_{v}\n"
            f"  %ao{w}_{v} = load i64, ptr %aw{v}\n"
            f"  %ar{w}_{v} = or i64 %ao{w}_{v}, %uv{w}_{v}\n"
            f"  %as{w}_{v} = select i1 %isp{w}, i64 %ao{w}_{v}, i64 %ar{w}_{v}\n"
            f"  store i64 %as{w}_{v}, ptr %aw{v}"
            for v in range(W)
        )
        out.append(f"""feat{w}:
  %rem{w} = phi i64 [%bits{w}, %{pred}], [%remn{w}, %un{w}]
  %tot{w} = phi double [{tot}, %{pred}], [%totu{w}, %un{w}]
  %any{w} = icmp ne i64 %rem{w}, 0
  br i1 %any{w}, label %fb{w}, label %{nxt}
fb{w}:
  %c{w} = call i64 @llvm.cttz.i64(i64 %rem{w}, i1 true)
  %f{w} = add i64 %c{w}, {64 * w}
  %rm{w} = sub i64 %rem{w}, 1
  %remn{w} = and i64 %rem{w}, %rm{w}
  %k0p{w} = getelementptr i64, ptr %closure_ptr, i64 %f{w}
  %k0{w} = load i64, ptr %k0p{w}
  %f1{w} = add i64 %f{w}, 1
  %k1p{w} = getelementptr i64, ptr %closure_ptr, i64 %f1{w}
  %k1{w} = load i64, ptr %k1p{w}
  br label %u{w}
u{w}:
  %k{w} = phi i64 [%k0{w}, %fb{w}], [%kn{w}, %ub{w}]
  %totu{w} = phi double [%tot{w}, %fb{w}], [%totn{w}, %ub{w}]
  %uin{w} = icmp slt i64 %k{w}, %k1{w}
  br i1 %uin{w}, label %ub{w}, label %un{w}
ub{w}:
  %up{w} = getelementptr i64, ptr %closure_units, i64 %k{w}
  %u{w}v = load i64, ptr %up{w}
  %pw{w} = lshr i64 %u{w}v, 6
  %pb{w} = and i64 %u{w}v, 63
  %ubit{w} = shl i64 1, %pb{w}
  %pp{w} = getelementptr i64, ptr %paidA, i64 %pw{w}
  %pv{w} = load i64, ptr %pp{w}
  %pd{w} = and i64 %pv{w}, %ubit{w}
  %isp{w} = icmp ne i64 %pd{w}, 0
  %pn{w} = or i64 %pv{w}, %ubit{w}
  store i64 %pn{w}, ptr %pp{w}
  %ucp{w} = getelementptr double, ptr %unit_cost, i64 %u{w}v
  %ucv{w} = load double, ptr %ucp{w}
  %totadd{w} = fadd double %totu{w}, %ucv{w}
  %totn{w} = select i1 %isp{w}, double %totu{w}, double %totadd{w}
  %uw{w} = mul i64 %u{w}v, {W}
{acquire}
  %kn{w} = add i64 %k{w}, 1
  br label %u{w}
un{w}:
  br label %feat{w}""")
    out.append("settled:")
    out += [f"  %a{w} = load i64, ptr %aw{w}" for w in range(W)]
    out += ["  store i8 1, ptr %mvp", "  %mcs = getelementptr double, ptr %memoC, i64 %slot"]
    out.append(f"  store double %tot{W - 1}, ptr %mcs")
    for w in range(W):
        out.append(f"  store i64 %bits{w}, ptr %mtp{w}")
        out.append(f"  %sap{w} = getelementptr i64, ptr %memoA, i64 %mti{w}")
        out.append(f"  store i64 %a{w}, ptr %sap{w}")
    out.append("  br label %rowdone")
    return "\n".join(out) + "\n"
