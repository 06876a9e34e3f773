"""lleaves and tl2cgen for benchmarks/shapes.py, each compiled once per model and cached on disk.

lleaves needs an llvmlite below 0.45, which thrifty's own llvmlite is not, so it lives in an
environment of its own used only to compile: ``lleaves.Model(...).compile(cache=path,
raw_score=True)`` writes the object code to ``path``. This process then loads that object file
with its own llvmlite (MCJIT ``add_object_file``) and calls lleaves' entry point
``forest_root(double* X, double* out, int32 start, int32 end)`` directly, one thread, so lleaves is
timed in the same process as every other engine (without the Python of ``Model.predict``: its
best case). Set up the environment once::

    python3.11 -m venv ~/.cache/thrifty-bench/lleaves-env
    ~/.cache/thrifty-bench/lleaves-env/bin/pip install lleaves "llvmlite<0.45"

or point ``LLEAVES_PYTHON`` at the interpreter of such an environment. Objects are cached in
``~/.cache/thrifty-bench/lleaves/<model hash>-<cpu>.o`` (a 500-tree model of 255 leaves takes
lleaves about 14 minutes and 10 GB to compile); tl2cgen's libraries (quantize=1, gcc) in
``~/.cache/thrifty-bench/tl2cgen/``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("THRIFTY_BENCH_CACHE", Path.home() / ".cache" / "thrifty-bench"))
# Compiles the model file argv[1] to the object file argv[2] (run in the lleaves environment).
_COMPILE = """
import sys, lleaves
lleaves.Model(model_file=sys.argv[1]).compile(cache=sys.argv[2], raw_score=True)
"""
# A predict function: float64 C-contiguous rows in, raw scores out.
Predict = Callable[[np.ndarray], np.ndarray]


def lleaves_python() -> Path:
    """The lleaves environment's interpreter: ``LLEAVES_PYTHON``, else the one in the cache."""
    return Path(os.environ.get("LLEAVES_PYTHON", CACHE / "lleaves-env" / "bin" / "python"))


def _cpu() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name()


def _key(model_text: str) -> str:
    return hashlib.sha256(model_text.encode()).hexdigest()[:20]


def lleaves_object(model_text: str, *, compile_missing: bool = True) -> tuple[Path | None, str]:
    """The cached lleaves object file of a LightGBM model (compiled in the lleaves environment
    on a miss), or None and the reason."""
    path = CACHE / "lleaves" / f"{_key(model_text)}-{_cpu()}.o"
    if path.exists():
        return path, ""
    python = lleaves_python()
    if not python.exists():
        return None, f"no lleaves environment at {python} (see benchmarks/_lleaves.py; set LLEAVES_PYTHON)"
    if not compile_missing:
        return None, "not compiled yet"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model.txt"
        model.write_text(model_text)
        part = Path(tmp) / "model.o"
        print(f"  lleaves: compiling {path.name} in {python.parent.parent} (once; cached)", flush=True)
        t0 = time.perf_counter()
        done = subprocess.run(
            [str(python), "-c", _COMPILE, str(model), str(part)], capture_output=True, text=True
        )
        if done.returncode != 0 or not part.exists():
            return None, f"lleaves failed to compile: {done.stderr.strip().splitlines()[-1:]}"
        # Its compile time beside the object (``lleaves_compile_seconds``), as this machine
        # measured it, whatever the load then.
        _seconds(path).write_text(f"{time.perf_counter() - t0:.1f}\n")
        os.replace(part, path)
    return path, ""


def _seconds(path: Path) -> Path:
    return path.with_suffix(".seconds")


def lleaves_compile_seconds(model_text: str) -> float | None:
    """Seconds lleaves took to compile the model into the cache (None when it was compiled
    before its time was kept)."""
    path = _seconds(CACHE / "lleaves" / f"{_key(model_text)}-{_cpu()}.o")
    try:
        return float(path.read_text())
    except (OSError, ValueError):
        return None


class LleavesCode:
    """An lleaves object file loaded into this process; ``predict(X)`` runs its ``forest_root``
    over all rows on this thread."""

    def __init__(self, path: Path, n_outputs: int) -> None:
        import llvmlite.binding as llvm

        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        # lleaves compiles with the large code model and position-independent code.
        tm = target.create_target_machine(
            cpu=llvm.get_host_cpu_name(),
            features=llvm.get_host_cpu_features().flatten(),
            reloc="pic",
            codemodel="large",
        )
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        self._engine.add_object_file(llvm.ObjectFileRef.from_data(path.read_bytes()))
        self._engine.finalize_object()
        proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
        self._root = proto(self._engine.get_function_address("forest_root"))
        self.n_outputs = n_outputs

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = np.empty(len(X) * self.n_outputs)
        self._root(X.ctypes.data, out.ctypes.data, 0, len(X))
        return out


def lleaves_predict(model_text: str, n_outputs: int) -> tuple[Predict | None, str]:
    """lleaves' predict of a LightGBM model in this process, or None and why not."""
    path, why = lleaves_object(model_text)
    if path is None:
        print(f"  lleaves: {why}; its figures are null", flush=True)
        return None, why
    code = LleavesCode(path, n_outputs)
    return code.predict, ""


def tl2cgen_predict(booster, model_text: str) -> tuple[Predict | None, str]:
    """tl2cgen's (quantize=1, one thread) predict of a LightGBM booster, or None and why not."""
    try:
        import tl2cgen
        import treelite
    except ImportError as exc:
        why = f"not installed ({exc.name}): pip install 'thrifty[bench]'"
        print(f"  tl2cgen: {why}; its figures are null", flush=True)
        return None, why
    lib = CACHE / "tl2cgen" / f"{_key(model_text)}-{tl2cgen.__version__}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        print(f"  tl2cgen: compiling {lib.name} (once; cached)", flush=True)
        model = treelite.frontend.from_lightgbm(booster)
        part = lib.with_suffix(".part.so")
        try:
            tl2cgen.export_lib(
                model, toolchain="gcc", libpath=str(part), params={"quantize": 1, "parallel_comp": 8}
            )
        except Exception as exc:  # no C compiler, or one that fails on this model
            why = f"tl2cgen could not build the model: {str(exc).splitlines()[0][:200]}"
            print(f"  tl2cgen: {why}; its figures are null", flush=True)
            return None, why
        os.replace(part, lib)
    predictor = tl2cgen.Predictor(str(lib), nthread=1)

    def predict(X: np.ndarray) -> np.ndarray:
        return np.asarray(predictor.predict(tl2cgen.DMatrix(X, dtype="float64"), pred_margin=True)).reshape(
            -1
        )

    return predict, ""
