"""A helper process of ``thrifty.compile``: LLVM IR modules on stdin, their object code on stdout
(optimised at the LLVM speed level given as the one argument, 1 without one).

``objects._compile`` shares a large forest's modules between its own process and one helper per
further core, since llvmlite serialises LLVM calls within a process. Both sides pack their parts
with ``cache.pack``.
"""

from __future__ import annotations

import sys

from thrifty.runtime.compiled.cache import pack, unpack
from thrifty.runtime.compiled.objects import _emit


def main() -> int:
    irs = unpack(sys.stdin.buffer.read())
    if irs is None:
        print(
            "thrifty.runtime.compiled.llc: expected LLVM IR modules packed by "
            "thrifty.runtime.compiled.cache.pack",
            file=sys.stderr,
        )
        return 2
    level = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    sys.stdout.buffer.write(pack([_emit(ir.decode(), level=level) for ir in irs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
