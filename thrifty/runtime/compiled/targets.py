"""The machine a forest plan's native code is generated for: a *target*, chosen at run time.

A target names an instruction set and how the vector blocks (``ir_vector``) use it:

========  =====================================================================  =========
name      code                                                                   lanes
========  =====================================================================  =========
avx512    x86-64 with AVX-512: 512-bit vectors, mask registers                   8
avx2      x86-64 with AVX2 (AVX-512 off): 256-bit vectors, compares as masks     4
neon      aarch64 with NEON: 128-bit vectors                                     2
sve       aarch64 with SVE: the host's vector length (at least 128 bits)         2 per 128 bits
generic   scalar blocks only, for the host CPU as it is                          none
========  =====================================================================  =========

Lanes are doubles per vector; rank blocks (``ir_ranks``) compare 32-bit or 16-bit ranks on two
or four times as many: AVX2 takes 16 bits for trees of up to 32 leaves
(``ir_ranks.RANKS16_AVX2_LEAVES``, sixteen rows per register, ``ir_avx2``), AVX-512 for trees
of more than 64 leaves.
The host's target is the widest it runs (``host_name``). ``THRIFTY_TARGET`` in the environment
(a name above, or ``host``) overrides it for code compiled and loaded from then on, in this
process and its compile helpers (``llc``): tests and benchmarks force each target this CPU can
run (``runnable``). ``cross`` makes a target of another architecture, for object code that is
only emitted (never loaded), as the tests do for aarch64. The target is part of the cache key
(``objects.code_key``).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import llvmlite.binding as llvm

from thrifty.exceptions import InvalidParameterError

# Every target name, widest first per architecture.
NAMES = ("avx512", "avx2", "neon", "sve", "generic")
# The environment variable that forces a target.
ENV = "THRIFTY_TARGET"
# The environment variable turning coded categorical splits (``Target.cat_shift``) on or off.
CAT_SHIFT_ENV = "THRIFTY_CATSHIFT"
_X86 = ("avx512", "avx2")
_ARM = ("neon", "sve")
# Where Linux tells an SVE machine's default vector length in bytes.
_SVE_LENGTH = Path("/proc/sys/abi/sve_default_vector_length")


@dataclass(frozen=True)
class Target:
    """One target: what ``objects`` hands LLVM and how ``ir_vector`` shapes its vectors.

    Attributes
    ----------
    name : str
        One of ``NAMES``.
    triple, cpu, features : str
        LLVM's target triple, CPU name and feature string.
    lanes : int
        Rows per vector of the vector blocks; 0 when the target has scalar blocks only.
    vscale : int
        SVE's vector length in units of 128 bits, the least the blocks assume (their
        ``vscale_range``); 0 elsewhere.
    """

    name: str
    triple: str
    cpu: str
    features: str
    lanes: int
    vscale: int = 0

    @property
    def by_exponent(self) -> bool:
        """Whether the vector blocks find exit leaves through a double's exponent
        (``ir_vector._low_bit_by_exponent``): on ISAs without a vector count-trailing-zeros
        (AVX2, NEON); AVX-512 and SVE count with their own instructions."""
        return self.name in ("avx2", "neon")

    @property
    def cat_shift(self) -> bool:
        """Whether 32-bit rank blocks test categorical splits on codes of the categories with
        a variable shift (``ir_catshift``) rather than on the rows' doubles, which take two
        registers per register of ranks and whose outcomes must be packed back: the x86
        targets (AVX2's ``vpsllvd``, AVX-512's). On Adult's 500 trees (paired, one thread) it
        took 0.72-0.73 of the time with AVX2 and 0.78-0.81 with AVX-512. ``THRIFTY_CATSHIFT``
        (``on``/``off``; ``CAT_SHIFT_ENV``) overrides, for measuring; aarch64 has no such shift."""
        kind = env_choice(CAT_SHIFT_ENV, ("auto", "on", "off"), "a choice")
        return kind != "off" and self.name in _X86

    def key(self) -> str:
        """Everything about the target that the object code depends on, for cache keys."""
        return (
            f"{self.name}|{self.lanes}|{self.vscale}|{self.triple}|{self.cpu}|{self.features}"
            f"|cat_shift={self.cat_shift}"
        )

    def machine(self) -> llvm.TargetMachine:
        """LLVM's target machine for this target (position-independent code, ``-O2``)."""
        return llvm.Target.from_triple(self.triple).create_target_machine(
            cpu=self.cpu, features=self.features, opt=2, reloc="pic", codemodel="default"
        )


