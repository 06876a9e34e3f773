"""Object code for a forest plan: its LLVM IR (``ir_scalar``, ``ir_vector``, ``ir_serving``)
compiled with llvmlite, in helper processes (``llc``) for large forests, and cached on disk.

The code is generated for one target (``targets``: AVX-512, AVX2, NEON, SVE or scalar blocks only),
the host's widest unless ``THRIFTY_TARGET`` says otherwise. The object code is cached on disk
(``cache``, verified before it is loaded) keyed by a hash of the forest's splits, the plan's order
and where it has exits, this generator's version and source, the target and the CPU, so a new process loads
it without compiling. Leaf values and exit thresholds are tables the code reads, not constants,
so they never need a recompile.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled import cache, targets
from thrifty.runtime.compiled.cache import pack, unpack
from thrifty.runtime.compiled.choice import branchy_blocks, second_scores, ternlog_masks, vector_blocks
from thrifty.runtime.compiled.ir_branchy import BRANCHY_LEVEL, branchy_module_irs
from thrifty.runtime.compiled.ir_lazy import lazy_module_irs
from thrifty.runtime.compiled.ir_preranks import raw_rank_bits
from thrifty.runtime.compiled.ir_ranks import (
    MAX_RANKS16,
    RANKS16_TARGETS,
    RANKS_ENV,
    block_thresholds,
    rank_bits,
    use_ranks,
)
from thrifty.runtime.compiled.ir_raw import raw_module_irs
from thrifty.runtime.compiled.ir_scalar import module_irs
from thrifty.runtime.compiled.ir_serving import lane_rows as serving_lane_rows
from thrifty.runtime.compiled.ir_serving import serving_ir
from thrifty.runtime.compiled.ir_vector import vector_module_irs
from thrifty.runtime.compiled.ir_vloop import use_loops
from thrifty.runtime.compiled.ir_vraw import raw_loops, vraw_module_irs
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.targets import env_choice
from thrifty.runtime.compiled.vblocks import raw_blocks_key, vblocks, vector_ok

# Bump when the generated code changes meaning: cached objects of older versions are ignored.
CODEGEN_VERSION = 46
# Environment variable: "auto" (a large plan's scores-only entries are compiled after
# ``thrifty.compile`` returns: ``background_scores``), "on" (every plan's) or "off" (compile
# returns when every entry is ready).
BACKGROUND_ENV = "THRIFTY_BACKGROUND"
BACKGROUND_KINDS = ("auto", "on", "off")
# Plans of at least this many positions compile their scores-only entries in the background.
BACKGROUND_TREES = 200
# LLVM calls of this process, from the caller's thread and the background compile's.
_LLVM = threading.RLock()
# Trees per compiled module: the unit of progress display and of LLVM's work.
_TREES_PER_MODULE = 100
# The signature of ``run``: (X, S, T, touched, rows, m, n) -> None (see ``ir_scalar``).
RUN = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
)
# The signature of lazy evaluation's ``lazyrun``: ``run``'s, then the known matrix (see ``ir_lazy``).
LAZY_RUN = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_void_p,
)
# The signature of ``serve``: (ctx) -> None, ctx the address of a call context (see ``ir_serving``).
SERVE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def code_key(lay: Layout, lazy: bool = False) -> str:
    """Hash of everything the native code depends on: the forest's splits and tree classes,
    the plan's order and exit kinds, vector, scalar or lazy blocks, this generator's version
    and source (``cache.generator_digest``) and the target (``targets.current``: its name,
    lanes, triple, CPU and features)."""
    forest = lay.forest
    h = hashlib.sha256()
    if lazy:
        kind = "lazy"
    elif use_vector(lay):
        kind = f"vector|ranks={_ranks(lay)}|raw={_raw_kind(lay)}{raw_blocks_key()}"
    else:
        kind = "branchy" if branchy_blocks(lay) else "scalar"
    if not lazy:
        # The second scores-only entry: its kind, its rows and (vector) its ranks and masks.
        second, lo, hi = second_entry(lay)
        kind += f"|second={second}:{lo}:{hi}:{_second_ranks(lay) if second == 'vector' else 0}"
    h.update(
        f"{CODEGEN_VERSION}|{cache.generator_digest()}|{kind}|{llvmlite.__version__}|"
        f"{targets.current().key()}|"
        f"{forest.n_features}|{forest.n_outputs}|{forest.accumulate}".encode()
    )
    # Every array of the forest but the numbers the code reads from tables (leaf values, tree
    # weights, base score), then the plan's order and exit kinds.
    numbers = ("value", "tree_weight", "base_score")
    structure = [getattr(forest, name) for name in Forest.ARRAYS if name not in numbers]
    order, exits = np.asarray(lay.order, dtype=np.int64), np.asarray(lay.exits, dtype=np.int8)
    # ``finish`` (a base_last forest's scale and base, formed at exits) is baked into the code.
    for a in (*structure, order, exits, lay.finish):
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:32]


def use_vector(lay: Layout) -> bool:
    """Whether the plan compiles to vector blocks (``ir_vector``): the plan suits them and
    the target (``targets.current``) has vector lanes. Measured on Adult's 500 trees,
    vector blocks take 2.3 ns per tree and row with AVX-512 against the scalar blocks' 8.1; with
    AVX2 (four lanes) about half the scalar blocks' time on a shared machine. The rule and what
    forces either kind are ``choice.vector_blocks``'s."""
    return vector_blocks(lay, targets.current().lanes)


