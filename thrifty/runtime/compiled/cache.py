"""The on-disk cache of compiled code: each entry verified before it is loaded.

An entry is ``MAGIC``, then the SHA-256 digest of its cache key and payload, then the payload
(the object files, ``pack``-ed). A read checks all three, so a flipped bit, a truncated write or
an entry copied under another key is found before its code runs: the entry is dropped with a
warning and the caller compiles afresh. The digest guards against damage, not against an
attacker who can write the cache (they could write a matching digest too); that is what the
permission check is for: on POSIX systems the cache directory is created private to the user
(``0700``, entries ``0600``), and code is never loaded from a directory or an entry that another
user owns or can write.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat
import struct
import sys
import warnings
from pathlib import Path

# The first bytes of an entry: the format, so a file of another kind is not taken for one.
MAGIC = b"THRIFTY-OBJECTS-1\n"
_DIGEST = hashlib.sha256().digest_size
# The code generator: every module of this package (IR, layouts, tables, the rules that choose).
GENERATOR = Path(__file__).parent


class CacheWarning(UserWarning):
    """A cache entry or directory was not used (damaged, or writable by other users); the code
    was compiled afresh, so results are unaffected."""


def cache_dir() -> Path:
    """Where compiled forests are kept: ``$THRIFTY_CACHE_DIR``, else the platform's cache
    directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
    ``%LOCALAPPDATA%`` on Windows) under ``thrifty/compiled``."""
    if os.environ.get("THRIFTY_CACHE_DIR"):
        return Path(os.environ["THRIFTY_CACHE_DIR"])
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "thrifty" / "compiled"


@functools.cache
def generator_digest(directory: Path = GENERATOR) -> str:
    """A digest of the generator's source (every ``*.py`` of ``directory``, by name), part of
    every cache key beside ``CODEGEN_VERSION``.

    Why: the version is bumped by hand, and a change to the generated code that forgot the bump
    would load stale object code, whose answers no check on the entry can tell from right ones.
    With the source in the key, any edit to the generator (a comment too, at the price of one
    recompile) leaves older entries unused. Sources that cannot be read (a frozen install)
    leave the version alone to say it.
    """
    h = hashlib.sha256()
    try:
        for path in sorted(directory.glob("*.py")):
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    except OSError:
        return "unread"
    return h.hexdigest()[:16]


def pack(parts: list[bytes]) -> bytes:
    """``parts`` as one string: their count, then each one's size and bytes (little-endian)."""
    return struct.pack("<Q", len(parts)) + b"".join(struct.pack("<Q", len(o)) + o for o in parts)


def unpack(data: bytes) -> list[bytes] | None:
    """The parts of ``pack``, or None when ``data`` is not such a string."""
    parts, at = [], 0
    try:
        (count,) = struct.unpack_from("<Q", data, 0)
        at = 8
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", data, at)
            parts.append(data[at + 8 : at + 8 + size])
            at += 8 + size
    except struct.error:
        return None
    return parts if at == len(data) else None


def _digest(key: str, payload: bytes) -> bytes:
    return hashlib.sha256(key.encode() + b"\0" + payload).digest()


def entry_bytes(key: str, objects: list[bytes]) -> bytes:
    """An entry as written for ``key``: magic, digest of key and payload, payload."""
    payload = pack(objects)
    return MAGIC + _digest(key, payload) + payload


def read(key: str) -> list[bytes] | None:
    """The object files cached for ``key``, or None (nothing cached, or an entry that failed its
    checks: then a ``CacheWarning`` says why, and a damaged entry is removed)."""
    path = cache_dir() / f"{key}.o"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    unsafe = _writable_by_others(path.parent) or _writable_by_others(path)
    if unsafe:
        warnings.warn(
            f"not loading compiled code from {unsafe}: other users can write it, so they could "
            "choose the code this process runs; compiling instead. Make it private "
            f"(chmod 700 {path.parent}; chmod 600 its files) or set THRIFTY_CACHE_DIR to a "
            "directory only you can write",
            CacheWarning,
            stacklevel=3,
        )
        return None
    head = len(MAGIC) + _DIGEST
    payload = data[head:]
    objects = unpack(payload) if data[: len(MAGIC)] == MAGIC and len(data) >= head else None
    if objects is None or data[len(MAGIC) : head] != _digest(key, payload):
        warnings.warn(
            f"compiled-code cache entry {path} is damaged (its digest does not match); removing "
            "it and compiling again",
            CacheWarning,
            stacklevel=3,
        )
        try:
            path.unlink()
        except OSError:
            pass  # a later process finds it damaged too, and compiles as this one does
        return None
    return objects


def write(key: str, objects: list[bytes]) -> None:
    """Store ``objects`` for ``key``, atomically (another process may be reading or writing the
    same key), in a directory created private to the user. A cache that cannot be written, or
    that other users can write, only costs a compile next time."""
    directory = cache_dir()
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if _writable_by_others(directory):
            return  # read() refuses it; writing there would only feed the next refusal
        tmp = directory / f"{key}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(entry_bytes(key, objects))
        os.replace(tmp, directory / f"{key}.o")
    except OSError:
        pass


def _writable_by_others(path: Path) -> Path | None:
    """``path`` when another user owns it or may write it (POSIX), else None."""
    if os.name != "posix":
        return None  # Windows ACLs are not mode bits: the user's profile directory is private
    try:
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return path
    return None
