"""LLVM IR of a forest plan's *lazy* blocks: scalar blocks that stop where a row needs a
feature it does not have yet, and resume there when it has arrived.

A lazy block has ``ir_scalar.scalar_block_ir``'s shape with three differences, which together
give the interpreter's resumable kernel (``interpret.kernels.run_sequential``) in native code:

- each split first reads whether its feature is known for the row (the ``known`` matrix of
  lazy evaluation, one byte per row and feature); when it is not, the row stops: its scores,
  counters and tested features *before this tree*, its position, the node it stopped at
  (``cur``) and the feature it waits for (``blocked``) are stored, and it leaves the work list;
- a row enters the block at its own position (a ``switch`` on it) and, in the tree it stopped
  in, at the node it stopped at (a ``switch`` on ``cur``); a row whose position lies past the
  block passes through unchanged;
- the splits a tree visits and the features it tests are counted once, at its leaf (the leaf
  record holds the whole path's), so a tree walked in two rounds counts exactly what one walk
  counts.

Per-row state is ``layout.LAZY_FIELDS`` after the raw scores. Locals that cross trees live in
``alloca`` slots (promoted to registers by LLVM), since a row may enter at any tree.
"""

from __future__ import annotations

from thrifty.runtime.compiled.ir_scalar import _bins_helper, _margin, _tree_ir
from thrifty.runtime.compiled.layout import LAZY_FIELDS, ROW_GROUP, TABLES, Layout, blocks_of, exit_score_ir

_SIG = (
    "ptr noalias %X, ptr noalias %S, ptr noalias %T, ptr noalias %touched, ptr noalias %rows, "
    "i64 %m, i64 %n, ptr noalias %known"
)


def lazy_module_irs(lay: Layout, key: str, trees_per_module: int) -> list[str]:
    """The IR modules of the lazy blocks (about ``trees_per_module`` trees each), then
    ``lazyrun(X, S, T, touched, rows, m, n, known)``."""
    blocks = blocks_of(len(lay.order))
    decl = "declare double @llvm.fabs.f64(double)\ndeclare double @llvm.floor.f64(double)\n" + _bins_helper(
        key
    )
    modules, current, trees = [], [], 0
    for b, (p, k) in enumerate(blocks):
        current.append(lazy_block_ir(lay, p, k, b, key))
        trees += k
        if trees >= trees_per_module or b == len(blocks) - 1:
            modules.append(decl + "\n".join(current))
            current, trees = [], 0
    modules.append(_lazy_run_ir(len(blocks), key))
    return modules


def _lazy_run_ir(n_blocks: int, key: str) -> str:
    """``lazyrun``: every lazy block over each group of ``ROW_GROUP`` rows of the work list."""
    decls = "\n".join(f"declare i64 @lazyblock_{key}_{b}({_SIG})" for b in range(n_blocks))
    body = [
        f"define void @lazyrun_{key}({_SIG}) {{",
        "entry:",
        "  br label %group",
        "group:",
        "  %lo = phi i64 [0, %entry], [%lo1, %next]",
        "  %more = icmp slt i64 %lo, %m",
        "  br i1 %more, label %go, label %done",
        "go:",
        "  %left = sub i64 %m, %lo",
        f"  %small = icmp slt i64 %left, {ROW_GROUP}",
        f"  %g0 = select i1 %small, i64 %left, i64 {ROW_GROUP}",
        "  %wl = getelementptr i64, ptr %rows, i64 %lo",
        f"  br label %{'b0' if n_blocks else 'next'}",
    ]
    for b in range(n_blocks):
        nxt = f"%b{b + 1}" if b + 1 < n_blocks else "%next"
        body += [
            f"b{b}:",
            f"  %g{b + 1} = call i64 @lazyblock_{key}_{b}(ptr %X, ptr %S, ptr %T, ptr %touched, "
            f"ptr %wl, i64 %g{b}, i64 %n, ptr %known)",
            f"  %e{b} = icmp eq i64 %g{b + 1}, 0",
            f"  br i1 %e{b}, label %next, label {nxt}",
        ]
    body += ["next:", f"  %lo1 = add i64 %lo, {ROW_GROUP}", "  br label %group", "done:", "  ret void", "}"]
    return decls + "\n" + "\n".join(body) + "\n"


