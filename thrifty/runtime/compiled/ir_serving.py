"""LLVM IR of the serving path's ``serve``: a forest plan from a fresh state to settled costs.

It is generated (for forests of at most 64 features) in the module of ``ir_scalar``'s ``run``,
which it calls; the serving path (``serving``) calls it.
"""

from __future__ import annotations

from thrifty.runtime.compiled.layout import COST_TABLES, STATE_FIELDS, TABLES, Layout

# The words of ``serve``'s one argument, a call context: the input matrix, the state buffer,
# the plan's tables and the cost tables (addresses), the rows [lo, hi) of n, and a flag
# asking to round the inputs to float32 in place first. One argument makes the call cheap from
# Python: ctypes converts every argument on every call (about 0.2 µs for one, 0.8-1.1 µs for
# seven), and a service's contexts are built once per thread and row count (``serving``).
CONTEXT = ("X", "S", "T", "C", "lo", "hi", "n", "round32")


def serving_ir(lay: Layout, key: str) -> str:
    """``serve(ctx)``: rows ``[lo, hi)`` of the context ``ctx`` (``CONTEXT``) from a fresh state
    to settled costs.

    Rounds the rows' inputs to float32 in place when asked (as scikit-learn and XGBoost read
    them), sets the rows' state (raw scores at the base score, counters at zero), runs the plan
    (``run``), then prices the features each row tested as ``interpret.kernels.settle_costs`` does: only
    the tested features, found as the set bits of ``bits`` in increasing order, each unit of
    their closures paid once in the same order, so the sums agree bit for bit. It stores the
    feature cost in ``cost``, the acquired features as bits in ``acq``, and the evaluation
    cost ``tree_cost * pos + split_cost * nodes`` and ``total`` as ``_results.assemble`` forms
    them. Generated for forests of at most 64 features."""
    K, F = lay.K, lay.F
    off = {name: K + j for j, name in enumerate(STATE_FIELDS)}
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
    for name in ("nodes", "bits", "pos", "dir", "frozen"):
        init += [f"  %z{name} = getelementptr i64, ptr %{name}S, i64 %wi", f"  store i64 0, ptr %z{name}"]
    init_code = "\n".join(init)
    return f"""
declare i64 @llvm.cttz.i64(i64, i1)

define void @serve_{key}(ptr %ctx) {{
entry:
{args}
{loads}
{fields}
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
  call void @run_{key}(ptr %X, ptr %S, ptr %T, ptr null, ptr %wl, i64 %m, i64 %n)
  br label %row
row:
  %i = phi i64 [%lo, %go], [%i1, %rowdone]
  %more = icmp slt i64 %i, %hi
  br i1 %more, label %rowbody, label %done
rowbody:
  %bp = getelementptr i64, ptr %bitsS, i64 %i
  %bits = load i64, ptr %bp
  br label %feat
feat:
  %rem = phi i64 [%bits, %rowbody], [%rem1, %featnext]
  %paid = phi i64 [0, %rowbody], [%paid1, %featnext]
  %tot = phi double [0.0, %rowbody], [%tot1, %featnext]
  %acq = phi i64 [0, %rowbody], [%acq1, %featnext]
  %any = icmp ne i64 %rem, 0
  br i1 %any, label %fbody, label %rowdone
fbody:
  %f = call i64 @llvm.cttz.i64(i64 %rem, i1 true)
  %remm = sub i64 %rem, 1
  %rem1 = and i64 %rem, %remm
  %k0p = getelementptr i64, ptr %closure_ptr, i64 %f
  %k0 = load i64, ptr %k0p
  %f1 = add i64 %f, 1
  %k1p = getelementptr i64, ptr %closure_ptr, i64 %f1
  %k1 = load i64, ptr %k1p
  br label %unit
unit:
  %k = phi i64 [%k0, %fbody], [%kn, %ubody]
  %paid1 = phi i64 [%paid, %fbody], [%paidn, %ubody]
  %tot1 = phi double [%tot, %fbody], [%totn, %ubody]
  %acq1 = phi i64 [%acq, %fbody], [%acqn, %ubody]
  %uin = icmp slt i64 %k, %k1
  br i1 %uin, label %ubody, label %featnext
ubody:
  %up = getelementptr i64, ptr %closure_units, i64 %k
  %u = load i64, ptr %up
  %ub = shl i64 1, %u
  %pd = and i64 %paid1, %ub
  %isp = icmp ne i64 %pd, 0
  %ucp = getelementptr double, ptr %unit_cost, i64 %u
  %ucv = load double, ptr %ucp
  %ump = getelementptr i64, ptr %unit_bits, i64 %u
  %umv = load i64, ptr %ump
  %paidn = or i64 %paid1, %ub
  %totadd = fadd double %tot1, %ucv
  %totn = select i1 %isp, double %tot1, double %totadd
  %acqor = or i64 %acq1, %umv
  %acqn = select i1 %isp, i64 %acq1, i64 %acqor
  %kn = add i64 %k, 1
  br label %unit
featnext:
  br label %feat
rowdone:
  %cp = getelementptr double, ptr %costS, i64 %i
  store double %tot, ptr %cp
  %ap = getelementptr i64, ptr %acqS, i64 %i
  store i64 %acq, ptr %ap
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
  %tt = fadd double %tot, %ev
  %ttp = getelementptr double, ptr %totalS, i64 %i
  store double %tt, ptr %ttp
  %i1 = add i64 %i, 1
  br label %row
done:
  ret void
}}
"""
