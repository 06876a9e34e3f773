"""LLVM IR for a Linear plan (ADAPT-LIN's gate and low-cost model): a dot product per output.

``lrun(X, R, touched, rows, m, n)`` writes output ``k`` of row ``i`` (of the rows ``rows[:m]``
of the float64 C-contiguous ``X``) to ``R[k * n + i]``: ``intercept[k]`` plus
``coef[f, k] * X[i, f]`` over the features the model reads, in their order, each product
rounded before it is added, as the interpreter's ``interpret.kernels.run_linear`` computes it
(so NaN and infinities give the interpreter's results, and a zero coefficient of one output
still multiplies its feature). It marks those features in row ``i`` of ``touched`` (a byte per
feature). Coefficients are constants written bit for bit.
"""

from __future__ import annotations

from thrifty.runtime.compiled.layout import double
from thrifty.runtime.models import Linear


def linear_ir(model: Linear, key: str) -> str:
    """The module defining ``lrun_{key}`` for ``model``."""
    F, K = model.n_features, model.n_outputs
    features = model.features.tolist()
    lines = [
        f"define void @lrun_{key}(ptr noalias %X, ptr noalias %R, ptr noalias %touched, ptr noalias %rows, "
        "i64 %m, i64 %n) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %a = phi i64 [0, %entry], [%a1, %body]",
        "  %end = icmp sge i64 %a, %m",
        "  br i1 %end, label %exit, label %body",
        "body:",
        "  %rp = getelementptr i64, ptr %rows, i64 %a",
        "  %i = load i64, ptr %rp",
        f"  %xo = mul i64 %i, {F}",
        "  %row = getelementptr double, ptr %X, i64 %xo",
        "  %trow = getelementptr i8, ptr %touched, i64 %xo",
    ]
    for f in features:
        lines += [
            f"  %x{f}p = getelementptr double, ptr %row, i64 {f}",
            f"  %x{f} = load double, ptr %x{f}p",
            f"  %t{f}p = getelementptr i8, ptr %trow, i64 {f}",
            f"  store i8 1, ptr %t{f}p",
        ]
    for k in range(K):
        r = double(model.intercept[k])
        for f in features:
            lines += [
                f"  %p{k}_{f} = fmul double {double(model.coef[f, k])}, %x{f}",
                f"  %r{k}_{f} = fadd double {r}, %p{k}_{f}",
            ]
            r = f"%r{k}_{f}"
        lines += [
            f"  %o{k} = mul i64 %n, {k}",
            f"  %j{k} = add i64 %o{k}, %i",
            f"  %q{k} = getelementptr double, ptr %R, i64 %j{k}",
            f"  store double {r}, ptr %q{k}",
        ]
    lines += ["  %a1 = add i64 %a, 1", "  br label %loop", "exit:", "  ret void", "}"]
    return "\n".join(lines) + "\n"
