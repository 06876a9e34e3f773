"""Native code of the plan kinds besides forest plans (``ir_cascade``, ``ir_linear``): their IR
modules compiled with llvmlite (as ``objects`` compiles a forest plan's), kept in the verified
on-disk ``cache`` and loaded into this process."""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Iterable

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from thrifty.runtime.compiled import cache, targets
from thrifty.runtime.compiled.objects import CODEGEN_VERSION, _emit, _target_machine

# Bump when ``ir_cascade`` or ``ir_linear`` change meaning (a function's arguments, the state or
# tables it reads): cached objects of older versions are then ignored (``objects.CODEGEN_VERSION``
# is part of the key too, for the tree code the cascade shares with forest plans).
PLAN_CODE_VERSION = 3


def plan_key(kind: str, parts: Iterable[object]) -> str:
    """Hash of what a plan's native code depends on: its kind, ``parts`` (arrays by dtype,
    shape and bytes; anything else by its text), this generator's version and the target
    (``targets.current``)."""
    h = hashlib.sha256(
        f"{CODEGEN_VERSION}|{PLAN_CODE_VERSION}|{cache.generator_digest()}|{kind}|"
        f"{llvmlite.__version__}|{targets.current().key()}".encode()
    )
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(str(part.dtype).encode() + str(part.shape).encode() + part.tobytes())
        else:
            h.update(b"|" + str(part).encode())
    return h.hexdigest()[:32]


class LoadedCode:
    """IR modules compiled (or loaded from the cache under ``key``) and loaded into this process.

    Parameters
    ----------
    key : str
        The cache key (``plan_key``); function names carry it, so the code of several plans
        lives in one process.
    irs : callable
        ``irs() -> list of IR modules``, called only when the cache has no entry.
    progress : bool
        Say how far compiling is on stderr when it takes more than a few seconds.
    what : str
        What is compiled, for the progress line.

    Attributes
    ----------
    compile_seconds : float
        Time spent compiling (0 when loaded from the cache).
    from_cache : bool
    """

    def __init__(self, key: str, irs: Callable[[], list[str]], *, progress: bool, what: str) -> None:
        self.key = key
        t0 = time.perf_counter()
        objects = cache.read(key)
        self.from_cache = objects is not None
        if objects is None:
            objects = _compile(irs(), progress, what)
            cache.write(key, objects)
        self.compile_seconds = 0.0 if self.from_cache else time.perf_counter() - t0
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        for obj in objects:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()

    def address(self, name: str) -> int:
        """The address of the function ``{name}_{key}``."""
        return int(self._engine.get_function_address(f"{name}_{self.key}"))


def _compile(irs: list[str], progress: bool, what: str) -> list[bytes]:
    t0 = time.perf_counter()
    shown = False
    objects = []
    for done, ir in enumerate(irs, 1):
        objects.append(_emit(ir))
        elapsed = time.perf_counter() - t0
        if progress and (shown or elapsed > 2.0) and done < len(irs):
            shown = True
            print(
                f"\rthrifty: compiling {what}: module {done}/{len(irs)} ({elapsed:.0f} s)",
                end="",
                file=sys.stderr,
                flush=True,
            )
    if shown:
        print(f"\rthrifty: compiled {what} in {time.perf_counter() - t0:.1f} s   ", file=sys.stderr)
    return objects