def _ranks(lay: Layout) -> int:
    """The bits of the ranks the vector blocks compare (``ir_ranks.rank_bits``; 0: doubles); the
    rule's count is kept on ``lay`` (the cache key and the compile ask, under the same
    environment)."""
    if not use_vector(lay):
        return 0
    tg = targets.current()
    asked = (tg.name, tg.lanes, os.environ.get(RANKS_ENV, ""))
    memo = lay.__dict__.setdefault("_ranks", {})
    if asked not in memo:
        memo[asked] = rank_bits(lay, tg.name, tg.lanes, vblocks(lay))
    return memo[asked]


def second_entry(lay: Layout) -> tuple[str, int, int]:
    """The plan's second scores-only entry beside ``raw`` (``choice.second_scores``): its
    kind (``"branchy"``, ``"vector"`` or ``""`` for none) and the rows ``[lo, hi]`` of the
    calls it serves. Only plans with a ``raw`` entry have one."""
    if not raw_entry(lay):
        return "", 0, 0
    tg = targets.current()
    vector = use_vector(lay)
    lane_row = serving_lane_rows(lay) > 0
    return second_scores(lay, tg.lanes, vector, not vector and _ranks16(lay), lane_row)


def _ranks16(lay: Layout) -> bool:
    """Whether vector blocks of ``lay`` on this target could compare 16-bit ranks: a target
    of ``ir_ranks.RANKS16_TARGETS``, ranks at all (``ir_ranks.use_ranks``) and at most
    ``MAX_RANKS16`` thresholds per feature and block (as ``ir_ranks.rank_bits``)."""
    tg = targets.current()
    if tg.name not in RANKS16_TARGETS or not vector_ok(lay):
        return False
    blocks = vblocks(lay)
    if not use_ranks(lay, tg.lanes, blocks):
        return False
    return all(len(t) <= MAX_RANKS16 for p0, k in blocks for t in block_thresholds(lay, p0, k).values())


def _second_ranks(lay: Layout) -> int:
    """The ranks of a second entry on vector blocks: 16 bits where they fit (the rule builds
    one only then), else the vector blocks' rule (``ir_ranks.rank_bits``)."""
    tg = targets.current()
    return 16 if _ranks16(lay) else rank_bits(lay, tg.name, tg.lanes, vblocks(lay))


def _raw_kind(lay: Layout) -> str:
    """The kind of the scores-only entry's leaf masks, for the cache key: none (no entry),
    ternlog (``choice.ternlog_masks``) or selects; whether its blocks are ``ir_vloop``'s loop
    blocks (``ir_vloop.use_loops``: a second vector entry may take them too) and whether its
    ranks are formed once per pass of rows (``ir_preranks.forest_ranks``), as
    ``ir_vraw.raw_loops`` decides."""
    if not raw_entry(lay):
        return "none"
    tg, ranks = targets.current(), _raw_ranks(lay)
    ternlog = ternlog_masks(tg.name, ranks)
    loops, pre = raw_loops(lay, tg.lanes, ranks, ternlog) if use_vector(lay) else (False, False)
    masks = "ternlog" if ternlog else "select"
    return (
        masks
        + ("|loops" if use_loops(lay) else "")
        + (f"|preranks|rawranks={ranks}" if pre else "")
        + ("|rawloops" if loops else "")
    )


