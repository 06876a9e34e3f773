"""One compilation of each of thrifty's numba kernels across compare's worker processes.

Every kernel is cached on disk (``cache=True``), but a cache is empty on a first run (a new
install, or a kernel's source changed) and then each worker compiled each kernel for itself:
on rank_small QWYC's first candidate cost 21 CPU-seconds of compilation in *each* of two
workers at once (62 s of wall time per fold on a loaded machine, against 2 s warm). In a
worker, :func:`install` makes a kernel's compilation hold a lock file of its own, so that a
worker needing a kernel another is compiling waits for it and then loads it from the cache
the other has just written; the compiled code is the same either way.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["PACKAGES", "install", "installed", "lock_dir", "locked", "uninstall"]

_ORIGINAL = "_thrifty_compile"
#: The modules whose kernels compile under a lock (by the start of their names).
PACKAGES: tuple[str, ...] = ("thrifty.",)


def lock_dir() -> Path:
    """The directory of the lock files (one per kernel), shared by the processes of a user."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"thrifty-numba-locks-{uid}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def installed() -> bool:
    """Whether this process compiles thrifty's kernels under their locks."""
    from numba.core.dispatcher import Dispatcher

    return hasattr(Dispatcher, _ORIGINAL)


def install() -> None:
    """Compile each of thrifty's cached kernels under a lock file of its own (this process).

    Nothing on a system without ``fcntl`` (Windows): there each worker compiles for itself,
    as before. A kernel already compiled in this process, or one not cached on disk, or not
    thrifty's, takes no lock.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return
    from numba.core import sigutils
    from numba.core.dispatcher import Dispatcher

    if installed():
        return
    original = Dispatcher.compile
    directory = lock_dir()
    held: set[str] = set()  # this process's locks: a recursive kernel takes its own once

    def compile(self: Any, sig: Any) -> Any:  # noqa: A001 - numba's method name
        func = getattr(self, "py_func", None)
        module = getattr(func, "__module__", "") or ""
        cached = type(getattr(self, "_cache", None)).__name__ not in ("NullCache", "NoneType")
        if func is None or not (cached and module.startswith(PACKAGES)) or _have(self, sig):
            return original(self, sig)
        # Keyed by the kernel's file and name: the cache numba keeps is per kernel too. A
        # kernel compiled under its lock may compile the kernels it calls under theirs: the
        # calls form no cycle, so neither do the locks.
        key = f"{func.__code__.co_filename}:{func.__qualname__}"
        if key in held:
            return original(self, sig)
        path = directory / (hashlib.sha1(key.encode()).hexdigest()[:20] + ".lock")
        with open(path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # released when the file closes, even on an error
            held.add(key)
            try:
                # Compiled by another process meanwhile: numba's compile loads it from the cache.
                return original(self, sig)
            finally:
                held.discard(key)

    def _have(self: Any, sig: Any) -> bool:
        """Whether this process has compiled (or loaded) ``sig`` already: numba asks again
        each time a caller is typed, and the answer needs no lock."""
        args, _ = sigutils.normalize_signature(sig)
        return tuple(args) in self.overloads

    setattr(Dispatcher, _ORIGINAL, original)
    Dispatcher.compile = compile  # type: ignore[method-assign]


def uninstall() -> None:
    """Compile as numba does by itself again (this process)."""
    from numba.core.dispatcher import Dispatcher

    if installed():
        Dispatcher.compile = getattr(Dispatcher, _ORIGINAL)  # type: ignore[method-assign]
        delattr(Dispatcher, _ORIGINAL)


@contextmanager
def locked() -> Iterator[None]:
    """:func:`install` for a block (this process runs fit tasks beside compare's workers), then
    as before: a process that had it installed keeps it."""
    was = installed()
    install()
    try:
        yield
    finally:
        if not was:
            uninstall()
