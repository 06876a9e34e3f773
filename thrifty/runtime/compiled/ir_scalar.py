"""LLVM IR for a forest plan: its trees, score accumulation, cost counters and exits.

A plan's positions are cut into blocks of up to ``CHUNK`` trees. Block ``b`` is one function
that, for each row of a work list, runs the block's trees one after the other with every split
as constants (feature offset, threshold bit for bit, missing-value rule, category bitset),
adds each reached leaf's value to the row's scores, adds the splits on the leaf's path to the
row's node count, marks the features that path tests, and applies the plan's exit rules after
each position that has one (``interpret.kernels._exit_after``: thresholds, then Fan et al.'s bins). A
row that exits leaves the work list; the others are compacted to its front. ``run`` takes the
rows in groups of ``ROW_GROUP`` and runs every block over a group before the next group (trees
blocked over rows: a block's code and the group's rows stay in cache). These are the scalar
blocks, one row at a time through branches; ``ir_vector`` makes vector blocks of the same
contract, and ``run`` then takes them for groups of ``VECTOR_ROWS`` rows or more.

Every split follows the interpreter's rule (``thrifty.forest.kernels.next_node``) exactly; the
state, tables and ``Layout`` they work on are described in ``layout``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO, ZERO
from thrifty.runtime.compiled.layout import (
    ROW_GROUP,
    TABLES,
    VECTOR_ROWS,
    Layout,
    blocks_of,
    double,
    exit_score_ir,
    state_fields,
    word_field,
)

_INF = "0x7FF0000000000000"


class Packing(Protocol):
    """Counters packed in one word (``ir_branchy.Packing``): ``unpack(lines, packed, prefix)``
    appends to ``lines`` the code turning the word ``packed`` into the row's node count and
    bits (from ``%nodes_0`` and ``%bits_0``) and returns their names."""

    def unpack(self, lines: list[str], packed: str, prefix: str) -> tuple[str, list[str]]: ...


# A tree's code for a dense block: ``(lay, tree, prefix, scores, nodes, bits, globals, key) ->
# (code, scores, nodes, bits, last label)`` (``_tree_ir``, ``ir_branchy.branchy_tree_ir``).
TreeIR = Callable[
    [Layout, int, str, list[str], str, list[str], list[str], str],
    tuple[list[str], list[str], str, list[str], str],
]


def module_irs(
    lay: Layout,
    key: str,
    trees_per_module: int,
    blocks: list[tuple[int, int]] | None = None,
    block_ir: Callable[[Layout, int, int, int, str], str] | None = None,
    decl: str = "",
    tree_ir: TreeIR | None = None,
    packing: Packing | None = None,
) -> list[str]:
    """The IR modules: the blocks (about ``trees_per_module`` trees each), then ``run``.

    ``blocks`` and ``block_ir`` default to the scalar blocks of this module; ``ir_vector``
    passes its own, which define vector blocks next to scalar ones (``run`` then takes the
    vector blocks for groups of at least ``VECTOR_ROWS`` rows). ``decl`` is prepended to every
    block module. ``tree_ir`` makes the scalar blocks' trees (default ``_tree_ir``; the branchy
    blocks pass ``ir_branchy.branchy_tree_ir``, with its ``packing`` of the counters)."""
    blocks = blocks_of(len(lay.order)) if blocks is None else blocks
    vector = block_ir is not None and block_ir is not scalar_block_ir

    def scalar(lay: Layout, p0: int, k: int, b: int, key: str) -> str:
        return scalar_block_ir(lay, p0, k, b, key, tree_ir, packing)

    block_ir = block_ir if vector and block_ir is not None else scalar
    decl += "declare double @llvm.fabs.f64(double)\ndeclare double @llvm.floor.f64(double)\n" + _bins_helper(
        key
    )
    modules, current, trees = [], [], 0
    for b, (p, k) in enumerate(blocks):
        current.append(block_ir(lay, p, k, b, key))
        trees += k
        if trees >= trees_per_module or b == len(blocks) - 1:
            modules.append(decl + "\n".join(current))
            current, trees = [], 0
    modules.append(_run_ir(len(blocks), key, vector=vector))
    return modules


def _run_ir(n_blocks: int, key: str, vector: bool = False) -> str:
    """``run(X, S, T, touched, rows, m, n)``: every block over each group of rows; with
    ``vector``, block ``b`` runs as ``vblock_b`` while at least ``VECTOR_ROWS`` rows are left."""
    sig = "ptr %X, ptr %S, ptr %T, ptr %touched, ptr %rows, i64 %m, i64 %n"
    kinds = ("block", "vblock") if vector else ("block",)
    decls = "\n".join(f"declare i64 @{kind}_{key}_{b}({sig})" for b in range(n_blocks) for kind in kinds)
    body = [
        f"define void @run_{key}({sig}) {{",
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
    args = "(ptr %X, ptr %S, ptr %T, ptr %touched, ptr %wl, i64 %g{b}, i64 %n)"
    for b in range(n_blocks):
        nxt = f"%b{b + 1}" if b + 1 < n_blocks else "%next"
        call = f"call i64 @block_{key}_{b}" + args.format(b=b)
        if vector:
            # One row wastes seven of eight lanes: the scalar block serves it faster.
            body += [
                f"b{b}:",
                f"  %w{b} = icmp sge i64 %g{b}, {VECTOR_ROWS}",
                f"  br i1 %w{b}, label %bv{b}, label %bs{b}",
                f"bv{b}:",
                f"  %gv{b} = call i64 @vblock_{key}_{b}" + args.format(b=b),
                f"  br label %bj{b}",
                f"bs{b}:",
                f"  %gs{b} = {call}",
                f"  br label %bj{b}",
                f"bj{b}:",
                f"  %g{b + 1} = phi i64 [%gv{b}, %bv{b}], [%gs{b}, %bs{b}]",
            ]
        else:
            body += [f"b{b}:", f"  %g{b + 1} = {call}"]
        body += [f"  %e{b} = icmp eq i64 %g{b + 1}, 0", f"  br i1 %e{b}, label %next, label {nxt}"]
    body += [
        "next:",
        f"  %lo1 = add i64 %lo, {ROW_GROUP}",
        "  br label %group",
        "done:",
        "  ret void",
        "}",
    ]
    return decls + "\n" + "\n".join(body) + "\n"


def _bins_helper(key: str) -> str:
    """``bins(g, p, T, frozen) -> i64``: Fan et al.'s bin exit of position ``p``: 1 or -1 to
    exit, 0 to go on; a score outside the table freezes the row (``interpret.kernels._exit_after``)."""
    t = {name: i for i, name in enumerate(TABLES)}
    return f"""