def _raw_ranks(lay: Layout) -> int:
    """The bits of the ranks the scores-only entry's vector blocks compare
    (``ir_preranks.raw_rank_bits``: the vector blocks', or ranks once per pass)."""
    return raw_rank_bits(lay, _ranks(lay), targets.current().lanes) if use_vector(lay) else 0


class NativeCode:
    """A forest plan compiled to native code and loaded into this process.

    Parameters
    ----------
    lay : layout.Layout
        The forest, the plan's order and exit kinds, the per-leaf tables.
    progress : bool
        Show progress on stderr when compiling takes more than a few seconds.
    lazy : bool
        Compile the lazy blocks (``ir_lazy``) instead: ``run`` is then ``lazyrun`` and there
        is no ``serve``.

    Attributes
    ----------
    run : ctypes function
        ``run(X, S, T, touched, rows, m, n)`` (see ``ir_scalar``): evaluates the rows
        ``rows[:m]`` (int64, consumed as a work list) of the float64 C-contiguous matrix ``X``
        on the plan, updating their state in ``S`` (``n`` rows); ``T`` holds the tables'
        addresses; ``touched`` is not read (the tested features are the ``bits`` fields of
        ``S``, one word per 64 features; lazy blocks mark it for forests of more than 64).
    serve : ctypes function or None
        ``serve(ctx)``, the serving path: the rows ``[lo, hi)`` of the call context ``ctx``
        (``ir_serving.CONTEXT``) run and their feature cost settled (None for lazy blocks).
    raw : ctypes function or None
        ``raw(ctx)``, scores only: the rows ``[lo, hi)`` of the context ``ctx``
        (``ir_raw.RAW_CONTEXT``) from their inputs to their raw scores, nothing counted
        (``raw_entry``; None for other plans).
    second : ctypes function or None
        ``second(ctx)``: ``raw``'s contract in the other kind of blocks (``second_entry``),
        for calls of ``second_rows`` rows; None for most plans.
    second_rows : tuple of int
        The rows ``(lo, hi)`` of the calls ``second`` serves (``(0, -1)``: none).
    key : str
        The cache key (``code_key``).
    compile_seconds : float
        Time spent compiling (0 when loaded from the cache).
    """

    def __init__(self, lay: Layout, *, progress: bool = True, lazy: bool = False) -> None:
        self.key = code_key(lay, lazy)
        t0 = time.perf_counter()
        objects = cache.read(self.key)
        self.from_cache = objects is not None
        background = not lazy and raw_entry(lay) and background_scores(lay)
        if objects is None:
            irs, level = _main_irs(lay, self.key, lazy)
            objects = _emit_all(irs, level, progress, len(lay.order))
            if not lazy and not background:
                for more, at in _later_irs(lay, self.key):
                    objects += _emit_all(more, at, progress, len(lay.order))
            # An entry without the scores-only entries is completed when they are compiled.
            cache.write(self.key, objects)
        self.compile_seconds = 0.0 if self.from_cache else time.perf_counter() - t0
        self._engines = [_load(objects)]
        self.raw: Any = None
        self.second: Any = None
        self.second_rows = (0, -1)
        # Whether the blocks are vector blocks (``raw_path`` leaves one row to the serving path).
        self.vector = not lazy and use_vector(lay)
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._on_ready: list[Callable[[], None]] = []
        self.ready_seconds = self.compile_seconds
        engine = self._engines[0]
        if lazy:
            self.run = LAZY_RUN(engine.get_function_address(f"lazyrun_{self.key}"))
            self.serve = None
            self._ready.set()
            return
        # The key does not name the input's precision (the code is the same; ``serve`` rounds
        # when told): objects cached for a float32 twin of the forest have no ``raw``.
        self._bind_scores(engine, lay)
        self.run = RUN(engine.get_function_address(f"run_{self.key}"))
        # ``serve``: rows from start to settled cost (the serving path).
        self.serve = SERVE(engine.get_function_address(f"serve_{self.key}"))
        if raw_entry(lay) and self.raw is None:
            # Compiled (or cached) without its scores-only entries: they follow in the
            # background, and calls take the serving path until they are loaded.
            if background:
                args = (lay, objects, t0, _emit_helpers)
                threading.Thread(target=self._compile_later, args=args, daemon=True).start()
                return
            # A cached entry without them, and no background compile asked: compile them now.
            emit = partial(_emit_all, progress=progress, n_trees=len(lay.order))
            self._compile_later(lay, objects, t0, emit)
        else:
            self._ready.set()

    def _bind_scores(self, engine: Any, lay: Layout) -> None:
        """Take ``raw`` and the second entry from ``engine`` where it has them."""
        raw = engine.get_function_address(f"raw_{self.key}") if raw_entry(lay) else 0
        second, lo, hi = second_entry(lay)
        entry = engine.get_function_address(f"raw_{self.key}{second[:1]}") if second and raw else 0
        if entry:
            self.second, self.second_rows = SERVE(entry), (lo, hi)
        if raw:
            self.raw = SERVE(raw)

    def _compile_later(self, lay: Layout, objects: list[bytes], t0: float, emit: Callable) -> None:
        """The scores-only entries (``_later_irs``) compiled by ``emit`` (in the background: by
        helper processes alone, ``_emit_helpers``), loaded into
        an engine of their own, written to the cache with the rest, then announced to
        ``when_ready``'s callbacks. A failure leaves the serving path serving, and says so."""
        try:
            more: list[bytes] = []
            for irs, level in _later_irs(lay, self.key):
                more += emit(irs, level)
            engine = _load(more)
            cache.write(self.key, objects + more)
            with self._lock:
                self._engines.append(engine)
                self._bind_scores(engine, lay)
                self.ready_seconds = time.perf_counter() - t0
                callbacks, self._on_ready = self._on_ready, []
            for callback in callbacks:
                callback()
        except Exception as exc:  # noqa: BLE001 - any failure leaves the serving path, said once
            warnings.warn(
                f"thrifty: compiling the scores-only entry in the background failed ({exc}); "
                "calls keep the serving path, whose results are the same. Set "
                f"{BACKGROUND_ENV}=off to compile it before thrifty.compile returns",
                RuntimeWarning,
                stacklevel=1,
            )
        finally:
            self._ready.set()

    def when_ready(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the scores-only entry ``raw`` is loaded: now if it is, from
        the background compile's thread when it arrives, never if it fails."""
        with self._lock:
            if self.raw is None and not self._ready.is_set():
                self._on_ready.append(callback)
                return
        if self.raw is not None:
            callback()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every entry is loaded (or its background compile failed): whether it
        finished within ``timeout`` seconds (None: no limit)."""
        return self._ready.wait(timeout)


def background_scores(lay: Layout) -> bool:
    """Whether a compile into an empty cache returns before the scores-only entries (``raw``
    and the second entry) are compiled: ``THRIFTY_BACKGROUND`` forces it on or off, else
    plans of at least ``BACKGROUND_TREES`` positions. docs/runtime.md, "Compiling in the
    background"."""
    kind = env_choice(BACKGROUND_ENV, BACKGROUND_KINDS, "a choice")
    if kind != "auto":
        return kind == "on"
    return len(lay.order) >= BACKGROUND_TREES


def raw_entry(lay: Layout) -> bool:
    """Whether the plan's code has a scores-only entry ``raw``: a plan without exits (the
    scores do not depend on when a row stops) on float64 inputs, compiled to branchy blocks
    (``ir_raw``: the counters every block keeps were a third of a tree's time) or to vector
    blocks (``ir_vraw``: no row state, counters or tested-feature gathers); docs/runtime.md,
    "Scores only". Plain scalar blocks have none."""
    exact_inputs = lay.forest.input_dtype == "float64" and not lay.acc32
    return exact_inputs and not bool(lay.exits.any()) and (use_vector(lay) or branchy_blocks(lay))


def _target_machine() -> llvm.TargetMachine:
    return targets.current().machine()


def _main_irs(lay: Layout, key: str, lazy: bool = False) -> tuple[list[str], int]:
    """IR modules of the blocks' functions (in modules of about ``_TREES_PER_MODULE`` trees),
    ``run`` and ``serve``, and the LLVM speed level they are compiled at."""
    level = 1
    if lazy:
        return lazy_module_irs(lay, key, _TREES_PER_MODULE), level
    tg = targets.current()
    if use_vector(lay):
        # Without exits a vector block's scalar twin runs only for a lone row of a call
        # (``ir_scalar._run_ir``); optimising it took 0.42 of higgs255's compile time.
        cold = not bool(lay.exits.any())
        irs = vector_module_irs(
            lay,
            key,
            _TREES_PER_MODULE,
            tg.lanes,
            tg.vscale,
            tg.by_exponent,
            _ranks(lay),
            cat_shift=tg.cat_shift,
            cold_scalar=cold,
        )
    elif branchy_blocks(lay):
        irs, level = branchy_module_irs(lay, key, _TREES_PER_MODULE), BRANCHY_LEVEL
    else:
        irs = module_irs(lay, key, _TREES_PER_MODULE)
    irs[-1] += serving_ir(lay, key)
    return irs, level


def _later_irs(lay: Layout, key: str) -> list[tuple[list[str], int]]:
    """IR modules of the scores-only entries (``raw``, then the second entry), each part with
    its LLVM speed level; none for plans without ``raw`` (``raw_entry``)."""
    if not raw_entry(lay):
        return []
    tg = targets.current()
    parts: list[tuple[list[str], int]] = []
    if use_vector(lay):
        ranks = _raw_ranks(lay)
        ternlog = ternlog_masks(tg.name, ranks)
        irs = vraw_module_irs(lay, key, tg.lanes, tg.vscale, tg.by_exponent, ranks, ternlog, tg.cat_shift)
        parts.append((irs, 1))
    else:
        parts.append((raw_module_irs(lay, key), BRANCHY_LEVEL if branchy_blocks(lay) else 1))
    second = second_entry(lay)[0]
    if second == "branchy":
        # A vector plan's branchy scores for one row (``choice.second_scores``), named
        # ``raw_{key}b``, at the branchy blocks' level.
        parts.append((raw_module_irs(lay, key + "b"), BRANCHY_LEVEL))
    elif second == "vector":
        # A branchy plan's vector scores for large calls, ``raw_{key}v``.
        ranks = _second_ranks(lay)
        ternlog = ternlog_masks(tg.name, ranks)
        more = vraw_module_irs(
            lay, key + "v", tg.lanes, tg.vscale, tg.by_exponent, ranks, ternlog, tg.cat_shift
        )
        parts.append((more, 1))
    return parts


def _compile(lay: Layout, key: str, progress: bool, lazy: bool = False) -> list[bytes]:
    """Object code of every entry of the plan (``_main_irs``, then ``_later_irs``); the
    modules are shared between this process and helper processes, one per further core
    (llvmlite serialises LLVM calls within a process)."""
    irs, level = _main_irs(lay, key, lazy)
    objects = _emit_all(irs, level, progress, len(lay.order))
    for more, at in [] if lazy else _later_irs(lay, key):
        objects += _emit_all(more, at, progress, len(lay.order))
    return objects


def _load(objects: list[bytes]) -> Any:
    """An MCJIT engine with ``objects`` loaded and finalised."""
    with _LLVM:
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        for obj in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
    return engine


def _emit_helpers(irs: list[str], level: int) -> list[bytes]:
    """Object code of ``irs`` from helper processes alone (one per core), so that this
    process's threads keep serving; raises when a helper fails."""
    n = max(1, min(_cores(), len(irs)))
    shares = [list(range(len(irs)))[h::n] for h in range(n)]
    results: dict[int, list[bytes] | None] = {}
    threads = [
        threading.Thread(target=_helper, args=([irs[i] for i in share], results, h, level), daemon=True)
        for h, share in enumerate(shares)
    ]
    for thread in threads:
        thread.start()
    objects: list[bytes | None] = [None] * len(irs)
    for h, thread in enumerate(threads):
        thread.join()
        got = results.get(h)
        if got is None:
            raise RuntimeError("a helper process (python -m thrifty.runtime.compiled.llc) failed")
        for j, i in enumerate(shares[h]):
            objects[i] = got[j]
    return [o for o in objects if o is not None]


def _emit_all(irs: list[str], level: int, progress: bool, n_trees: int) -> list[bytes]:
    """Object code of the modules ``irs`` at LLVM speed level ``level``, shared between this
    process and helper processes (``_helper``), with progress on stderr (``n_trees`` the
    plan's positions) when it takes more than a few seconds."""
    t0 = time.perf_counter()
    helpers = max(0, min(_cores(), len(irs) // 2) - 1)
    shares = [list(range(len(irs)))[h :: helpers + 1] for h in range(helpers + 1)]
    results: dict[int, list[bytes] | None] = {}
    threads = [
        threading.Thread(target=_helper, args=([irs[i] for i in share], results, h, level), daemon=True)
        for h, share in enumerate(shares[1:], 1)
    ]
    for thread in threads:
        thread.start()
    objects: list[bytes | None] = [None] * len(irs)
    shown = False
    for done, i in enumerate(shares[0], 1):
        objects[i] = _emit(irs[i], level=level)
        elapsed = time.perf_counter() - t0
        if progress and (shown or elapsed > 2.0) and done < len(shares[0]):
            # Compiling a large forest takes a while: say how far it is (all shares alike).
            shown = True
            # The share of modules done, in trees (each part of the plan counts its own).
            trees = min(n_trees, n_trees * done * (helpers + 1) // len(irs))
            print(
                f"\rthrifty: compiling trees {trees}/{n_trees} ({elapsed:.0f} s)",
                end="",
                file=sys.stderr,
                flush=True,
            )
    for h, thread in enumerate(threads, 1):
        thread.join()
        got = results.get(h)
        # A helper that failed (no interpreter, killed) leaves its share to this process.
        for j, i in enumerate(shares[h]):
            objects[i] = got[j] if got is not None else _emit(irs[i], level=level)
    if shown:
        print(
            f"\rthrifty: compiled {n_trees} trees in {time.perf_counter() - t0:.1f} s   ",
            file=sys.stderr,
        )
    return [o for o in objects if o is not None]


def _cores() -> int:
    """Cores this process may run on (its affinity where the OS tells, as in a container)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no sched_getaffinity
        return os.cpu_count() or 1


# Helper processes still compiling: a process that exits while its scores-only entries compile
# in the background ends them (``_end_helpers``) rather than leave them running unread.
_HELPERS: set[subprocess.Popen] = set()


@atexit.register
def _end_helpers() -> None:
    for proc in list(_HELPERS):
        proc.kill()


def _helper(irs: list[str], results: dict, h: int, level: int = 1) -> None:
    """Compile ``irs`` at LLVM speed level ``level`` in a new process (``python -m
    thrifty.runtime.compiled.llc``); its objects go to ``results[h]``, or None when it fails."""
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "thrifty.runtime.compiled.llc", str(level)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        ) as proc:
            _HELPERS.add(proc)
            try:
                # A helper that hangs must not hang the compile: its share is then done here.
                out, _ = proc.communicate(pack([ir.encode() for ir in irs]), timeout=600)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
            finally:
                _HELPERS.discard(proc)
        objects = unpack(out) if proc.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        objects = None
    results[h] = objects if objects is not None and len(objects) == len(irs) else None


def _emit(ir: str, target: targets.Target | None = None, level: int = 1) -> bytes:
    """Object code of one IR module for ``target`` (default ``targets.current()``), optimised at
    LLVM speed level ``level``."""
    with _LLVM:
        tm = (target or targets.current()).machine()
        mod = llvm.parse_assembly(ir)
        mod.triple = tm.triple
        mod.verify()
        # Level 1 gives most of the speed of higher levels at half their compile time (branchy
        # blocks excepted: ``ir_branchy.BRANCHY_LEVEL``).
        pto = llvm.create_pipeline_tuning_options(speed_level=level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return tm.emit_object(mod)