@functools.cache
def _host_features() -> dict[str, bool]:
    """The host CPU's LLVM features (asked once: LLVM takes about a millisecond each time)."""
    return dict(llvm.get_host_cpu_features())


@functools.cache
def _host_cpu() -> str:
    """The host CPU's LLVM name (asked once: about 0.4 ms each time)."""
    return llvm.get_host_cpu_name()


def _flatten(features: dict[str, bool]) -> str:
    return ",".join(("+" if on else "-") + name for name, on in sorted(features.items()))


def _arch() -> str:
    arch = llvm.get_process_triple().split("-")[0]
    return "aarch64" if arch in ("aarch64", "arm64") else arch


def runnable() -> tuple[str, ...]:
    """The targets whose code this CPU runs, widest first (``generic`` always)."""
    have = _host_features()
    arch = _arch()
    out: list[str] = []
    if arch == "x86_64":
        out += [n for n, flag in zip(_X86, ("avx512f", "avx2")) if have.get(flag, False)]
    elif arch == "aarch64":
        out += ["neon"] + (["sve"] if have.get("sve", False) else [])
        out.reverse()
    return (*out, "generic")


def host_name() -> str:
    """The widest target this CPU runs."""
    return runnable()[0]


def _sve_vscale() -> int:
    """The host's SVE vector length in units of 128 bits; 1 (the least SVE has, so code for it
    runs on any SVE CPU) when Linux does not tell."""
    try:
        return max(1, int(_SVE_LENGTH.read_text().split()[0]) // 16)
    except (OSError, ValueError, IndexError):
        return 1


def _lanes(name: str, vscale: int) -> int:
    return {"avx512": 8, "avx2": 4, "neon": 2, "sve": 2 * vscale, "generic": 0}[name]


@functools.cache
def host(name: str | None = None) -> Target:
    """Target ``name`` (default: ``host_name()``) on this CPU: its own CPU name and features,
    AVX-512 turned off for ``avx2`` (so that the code is what an AVX2-only CPU runs). Made once
    per name: a process asks for its target at every compile and load."""
    name = host_name() if name is None else name
    have = dict(_host_features())
    if name == "avx2":
        # AVX10 and AMX imply AVX-512: all off, as on a CPU without it.
        for flag in list(have):
            if flag.startswith(("avx512", "avx10", "evex512", "amx")):
                have[flag] = False
    vscale = _sve_vscale() if name == "sve" else 0
    triple, cpu = llvm.get_process_triple(), _host_cpu()
    return Target(name, triple, cpu, _flatten(have), _lanes(name, vscale), vscale)


def cross(name: str) -> Target:
    """Target ``name`` for a CPU of its architecture other than this one (Linux, a generic CPU
    of the ISA; SVE of 256 bits): object code to emit, not to run here."""
    # llvmlite registers only the host's target by default.
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    if name in _ARM:
        features = "+neon,+sve" if name == "sve" else "+neon"
        vscale = 2 if name == "sve" else 0
        return Target(name, "aarch64-unknown-linux-gnu", "generic", features, _lanes(name, vscale), vscale)
    if name in _X86:
        cpu = "x86-64-v4" if name == "avx512" else "x86-64-v3"
        return Target(name, "x86_64-unknown-linux-gnu", cpu, "", _lanes(name, 0))
    raise InvalidParameterError(f"cross needs one of {', '.join(_X86 + _ARM)}, got {name!r}")


def env_choice(name: str, choices: tuple[str, ...], what: str) -> str:
    """The compile setting ``name`` of the environment (``THRIFTY_BLOCKS``, ``THRIFTY_RANKS``),
    one of ``choices``: the first when unset or empty, case and spaces ignored; anything else is
    an error naming the variable, ``what`` its value should be, and the choices."""
    value = os.environ.get(name, "").strip().lower() or choices[0]
    if value not in choices:
        raise InvalidParameterError(
            f"{name}={os.environ[name]!r} is not {what}: set it to one of {choices} or unset it"
        )
    return value


def current() -> Target:
    """The target code is compiled for now: ``THRIFTY_TARGET`` when set (checked: a known
    name this CPU runs), else the host's."""
    asked = os.environ.get(ENV, "").strip().lower()
    if asked in ("", "host"):
        return host()
    here = runnable()
    if asked not in NAMES:
        raise InvalidParameterError(
            f"{ENV}={asked!r} is not a target: use one of {', '.join(NAMES)} or host "
            f"(this CPU runs {', '.join(here)})"
        )
    if asked not in here:
        raise InvalidParameterError(
            f"{ENV}={asked!r} cannot run on this CPU ({_host_cpu()}): use one of {', '.join(here)} or host"
        )
    return host(asked)