def lazy_block_ir(lay: Layout, p0: int, k: int, b: int, key: str) -> str:
    """Lazy block ``b`` (positions ``[p0, p0 + k)``) as ``lazyblock(X, S, T, touched, rows, m,
    n, known) -> kept``: of the rows ``rows[:m]``, those that finished the block or lie past it,
    compacted to the front of ``rows``; rows that exited or stopped leave the list."""
    K, F = lay.K, lay.F
    t = {name: i for i, name in enumerate(TABLES)}
    off = {name: (K + j) for j, name in enumerate(LAZY_FIELDS)}
    head = [f"define i64 @lazyblock_{key}_{b}({_SIG}) {{", "entry:"]
    head += [f"  %Aacc{c} = alloca double" for c in range(K)]
    head += [f"  %A{name} = alloca i64" for name in ("nodes", "bits", "cur", "pos", "dir")]
    for name in ("leaf", "eps_pos", "eps_neg"):
        head += [
            f"  %{name}a = getelementptr ptr, ptr %T, i64 {t[name]}",
            f"  %{name} = load ptr, ptr %{name}a",
        ]
    for name, o in off.items():
        head += [f"  %{name}o = mul i64 %n, {o}", f"  %{name}S = getelementptr i64, ptr %S, i64 %{name}o"]
    head += [
        "  br label %loop",
        "loop:",
        "  %a = phi i64 [0, %entry], [%a1, %cont]",
        "  %kept = phi i64 [0, %entry], [%kept1, %cont]",
        "  %end = icmp sge i64 %a, %m",
        "  br i1 %end, label %exit, label %body",
        "body:",
        "  %rp = getelementptr i64, ptr %rows, i64 %a",
        "  %i = load i64, ptr %rp",
        f"  %xo = mul i64 %i, {F}",
        "  %row = getelementptr double, ptr %X, i64 %xo",
        "  %krow = getelementptr i8, ptr %known, i64 %xo",
    ]
    if not lay.masked:
        head += ["  %trow = getelementptr i8, ptr %touched, i64 %xo"]
    for c in range(K):
        head += [
            f"  %rawi{c} = mul i64 %n, {c}",
            f"  %rawj{c} = add i64 %rawi{c}, %i",
            f"  %rawp{c} = getelementptr double, ptr %S, i64 %rawj{c}",
            f"  %raw{c} = load double, ptr %rawp{c}",
            f"  store double %raw{c}, ptr %Aacc{c}",
        ]
    for name in ("nodes", "bits", "cur", "pos", "dir", "frozen", "blocked"):
        head.append(f"  %{name}p = getelementptr i64, ptr %{name}S, i64 %i")
    for name in ("nodes", "bits", "cur"):
        head += [f"  %{name}0 = load i64, ptr %{name}p", f"  store i64 %{name}0, ptr %A{name}"]
    head += [
        "  %pos0 = load i64, ptr %posp",
        f"  %rel = sub i64 %pos0, {p0}",
        "  switch i64 %rel, label %keep [" + " ".join(f"i64 {j}, label %t{j}_entry" for j in range(k)) + "]",
    ]
    lines: list[str] = []
    globals_: list[str] = []
    any_exit = False
    for j in range(k):
        p = p0 + j
        tree = int(lay.order[p])
        x = f"t{j}_"
        after = f"%t{j + 1}_entry" if j + 1 < k else "%rowend"
        acc = [f"%{x}a{c}" for c in range(K)]
        guard: list[tuple[int, int]] = []
        # One word of tested features, or (over 64 features) the row's bytes of ``touched``.
        words = [f"%{x}bt"] if lay.masked else []
        code, acc1, nodes1, bits, _ = _tree_ir(lay, tree, x, acc, f"%{x}nd", words, globals_, key, guard)
        bits1 = bits[0] if bits else f"%{x}bt"
        # Enter the tree at its root, or at the node the row stopped at.
        lines += [f"t{j}_entry:"]
        lines += [f"  %{x}a{c} = load double, ptr %Aacc{c}" for c in range(K)]
        lines += [
            f"  %{x}nd = load i64, ptr %Anodes",
            f"  %{x}bt = load i64, ptr %Abits",
            f"  %{x}c = load i64, ptr %Acur",
            f"  switch i64 %{x}c, label %{x}start ["
            + " ".join(f"i64 {node}, label %{x}n{node}" for node, _ in guard)
            + "]",
        ]
        lines += code
        lines += [f"  store double {v}, ptr %Aacc{c}" for c, v in enumerate(acc1)]
        lines += [
            f"  store i64 {nodes1}, ptr %Anodes",
            f"  store i64 {bits1}, ptr %Abits",
            "  store i64 -1, ptr %Acur",
        ]
        kind = int(lay.exits[p])
        if kind:
            any_exit = True
            g = exit_score_ir(lines, lay.finish, acc1, f"{x}x", _margin)
            if lay.any_bins:
                # A row frozen by a bin table never exits again.
                lines += [
                    f"  %{x}fz = load i64, ptr %frozenp",
                    f"  %{x}isfz = icmp ne i64 %{x}fz, 0",
                    f"  br i1 %{x}isfz, label {after}, label %{x}pos",
                    f"{x}pos:",
                ]
            lines += [
                f"  %{x}epp = getelementptr double, ptr %eps_pos, i64 {p}",
                f"  %{x}ep = load double, ptr %{x}epp",
                f"  %{x}gp = fcmp ogt double {g}, %{x}ep",
                f"  br i1 %{x}gp, label %{x}xp, label %{x}neg",
                f"{x}neg:",
                f"  %{x}enp = getelementptr double, ptr %eps_neg, i64 {p}",
                f"  %{x}en = load double, ptr %{x}enp",
                f"  %{x}gn = fcmp olt double {g}, %{x}en",
            ]
            if kind == 2:
                lines += [
                    f"  br i1 %{x}gn, label %{x}xn, label %{x}bin",
                    f"{x}bin:",
                    f"  %{x}bc = call i64 @bins_{key}(double {g}, i64 {p}, ptr %T, ptr %frozenp)",
                    f"  %{x}bz = icmp eq i64 %{x}bc, 0",
                    f"  br i1 %{x}bz, label {after}, label %{x}xb",
                    f"{x}xb:",
                    f"  store i64 %{x}bc, ptr %Adir",
                    f"  store i64 {p + 1}, ptr %Apos",
                    "  br label %rowexit",
                ]
            else:
                lines.append(f"  br i1 %{x}gn, label %{x}xn, label {after}")
            for label, side in (("xp", 1), ("xn", -1)):
                lines += [
                    f"{x}{label}:",
                    f"  store i64 {side}, ptr %Adir",
                    f"  store i64 {p + 1}, ptr %Apos",
                    "  br label %rowexit",
                ]
        else:
            lines.append(f"  br label {after}")
        if guard:
            # The row waits for a feature: its state before this tree, and where it stopped.
            lines += [
                f"{x}blk:",
                f"  %{x}bn = phi i64 " + ", ".join(f"[{node}, %{x}n{node}]" for node, _ in guard),
                f"  %{x}bf = phi i64 " + ", ".join(f"[{feat}, %{x}n{node}]" for node, feat in guard),
            ]
            lines += [f"  store double %{x}a{c}, ptr %rawp{c}" for c in range(K)]
            lines += [
                f"  store i64 %{x}nd, ptr %nodesp",
                f"  store i64 %{x}bt, ptr %bitsp",
                f"  store i64 {p}, ptr %posp",
                f"  store i64 %{x}bn, ptr %curp",
                f"  store i64 %{x}bf, ptr %blockedp",
                "  br label %drop",
            ]
    tail = ["rowend:"]
    tail += _store_back(K, "e")
    tail += [f"  store i64 {p0 + k}, ptr %posp", "  br label %keep"]
    if any_exit:
        tail += ["rowexit:"]
        tail += _store_back(K, "x")
        tail += [
            "  %xpos = load i64, ptr %Apos",
            "  store i64 %xpos, ptr %posp",
            "  %xdir = load i64, ptr %Adir",
            "  store i64 %xdir, ptr %dirp",
            "  br label %drop",
        ]
    tail += [
        "keep:",
        "  %kp = getelementptr i64, ptr %rows, i64 %kept",
        "  store i64 %i, ptr %kp",
        "  %kept_in = add i64 %kept, 1",
        "  br label %cont",
        "drop:",
        "  br label %cont",
        "cont:",
        "  %kept1 = phi i64 [%kept_in, %keep], [%kept, %drop]",
        "  %a1 = add i64 %a, 1",
        "  br label %loop",
        "exit:",
        "  ret i64 %kept",
        "}",
    ]
    return "\n".join(globals_ + head + lines + tail) + "\n"


def _store_back(K: int, x: str) -> list[str]:
    """The row's scores, counters and tested features from their slots to its state (names
    prefixed ``x``); the row is at no tree's inner node."""
    out = []
    for c in range(K):
        out += [f"  %{x}sb{c} = load double, ptr %Aacc{c}", f"  store double %{x}sb{c}, ptr %rawp{c}"]
    for name in ("nodes", "bits"):
        out += [f"  %{x}sb{name} = load i64, ptr %A{name}", f"  store i64 %{x}sb{name}, ptr %{name}p"]
    out.append("  store i64 -1, ptr %curp")
    return out