define private i64 @bins_{key}(double %g, i64 %p, ptr %T, ptr %fz) alwaysinline {{
entry:
  %wa = getelementptr ptr, ptr %T, i64 {t["bin_width"]}
  %wt = load ptr, ptr %wa
  %wp = getelementptr double, ptr %wt, i64 %p
  %w = load double, ptr %wp
  %has = fcmp ogt double %w, 0.0
  br i1 %has, label %body, label %none
body:
  %q = fdiv double %g, %w
  %b = call double @llvm.floor.f64(double %q)
  %ab = call double @llvm.fabs.f64(double %b)
  %fin = fcmp olt double %ab, {_INF}
  br i1 %fin, label %search, label %freeze
search:
  %pa = getelementptr ptr, ptr %T, i64 {t["bin_ptr"]}
  %pt = load ptr, ptr %pa
  %s0p = getelementptr i64, ptr %pt, i64 %p
  %start = load i64, ptr %s0p
  %p1 = add i64 %p, 1
  %e0p = getelementptr i64, ptr %pt, i64 %p1
  %end = load i64, ptr %e0p
  %ka = getelementptr ptr, ptr %T, i64 {t["bin_key"]}
  %keys = load ptr, ptr %ka
  br label %loop
loop:
  %lo = phi i64 [%start, %search], [%lo2, %step]
  %hi = phi i64 [%end, %search], [%hi2, %step]
  %open = icmp slt i64 %lo, %hi
  br i1 %open, label %step, label %found
step:
  %sum = add i64 %lo, %hi
  %mid = lshr i64 %sum, 1
  %kp = getelementptr double, ptr %keys, i64 %mid
  %kv = load double, ptr %kp
  %below = fcmp olt double %kv, %b
  %mid1 = add i64 %mid, 1
  %lo2 = select i1 %below, i64 %mid1, i64 %lo
  %hi2 = select i1 %below, i64 %hi, i64 %mid
  br label %loop
found:
  %inside = icmp slt i64 %lo, %end
  br i1 %inside, label %check, label %freeze
check:
  %fkp = getelementptr double, ptr %keys, i64 %lo
  %fk = load double, ptr %fkp
  %same = fcmp oeq double %fk, %b
  br i1 %same, label %decide, label %freeze
decide:
  %ppa = getelementptr ptr, ptr %T, i64 {t["bin_pos"]}
  %ppt = load ptr, ptr %ppa
  %pvp = getelementptr double, ptr %ppt, i64 %lo
  %pv = load double, ptr %pvp
  %gp = fcmp ogt double %g, %pv
  br i1 %gp, label %pos, label %negc
negc:
  %npa = getelementptr ptr, ptr %T, i64 {t["bin_neg"]}
  %npt = load ptr, ptr %npa
  %nvp = getelementptr double, ptr %npt, i64 %lo
  %nv = load double, ptr %nvp
  %gn = fcmp olt double %g, %nv
  %r = select i1 %gn, i64 -1, i64 0
  ret i64 %r
pos:
  ret i64 1
freeze:
  store i64 1, ptr %fz
  ret i64 0
none:
  ret i64 0
}}
"""


def scalar_block_ir(
    lay: Layout,
    p0: int,
    k: int,
    b: int,
    key: str,
    tree_ir: TreeIR | None = None,
    packing: Packing | None = None,
) -> str:
    """Block ``b`` (positions ``[p0, p0 + k)``) as ``block(X, S, T, touched, rows, m, n) ->
    kept``: the rows ``rows[:m]`` that did not exit, compacted to the front of ``rows``; each
    tree's code made by ``tree_ir`` (default ``_tree_ir``). With ``packing``, the trees add to
    one packed word of counters from 0 (``nodes``; ``bits`` stay the row's), unpacked into the
    row's node count and bits where the row's state is stored."""
    tree_ir = _tree_ir if tree_ir is None else tree_ir
    K, F = lay.K, lay.F
    t = {name: i for i, name in enumerate(TABLES)}
    off = {name: (K + j) for j, name in enumerate(state_fields(lay.words))}
    head = [
        f"define i64 @block_{key}_{b}(ptr noalias %X, ptr noalias %S, ptr noalias %T, "
        "ptr noalias %touched, ptr noalias %rows, i64 %m, i64 %n) {",
        "entry:",
    ]
    for name in ("leaf", "eps_pos", "eps_neg"):
        head += [
            f"  %{name}a = getelementptr ptr, ptr %T, i64 {t[name]}",
            f"  %{name} = load ptr, ptr %{name}a",
        ]
    # Field f of row i is S[f * n + i] (raw scores: field c < K).
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
    ]
    acc = []
    for c in range(K):
        head += [
            f"  %rawi{c} = mul i64 %n, {c}",
            f"  %rawj{c} = add i64 %rawi{c}, %i",
            f"  %rawp{c} = getelementptr double, ptr %S, i64 %rawj{c}",
            f"  %acc{c}_0 = load double, ptr %rawp{c}",
        ]
        acc.append(f"%acc{c}_0")
    # The tested-feature set: one word per 64 features (``layout.state_fields``).
    for name in ("nodes", *(word_field("bits", w) for w in range(lay.words))):
        head += [
            f"  %{name}p = getelementptr i64, ptr %{name}S, i64 %i",
            f"  %{name}_0 = load i64, ptr %{name}p",
        ]
    head += [
        "  %frozenp = getelementptr i64, ptr %frozenS, i64 %i",
        "  br label %t0_start",
    ]
    lines: list[str] = []
    globals_: list[str] = []
    exits: list[tuple[str, str, list[str], str, list[str], int]] = []  # (pred, dir, accs, nodes, bits, pos)
    nodes, bits = "%nodes_0", [f"%{word_field('bits', w)}_0" for w in range(lay.words)]
    if packing is not None:
        nodes = "0"
    for j in range(k):
        p = p0 + j
        tree = int(lay.order[p])
        after = f"%t{j + 1}_start" if j + 1 < k else "%rowend"
        code, acc, nodes, bits, site = tree_ir(lay, tree, f"t{j}_", acc, nodes, bits, globals_, key)
        lines += code
        kind = int(lay.exits[p])
        if not kind:
            lines.append(f"  br label {after}")
            continue
        x = f"t{j}_x"
        g = exit_score_ir(lines, lay.finish, acc, x, _margin)
        if lay.any_bins:
            # A row frozen by a bin table (its score fell outside it) never exits again.
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
            f"  br i1 %{x}gp, label %rowexit, label %{x}neg",
            f"{x}neg:",
            f"  %{x}enp = getelementptr double, ptr %eps_neg, i64 {p}",
            f"  %{x}en = load double, ptr %{x}enp",
            f"  %{x}gn = fcmp olt double {g}, %{x}en",
        ]
        exits.append((f"%{x}pos" if lay.any_bins else f"%{site}", "1", acc, nodes, bits, p + 1))
        exits.append((f"%{x}neg", "-1", acc, nodes, bits, p + 1))
        if kind == 2:
            lines += [
                f"  br i1 %{x}gn, label %rowexit, label %{x}bin",
                f"{x}bin:",
                f"  %{x}bc = call i64 @bins_{key}(double {g}, i64 {p}, ptr %T, ptr %frozenp)",
                f"  %{x}bz = icmp eq i64 %{x}bc, 0",
                f"  br i1 %{x}bz, label {after}, label %rowexit",
            ]
            exits.append((f"%{x}bin", f"%{x}bc", acc, nodes, bits, p + 1))
        else:
            lines.append(f"  br i1 %{x}gn, label %rowexit, label {after}")
    tail = ["rowend:"]
    if packing is not None:
        nodes, bits = packing.unpack(tail, nodes, "e")
    tail += _store_state(acc, nodes, bits, f"{p0 + k}", None)
    tail += [
        "  %kp = getelementptr i64, ptr %rows, i64 %kept",
        "  store i64 %i, ptr %kp",
        "  %kept_in = add i64 %kept, 1",
        "  br label %cont",
    ]
    if exits:
        tail.append("rowexit:")
        preds = [e[0] for e in exits]

        def phi(name: str, ty: str, values: list[str]) -> str:
            return f"  %{name} = phi {ty} " + ", ".join(f"[{v}, {q}]" for v, q in zip(values, preds))

        tail.append(phi("xdir", "i64", [e[1] for e in exits]))
        tail += [phi(f"xacc{c}", "double", [e[2][c] for e in exits]) for c in range(K)]
        tail.append(phi("xnodes", "i64", [e[3] for e in exits]))
        tail += [phi(f"xbits{w}", "i64", [e[4][w] for e in exits]) for w in range(lay.words)]
        tail.append(phi("xpos", "i64", [str(e[5]) for e in exits]))
        xnodes, xbits = "%xnodes", [f"%xbits{w}" for w in range(lay.words)]
        if packing is not None:
            xnodes, xbits = packing.unpack(tail, xnodes, "x")
        tail += _store_state([f"%xacc{c}" for c in range(K)], xnodes, xbits, "%xpos", "%xdir")
        tail.append("  br label %cont")
    tail += [
        "cont:",
        "  %kept1 = phi i64 [%kept_in, %rowend]" + (", [%kept, %rowexit]" if exits else ""),
        "  %a1 = add i64 %a, 1",
        "  br label %loop",
        "exit:",
        "  ret i64 %kept",
        "}",
    ]
    return "\n".join(globals_ + head + lines + tail) + "\n"


def _store_state(acc: list[str], nodes: str, bits: list[str], pos: str, direction: str | None) -> list[str]:
    out = [f"  store double {a}, ptr %rawp{c}" for c, a in enumerate(acc)]
    out.append(f"  store i64 {nodes}, ptr %nodesp")
    out += [f"  store i64 {b}, ptr %{word_field('bits', w)}p" for w, b in enumerate(bits)]
    out += ["  %posp = getelementptr i64, ptr %posS, i64 %i"] if direction is None else []
    if direction is None:
        out.append(f"  store i64 {pos}, ptr %posp")
    else:
        out += [
            "  %xposp = getelementptr i64, ptr %posS, i64 %i",
            f"  store i64 {pos}, ptr %xposp",
            "  %xdirp = getelementptr i64, ptr %dirS, i64 %i",
            f"  store i64 {direction}, ptr %xdirp",
        ]
    return out


def _margin(lines: list[str], acc: list[str], x: str) -> str:
    """The leading score's margin over the runner-up (``interpret.kernels._exit_score``)."""
    top, second = _INF.replace("7FF", "FFF"), _INF.replace("7FF", "FFF")
    for c, v in enumerate(acc):
        lines += [
            f"  %{x}gt{c} = fcmp ogt double {v}, {top}",
            f"  %{x}gs{c} = fcmp ogt double {v}, {second}",
            f"  %{x}s2{c} = select i1 %{x}gs{c}, double {v}, double {second}",
            f"  %{x}s{c} = select i1 %{x}gt{c}, double {top}, double %{x}s2{c}",
            f"  %{x}t{c} = select i1 %{x}gt{c}, double {v}, double {top}",
        ]
        top, second = f"%{x}t{c}", f"%{x}s{c}"
    lines.append(f"  %{x}g = fsub double {top}, {second}")
    return f"%{x}g"


def _tree_ir(
    lay: Layout,
    t: int,
    x: str,
    acc: list[str],
    nodes: str,
    bits: list[str],
    globals_: list[str],
    key: str,
    guard: list[tuple[int, int]] | None = None,
) -> tuple[list[str], list[str], str, list[str], str]:
    """Tree ``t`` for the row at ``%row`` (names prefixed ``x``), then its leaf's value added
    to ``acc``, its path's splits to ``nodes`` and features to the words ``bits`` of the
    tested-feature set (all ``lay.words`` of them; with none, the lazy blocks of a forest of
    more than 64 features, to the row's bytes of ``touched`` at ``%trow``). Returns the code,
    the new values and the label the code ends in.

    With ``guard`` (lazy blocks, ``ir_lazy``), each split first reads whether its feature is
    known in the row's ``%krow`` and, when it is not, branches to ``%{x}blk`` (the split's node
    and feature are appended to ``guard``, for that label's phis)."""
    lines, leaves = walk_ir(lay, t, x, globals_, key, touched=not bits, guard=guard)
    # A leaf's record: weighted values (one per output), the splits on its path and the
    # features that path tests as bits (tables keep the code small: one constant per leaf).
    R = lay.K + 1 + lay.words
    lines += [
        f"{x}leaf:",
        f"  %{x}id = phi i64 " + ", ".join(f"[{leaf}, %{x}n{leaf}]" for leaf in leaves),
        f"  %{x}r = mul i64 %{x}id, {R}",
        f"  %{x}dj = add i64 %{x}r, {lay.K}",
        f"  %{x}dpp = getelementptr i64, ptr %leaf, i64 %{x}dj",
        f"  %{x}dp = load i64, ptr %{x}dpp",
        f"  %{x}nodes = add i64 {nodes}, %{x}dp",
    ]
    bits = list(bits)
    # Only the words this tree's features lie in can change.
    for w in lay.tree_words(t) if bits else ():
        lines += [
            f"  %{x}mj{w} = add i64 %{x}r, {lay.K + 1 + w}",
            f"  %{x}mkp{w} = getelementptr i64, ptr %leaf, i64 %{x}mj{w}",
            f"  %{x}mk{w} = load i64, ptr %{x}mkp{w}",
            f"  %{x}bits{w} = or i64 {bits[w]}, %{x}mk{w}",
        ]
        bits[w] = f"%{x}bits{w}"
    code, acc = leaf_values_ir(lay, t, x, acc)
    return lines + code, acc, f"%{x}nodes", bits, f"{x}leaf"


def walk_ir(
    lay: Layout,
    t: int,
    x: str,
    globals_: list[str],
    key: str,
    touched: bool = False,
    guard: list[tuple[int, int]] | None = None,
) -> tuple[list[str], list[int]]:
    """Tree ``t``'s walk for the row at ``%row`` (names prefixed ``x``), each leaf ``n`` a label
    ``%{x}n{n}`` branching to ``%{x}leaf``: the code and the leaves in label order. ``touched``
    and ``guard``: as ``_tree_ir``'s lazy blocks need (tested features marked at ``%trow``, each
    split's feature checked known first)."""
    f = lay.forest
    lines = [f"{x}start:", f"  br label %{x}n{int(f.roots[t])}"]
    leaves: list[int] = []
    stack = [int(f.roots[t])]
    while stack:
        node = stack.pop()
        feat = int(f.feature[node])
        n = f"{x}n{node}"
        if feat < 0:
            leaves.append(node)
            lines.append(f"{n}:")
            if touched:
                for e in range(lay.path_ptr[node], lay.path_ptr[node + 1]):
                    q = int(lay.path_feat[e])
                    lines += [
                        f"  %{n}tp{q} = getelementptr i8, ptr %trow, i64 {q}",
                        f"  store i8 1, ptr %{n}tp{q}",
                    ]
            lines.append(f"  br label %{x}leaf")
            continue
        left, right = f"%{x}n{int(f.children_left[node])}", f"%{x}n{int(f.children_right[node])}"
        stack += [int(f.children_right[node]), int(f.children_left[node])]
        if guard is not None:
            guard.append((node, feat))
            lines += [
                f"{n}:",
                f"  %{n}gq = getelementptr i8, ptr %krow, i64 {feat}",
                f"  %{n}gv = load i8, ptr %{n}gq",
                f"  %{n}go = icmp ne i8 %{n}gv, 0",
                f"  br i1 %{n}go, label %{n}k, label %{x}blk",
            ]
            n += "k"
        lines += _split_ir(f, node, feat, n, left, right, globals_, key)
    return lines, leaves


def leaf_values_ir(lay: Layout, t: int, x: str, acc: list[str]) -> tuple[list[str], list[str]]:
    """Tree ``t``'s leaf values added to the scores ``acc``, read from the leaf's record at
    ``%{x}r`` in the table ``%leaf``. Returns the code and the new scores."""
    cls = int(lay.forest.tree_class[t])
    acc = list(acc)
    lines: list[str] = []
    for o in [cls] if cls >= 0 else range(lay.K):
        # Class trees add the record's first value to their output; vector leaves value o.
        v = f"%{x}v{o}"
        lines += [
            f"  %{x}w{o}j = add i64 %{x}r, {0 if cls >= 0 else o}",
            f"  %{x}w{o}p = getelementptr double, ptr %leaf, i64 %{x}w{o}j",
            f"  %{x}w{o} = load double, ptr %{x}w{o}p",
        ]
        if lay.acc32:
            # XGBoost sums in float32 (the table holds float32(weight * value)).
            lines += [
                f"  {v}s = fadd double {acc[o]}, %{x}w{o}",
                f"  {v}f = fptrunc double {v}s to float",
                f"  {v} = fpext float {v}f to double",
            ]
        else:
            lines.append(f"  {v} = fadd double {acc[o]}, %{x}w{o}")
        acc[o] = v
    return lines, acc


def _split_ir(
    f: Forest, node: int, feat: int, n: str, left: str, right: str, globals_: list[str], key: str
) -> list[str]:
    """One split node: load the feature, branch left or right (``_traverse.next_node``)."""
    default = left if f.missing_left[node] else right
    v = f"%{n}v"
    lines = [
        f"{n}:",
        f"  %{n}p = getelementptr double, ptr %row, i64 {feat}",
        f"  {v} = load double, ptr %{n}p",
    ]
    if f.cat_start[node] >= 0:
        words = f.cat_bitsets[f.cat_start[node] : f.cat_start[node] + f.cat_size[node]]
        name = f"@cat_{key}_{node}"
        if not any(g.startswith(name + " ") for g in globals_):
            globals_.append(
                f"{name} = private unnamed_addr constant [{len(words)} x i32] ["
                + ", ".join(f"i32 {int(w)}" for w in words)
                + "]"
            )
        return lines + [
            f"  %{n}nan = fcmp uno double {v}, 0.0",
            f"  br i1 %{n}nan, label {default}, label %{n}c",
            f"{n}c:",
            f"  %{n}gt = fcmp ogt double {v}, -1.0",
            f"  %{n}lt = fcmp olt double {v}, {double(32.0 * len(words))}",
            f"  %{n}in = and i1 %{n}gt, %{n}lt",
            f"  br i1 %{n}in, label %{n}b, label {right}",
            f"{n}b:",
            # fptosi truncates toward zero, as the interpreter's int() does.
            f"  %{n}code = fptosi double {v} to i32",
            f"  %{n}w = lshr i32 %{n}code, 5",
            f"  %{n}s = and i32 %{n}code, 31",
            f"  %{n}wp = getelementptr [{len(words)} x i32], ptr {name}, i32 0, i32 %{n}w",
            f"  %{n}word = load i32, ptr %{n}wp",
            f"  %{n}bits = lshr i32 %{n}word, %{n}s",
            f"  %{n}bit = trunc i32 %{n}bits to i1",
            f"  br i1 %{n}bit, label {left}, label {right}",
        ]
    thr = double(f.threshold[node])
    mt = int(f.missing_type[node])
    if np.isnan(f.threshold[node]) and mt != MISSING_ZERO:
        # No value is <= NaN: NaN takes the default child (or, read as 0.0, goes right).
        target = default if mt != MISSING_AS_ZERO else right
        return lines + [
            f"  %{n}nan = fcmp uno double {v}, 0.0",
            f"  br i1 %{n}nan, label {target}, label {right}",
        ]
    if mt == MISSING_ZERO:
        return lines + [
            f"  %{n}a = call double @llvm.fabs.f64(double {v})",
            f"  %{n}z = fcmp ule double %{n}a, {double(ZERO)}",
            f"  br i1 %{n}z, label {default}, label %{n}c",
            f"{n}c:",
            f"  %{n}le = fcmp ole double {v}, {thr}",
            f"  br i1 %{n}le, label {left}, label {right}",
        ]
    # NaN goes to the default child (MISSING_NAN) or is read as 0.0 (MISSING_AS_ZERO): an
    # unordered comparison sends NaN left, an ordered one right.
    nan_left = (0.0 <= f.threshold[node]) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
    return lines + [
        f"  %{n}le = fcmp {'ule' if nan_left else 'ole'} double {v}, {thr}",
        f"  br i1 %{n}le, label {left}, label {right}",
    ]
