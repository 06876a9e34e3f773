"""Exit tables of forest plans: per-position thresholds, Fan et al.'s binned exits, and the
thresholds on a base_last forest's tree sums that decide as thresholds on its raw scores."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.io import decode_array, encode_array


class BinnedExits:
    """Per-bin exit thresholds of each position (Fan et al. 2002's dynamic scheduling).

    After position ``r`` the partial score ``g`` falls in bin ``floor(g / width[r])``; a bin in
    the table of position ``r`` exits positive when ``g > pos`` and negative when ``g < neg``;
    a bin missing from the table means "evaluate this example in full" (no further exits).
    ``width[r] == 0`` gives position ``r`` no table.

    Parameters
    ----------
    width : array-like of shape (n_positions,)
    tables : sequence of mappings ``{bin: (pos, neg)}``, one per position
    """

    def __init__(self, width: ArrayLike, tables: Sequence[dict[int, tuple[float, float]]]) -> None:
        self.width = np.asarray(width, dtype=np.float64)
        if len(tables) != len(self.width):
            raise InputError(f"{len(tables)} bin tables for {len(self.width)} positions")
        if np.any(~np.isfinite(self.width)) or np.any(self.width < 0):
            raise InputError("bin widths must be finite and >= 0")
        keys, pos, neg = [], [], []
        self.ptr = np.zeros(len(tables) + 1, dtype=np.int64)
        for r, table in enumerate(tables):
            for b in sorted(table):
                p_, n_ = table[b]
                if np.isnan(p_) or np.isnan(n_) or n_ > p_:
                    raise InputError(f"bin {b} of position {r}: thresholds must satisfy neg <= pos")
                keys.append(float(b))
                pos.append(float(p_))
                neg.append(float(n_))
            self.ptr[r + 1] = len(keys)
        self.key = np.asarray(keys, dtype=np.float64)
        self.pos = np.asarray(pos, dtype=np.float64)
        self.neg = np.asarray(neg, dtype=np.float64)

    def tables(self) -> list[dict[int, tuple[float, float]]]:
        return [
            {
                int(self.key[j]): (float(self.pos[j]), float(self.neg[j]))
                for j in range(self.ptr[r], self.ptr[r + 1])
            }
            for r in range(len(self.width))
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "width": encode_array(self.width),
            "ptr": encode_array(self.ptr),
            "key": encode_array(self.key),
            "pos": encode_array(self.pos),
            "neg": encode_array(self.neg),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BinnedExits:
        return cls._of(**{name: decode_array(d[name]) for name in ("width", "ptr", "key", "pos", "neg")})

    @classmethod
    def none(cls, n_positions: int) -> BinnedExits:
        """No bin tables at any of ``n_positions`` positions."""
        empty = np.zeros(0, dtype=np.float64)
        return cls._of(np.zeros(n_positions), np.zeros(n_positions + 1, np.int64), empty, empty, empty)

    @classmethod
    def _of(
        cls, width: np.ndarray, ptr: np.ndarray, key: np.ndarray, pos: np.ndarray, neg: np.ndarray
    ) -> BinnedExits:
        out = cls.__new__(cls)
        out.width, out.ptr, out.key, out.pos, out.neg = width, ptr, key, pos, neg
        return out


@dataclass(frozen=True)
class Schedule:
    """The trees a forest plan visits, in order, with each position's exits (see ``Sequential``).

    ``full`` is True when every tree is visited in forest order with no exit at all.
    ``finish`` is empty when exits compare the engines' running sums themselves, else
    ``[scale, base_0, .., base_{K-1}]``: exits compare ``scale * sum_k + base_k`` (a
    ``base_last`` forest's raw score if the row stopped there, ``Forest.finish``'s expression),
    as margins and bins of such forests need (``plans._base_last_exits``).
    """

    order: np.ndarray
    eps_pos: np.ndarray
    eps_neg: np.ndarray
    bins: BinnedExits
    full: bool
    finish: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @cached_property
    def thresholds(self) -> np.ndarray:
        """Per position, whether its thresholds can exit a row: ``eps_pos < inf`` or ``eps_neg
        > -inf`` (``eps_pos = -inf`` exits every row with a score, not none)."""
        return (self.eps_pos < np.inf) | (self.eps_neg > -np.inf)

    @cached_property
    def segment_last(self) -> np.ndarray:
        """Per position ``p`` (and one past the last), the last position of ``p``'s segment:
        the first position at or after ``p`` with an exit (thresholds or bins), else the last
        position. The trees of a segment are all evaluated once a row enters it, whatever their
        values (lazy evaluation's parallel rounds walk them together)."""
        n = len(self.order)
        end = max(n - 1, 0)
        exits = self.thresholds | (self.bins.width > 0)
        at = np.where(exits, np.arange(n), end)
        # The nearest exit at or after p: a running minimum from the end.
        return np.append(np.minimum.accumulate(at[::-1])[::-1], end).astype(np.int64)

    @cached_property
    def exits(self) -> tuple[np.ndarray, ...]:
        """Every position's exit tables in one record, as the kernels take them (like
        ``Forest.nodes``): ``eps_pos``, ``eps_neg``, the bins' ``width``, ``ptr``, ``key``,
        ``pos``, ``neg``, and ``finish``."""
        b = self.bins
        return (self.eps_pos, self.eps_neg, b.width, b.ptr, b.key, b.pos, b.neg, self.finish)


# Doubles as integers in the order of their values (both zeros at 0): the bisection below
# searches this order, in which every double is one step from the next.
_SIGN = np.int64(-0x8000000000000000)
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)
_INF_KEY = np.int64(0x7FF0000000000000)


def _key(x: np.ndarray) -> np.ndarray:
    bits = np.asarray(x, dtype=np.float64).view(np.int64)
    return np.where(bits >= 0, bits, -(bits & _MAGNITUDE))


def _double(k: np.ndarray) -> np.ndarray:
    return np.where(k >= 0, k, (-k) | _SIGN).astype(np.int64).view(np.float64)


def sum_thresholds(forest: Forest, eps_pos: np.ndarray, eps_neg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exit thresholds on a ``base_last`` forest's tree sums that decide as the user's thresholds
    on its raw scores do, bit for bit.

    The engines sum a ``base_last`` forest's trees from zero and form the raw score
    ``f(a) = scale * a + base_score`` only at the end (``Forest.finish``); an exit compares the
    raw score the row would have if it stopped there, ``f(a) > eps_pos`` or ``f(a) < eps_neg``.
    With ``scale > 0``, ``f`` rounded is non-decreasing over the doubles, so ``f(a) > eps`` holds
    exactly for ``a`` above the largest double ``a*`` with ``f(a*) <= eps``, and ``f(a) < eps``
    exactly for ``a`` below the smallest double with ``f(a) >= eps``: the thresholds returned.
    Each is found by bisection over the doubles in order (64 steps), so the engines compare the
    sums against them unchanged.
    """
    scale, base = forest.scale, float(forest.base_score[0])

    def last(eps: np.ndarray, strict: bool) -> np.ndarray:
        """Order key of the largest double ``a`` with ``f(a) <= eps`` (``< eps`` when strict),
        or one below -inf's when there is none."""

        def holds(k: np.ndarray) -> np.ndarray:
            with np.errstate(over="ignore", invalid="ignore"):
                v = scale * _double(k) + base
            return v < eps if strict else v <= eps

        # Invariant: ``holds`` at lo (one below -inf's key: by convention), not at hi.
        lo = np.full(eps.shape, -_INF_KEY - 1)
        hi = np.full(eps.shape, _INF_KEY)
        top = holds(hi)
        lo[top] = hi[top]
        # Keys span more than int64 holds as a difference: halve them before adding.
        active = hi - 1 > lo
        while np.any(active):
            mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)
            ok = holds(mid)
            lo = np.where(active & ok, mid, lo)
            hi = np.where(active & ~ok, mid, hi)
            active = hi - 1 > lo
        return lo

    def as_double(k: np.ndarray) -> np.ndarray:
        out = _double(np.clip(k, -_INF_KEY, _INF_KEY))
        return np.where(k < -_INF_KEY, -np.inf, out)

    pos = as_double(last(np.asarray(eps_pos, dtype=np.float64), strict=False))
    below = last(np.asarray(eps_neg, dtype=np.float64), strict=True)
    # The smallest double with f >= eps is the one after the largest with f < eps.
    neg = np.where(below < -_INF_KEY, -np.inf, as_double(below + 1))
    return pos, neg
