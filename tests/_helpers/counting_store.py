"""A store provider over a matrix (key = row number) that records every round it answers, for
the serving tests that count store queries."""

from __future__ import annotations

import copy
import threading
import time

import numpy as np

from thrifty.exceptions import MissingKeyError


class CountingStore:
    """Answers rounds from ``X`` after ``delay`` seconds; ``rounds`` lists the keys of each round
    (shared by the copies ``with_keys`` makes)."""

    def __init__(self, X: np.ndarray, *, delay: float = 0.0) -> None:
        self.X, self.delay = X, delay
        self.keys = np.arange(len(X))
        self.rounds: list[list[int]] = []
        self.lock = threading.Lock()

    def with_keys(self, keys) -> CountingStore:
        other = copy.copy(self)
        other.keys = np.asarray(keys)
        return other

    def fetch(self, requests):
        time.sleep(self.delay)
        unknown = [int(k) for _, rows in requests for k in self.keys[rows] if not 0 <= int(k) < len(self.X)]
        if unknown:
            raise MissingKeyError(f"no record with key in {unknown[:5]}", unknown)
        with self.lock:
            self.rounds.append(sorted({int(k) for _, rows in requests for k in self.keys[rows]}))
        return [self.X[self.keys[rows].astype(np.int64), f] for f, rows in requests]

    def asked(self) -> set[int]:
        """Every key some round asked for."""
        return {k for keys in self.rounds for k in keys}
