"""Which kind of blocks a forest plan compiles to: vector blocks (``ir_vector``, every split of
a tree tested for eight rows at once) or scalar blocks (``ir_scalar``, one branch per split
visited).

The choice is made once per forest plan at compile time (it is part of the cache key). Forcing
one kind (``THRIFTY_BLOCKS``) is for measuring the other; both kinds give the interpreter's
results bit for bit. The rule, vector blocks wherever the plan allows them and the target
(``targets.current``) has vector lanes, was measured with AVX-512 against both kinds forced on
seven models (docs/runtime.md, "Which kind"): scalar blocks were faster only on lleaves'
NYC_taxi (rows visit 3 of a tree's 30 splits) on calls of 10 to 100 rows, by at most 25%, and
level in batch; vector blocks were faster everywhere else, by 1.5 to 3.9 times in batch.
"""

from __future__ import annotations

import os

from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled.ir_vector import vector_ok
from thrifty.runtime.compiled.layout import Layout

# Environment variable forcing the kind of blocks: "vector", "scalar" or "auto" (the rule).
BLOCKS_ENV = "THRIFTY_BLOCKS"
KINDS = ("auto", "vector", "scalar")


def forced_kind() -> str:
    """``THRIFTY_BLOCKS`` (default ``"auto"``), checked."""
    kind = os.environ.get(BLOCKS_ENV, "auto").strip().lower() or "auto"
    if kind not in KINDS:
        raise InvalidParameterError(
            f"{BLOCKS_ENV}={os.environ[BLOCKS_ENV]!r} is not a kind of blocks: "
            f"set it to one of {KINDS} or unset it"
        )
    return kind


def vector_blocks(lay: Layout, lanes: int) -> bool:
    """Whether the plan ``lay`` compiles to vector blocks.

    Parameters
    ----------
    lay : Layout
        The forest, the plan's order and exit kinds.
    lanes : int
        The target's float64 lanes per vector (``targets.Target.lanes``; 0 for the scalar
        target, which has no vector blocks to force).

    Returns
    -------
    bool
        False when the plan cannot take vector blocks (``ir_vector.vector_ok``: bin exits, trees
        past ``VECTOR_LEAVES`` leaves); else the forced kind, when ``THRIFTY_BLOCKS`` forces
        one; else whether the target has lanes.
    """
    if not vector_ok(lay) or lanes == 0:
        return False
    kind = forced_kind()
    if kind != "auto":
        return kind == "vector"
    return True
