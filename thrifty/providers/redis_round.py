"""One Redis round trip per round of lazy evaluation: a Lua script that reads every hash a round
needs and, for tables joined by keys, follows each row's link to its linked record.

redis-py spends tens of microseconds of Python per command it packs and parses, and a pipeline
per table meant a round of tables joined by keys waited for the root table's answer before it
could ask the linked tables: up to three round trips, each of two commands per hash. The script
is one ``EVALSHA`` per round: for each hash, ``EXISTS`` (``HMGET`` answers a missing hash as
missing fields) and ``HMGET`` of the fields the round needs, and for each linked table a row
needs, the link field's record's ``HMGET``, all server-side. Redis loads the script on the first
``EVALSHA`` that finds it missing (``SCRIPT LOAD``), once per server (and again after a restart).

The script's answer is one flat array whose layout the request fixes, so the values are placed
by precomputed positions and converted to floats by NumPy in one call. A link whose text is not
a plain integer (``"1e3"``, 16 digits or more) is not followed by the script: its record is read
by a second round trip, so the link is read exactly as Python reads it.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thrifty.exceptions import ProviderError

# KEYS: the hashes of the round. ARGV, per hash: its number of fields and the fields, its number
# of lookups, and per lookup: the position of the link among the hash's fields, the linked
# table's prefix, its number of fields and the fields. The answer, per hash: 1 or 0 (the hash
# exists), its values (nil for a missing field), and per lookup a status (0: no link; 1: the
# linked hash was read; 2: the linked hash does not exist; 3: the link is not plain integer text,
# not followed) and the linked hash's values. A hash Redis refuses to read (not a hash) ends the
# script with the answer {"error", key, message}.
LUA = """
local out, a = {}, 1
local function read(key, n)
  if not key then
    for _ = 1, n do out[#out + 1] = false end
    return nil
  end
  for lo = a, a + n - 1, 1000 do
    local got = redis.pcall('HMGET', key, unpack(ARGV, lo, math.min(lo + 999, a + n - 1)))
    if got.err then return got.err end
    for j = 1, #got do out[#out + 1] = got[j] end
  end
  return nil
end
for i = 1, #KEYS do
  local key, n = KEYS[i], tonumber(ARGV[a])
  a = a + 1
  local first = #out + 2
  local found = redis.call('EXISTS', key)
  out[#out + 1] = found
  local e = read(found == 1 and key or nil, n)
  if e then return {'error', key, e} end
  a = a + n
  local m = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, m do
    local at, prefix, k = tonumber(ARGV[a]), ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
    local link, status, name = out[first + at - 1], 0, nil
    if found == 1 and link then
      local digits = string.match(link, '^[+-]?(%d+)%.?0*$')
      if digits and #digits <= 15 then
        name = prefix .. string.format('%d', tonumber(link))
        status = 2 - redis.call('EXISTS', name)
      else
        status = 3
      end
    end
    out[#out + 1] = status
    e = read(status == 1 and name or nil, k)
    if e then return {'error', name, e} end
    a = a + k
  end
end
return out
"""
SHA = hashlib.sha1(LUA.encode()).hexdigest()

# Statuses of a lookup in the script's answer.
NO_LINK, READ, NO_RECORD, NOT_FOLLOWED = 0, 1, 2, 3

# A stored value as Redis holds it: a decimal number, or nan/inf as Python writes them.
_NUMBER = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)"
NUMBER = re.compile(_NUMBER, re.I)
# Several values joined by newlines, checked in one call (no value holds a newline if it passes).
_NUMBERS = re.compile(f"(?:{_NUMBER})(?:\n(?:{_NUMBER}))*", re.I)
_NUMBERS_BYTES = re.compile(_NUMBERS.pattern.encode(), re.I)


@dataclass
class RoundAnswer:
    """What the script found: ``lost`` (keys of hashes that do not exist), ``lost_linked`` (per
    linked table, the links naming no record) and ``unfollowed`` ((hash, table) pairs whose link
    the script did not follow)."""

    lost: list[Any] = field(default_factory=list)
    lost_linked: dict[int, list[float]] = field(default_factory=dict)
    unfollowed: list[tuple[str, int]] = field(default_factory=list)

    def add(self, other: RoundAnswer) -> None:
        """Take in what another call of the same round found."""
        self.lost += other.lost
        self.unfollowed += other.unfollowed
        for t, links in other.lost_linked.items():
            self.lost_linked.setdefault(t, []).extend(links)


class HashReads:
    """The reads of one round: per hash, the fields wanted and the output slots of each; per
    linked table a row needs, the fields wanted from the record its link names.

    Slots index the round's flat output; each (hash, linked table) pair's link gets a slot past
    ``n_out`` (read, checked and used to name the linked record, never returned).
    """

    def __init__(self, n_out: int, links: list[tuple[str, Any]] | None = None) -> None:
        self.n_out = n_out
        self.hashes: dict[str, tuple[Any, dict[str, list[int]], dict[int, dict[str, list[int]]]]] = {}
        self.links = links or []  # per linked table: (link field, its provider)
        self.link_slots: dict[tuple[str, int], int] = {}

    @property
    def n_slots(self) -> int:
        """Output slots and link slots."""
        return self.n_out + len(self.link_slots)

    def add(self, name: str, key: Any, field: str, slot: int) -> None:
        """Row key ``key``'s hash ``name``: its ``field`` goes to ``slot``."""
        self._hash(name, key)[1].setdefault(field, []).append(slot)

    def add_linked(self, name: str, key: Any, table: int, field: str, slot: int) -> None:
        """``field`` of the record of linked table ``table`` that hash ``name`` links to goes to
        ``slot``."""
        self._hash(name, key)[2].setdefault(table, {}).setdefault(field, []).append(slot)
        self.link_slots.setdefault((name, table), self.n_slots)

    def _hash(self, name: str, key: Any) -> tuple[Any, dict[str, list[int]], dict[int, dict[str, list[int]]]]:
        got = self.hashes.get(name)
        if got is None:
            got = self.hashes[name] = (key, {}, {})
        return got


@dataclass
class ScriptCall:
    """One call of the script: its keys and arguments, and where its answer's entries go."""

    keys: list[str] = field(default_factory=list)
    args: list[Any] = field(default_factory=list)
    statuses: list[tuple[int, Any]] = field(default_factory=list)  # (position, key) per hash
    lookups: list[tuple[int, str, int]] = field(default_factory=list)  # (position, hash, table)
    positions: list[int] = field(default_factory=list)  # answer position of each value read
    # Per value read: its hash's name, or the prefix of a linked hash and the answer position
    # of the link naming it (-1 for the hash's own values), and its field.
    what: list[tuple[str, int, str]] = field(default_factory=list)
    src: list[int] = field(default_factory=list)  # per output slot filled: the value filling it
    dst: list[int] = field(default_factory=list)
    size: int = 0  # entries of the answer

    def place(self, field_slots: dict[str, list[int]], name: str, link_at: int) -> None:
        for f, slots in field_slots.items():
            self.src.extend([len(self.what)] * len(slots))
            self.dst.extend(slots)
            self.what.append((name, link_at, f))
            self.positions.append(self.size)
            self.size += 1


def encode(reads: HashReads, names: list[str]) -> ScriptCall:
    """The script call reading the hashes ``names`` of ``reads``."""
    call = ScriptCall()
    for name in names:
        key, own, linked = reads.hashes[name]
        fields = dict(own)
        for t in linked:  # each link is read with the hash's fields, to a slot of its own
            link = reads.links[t][0]
            fields[link] = [*fields.get(link, []), reads.link_slots[(name, t)]]
        order = list(fields)
        call.keys.append(name)
        call.args += [len(order), *order, len(linked)]
        call.statuses.append((call.size, key))
        call.size += 1
        values_at = call.size
        call.place(fields, name, -1)
        for t, wanted in linked.items():
            link, provider = reads.links[t]
            call.args += [order.index(link) + 1, provider.prefix, len(wanted), *wanted]
            call.lookups.append((call.size, name, t))
            call.size += 1
            call.place(wanted, provider.prefix, values_at + order.index(link))
    return call


def decode(call: ScriptCall, answer: Any, reads: HashReads, out: np.ndarray, where: str) -> RoundAnswer:
    """Place the script's ``answer`` in ``out``; what was missing is returned."""
    if answer and isinstance(answer[0], (bytes, str)):
        name, message = (_text(x) for x in answer[1:3])
        raise ProviderError(
            f"{where} refused to read {name!r}: {message}; store each row's features as one hash, "
            "a field per feature"
        )
    if len(answer) != call.size:
        raise ProviderError(f"{where} answered {len(answer)} values for a round of {call.size}; is it Redis?")
    numbers = _numbers([answer[p] for p in call.positions], call.what, answer)
    out[np.asarray(call.dst, dtype=np.int64)] = numbers[np.asarray(call.src, dtype=np.int64)]
    result = RoundAnswer([key for p, key in call.statuses if not answer[p]])
    for p, name, t in call.lookups:
        if answer[p] == NO_RECORD:
            result.lost_linked.setdefault(t, []).append(float(out[reads.link_slots[(name, t)]]))
        elif answer[p] == NOT_FOLLOWED:
            result.unfollowed.append((name, t))
    return result


def read_round(client: Any, where: str, reads: HashReads, names: list[str], out: np.ndarray) -> RoundAnswer:
    """Read the hashes ``names`` of ``reads`` with one ``EVALSHA`` (loading the script into a
    server that does not have it): values and links to their slots of ``out``."""
    import redis

    call = encode(reads, names)
    with _errors(where):
        try:
            answer = client.evalsha(SHA, len(call.keys), *call.keys, *call.args)
        except redis.exceptions.NoScriptError:
            client.script_load(LUA)
            answer = client.evalsha(SHA, len(call.keys), *call.keys, *call.args)
    return decode(call, answer, reads, out, where)


async def read_round_async(
    link: Any, where: str, reads: HashReads, names: list[str], out: np.ndarray
) -> RoundAnswer:
    """:func:`read_round` on the event loop: the same ``EVALSHA`` sent on ``link`` (a
    :class:`thrifty.providers.redis_async.AsyncLink`), the same errors."""
    from thrifty.providers.redis_async import RespError

    call = encode(reads, names)
    command = ("EVALSHA", SHA, len(call.keys), *call.keys, *call.args)
    try:
        answer = await link.call(*command)
        if isinstance(answer, RespError) and str(answer).startswith("NOSCRIPT"):
            loaded = await link.call("SCRIPT", "LOAD", LUA)
            if isinstance(loaded, RespError):
                answer = loaded
            else:
                answer = await link.call(*command)
    except TimeoutError:
        raise TimeoutError(f"{where} did not answer in time") from None
    except (OSError, ValueError) as exc:  # refused, reset, closed; a reply that is not Redis's
        raise ConnectionError(f"{where} failed: {type(exc).__name__}: {exc}") from None
    if isinstance(answer, RespError):
        raise ProviderError(f"{where} refused the round's script: {answer}")
    return decode(call, answer, reads, out, where)


@contextlib.contextmanager
def _errors(where: str) -> Iterator[None]:
    """redis-py's exceptions as thrifty's, in one line."""
    import redis

    try:
        yield
    except redis.exceptions.TimeoutError:
        raise TimeoutError(f"{where} did not answer in time") from None
    except redis.exceptions.ResponseError as exc:
        raise ProviderError(f"{where} refused the round's script: {exc}") from None
    except redis.exceptions.RedisError as exc:
        raise ConnectionError(f"{where} failed: {type(exc).__name__}: {exc}") from None


def _numbers(raw: list[Any], what: list[tuple[str, int, str]], answer: list[Any]) -> np.ndarray:
    """The stored values as floats (NaN for nil), checked in one regular-expression call: a
    ProviderError names the first value that is not a decimal number (Python's float() would
    also read "1_000" and surrounding spaces)."""
    out = np.full(len(raw), np.nan)
    present = [i for i, v in enumerate(raw) if v is not None]
    if not present:
        return out
    texts = [raw[i] for i in present]
    if not _all_numbers(texts):
        for i in present:
            if not NUMBER.fullmatch(_text(raw[i])):
                name, link_at, field = what[i]
                if link_at >= 0:  # a linked hash: named as the script named it
                    name += f"{int(float(_text(answer[link_at])))}"
                raise not_a_number(raw[i], name, field)
    out[present] = np.array(texts, dtype=np.float64)
    return out


def _all_numbers(texts: list[Any]) -> bool:
    """Every value is a decimal number: one regular-expression call over the values joined by
    newlines (and a value holding a newline, which would pass as two, is counted out)."""
    if all(isinstance(t, bytes) for t in texts):
        raw = b"\n".join(texts)
        return _NUMBERS_BYTES.fullmatch(raw) is not None and raw.count(b"\n") == len(texts) - 1
    text = "\n".join(_text(t) for t in texts)  # a client decoding answers (decode_responses=True)
    return _NUMBERS.fullmatch(text) is not None and text.count("\n") == len(texts) - 1


def not_a_number(raw: Any, name: str, field: str) -> ProviderError:
    """The error for a stored value that is not a decimal number."""
    text = _text(raw)
    shown = text if len(text) <= 40 else text[:37] + "..."
    return ProviderError(
        f"field {field!r} of {name!r} holds {shown!r}, not a number; store numbers (category "
        "codes for categorical features), and leave a missing value's field out"
    )


def _text(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
