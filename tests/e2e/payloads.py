"""Independent builder of the expected v1 notification payloads (seed 000, SPEC §7) and of the FCM request body.

Nothing here is taken from the gateway's output: expectations are computed from the contract.

JSON value text rules (what the gateway must produce for ``d``, ``added``, ``changed``):
- compact (no whitespace), object keys sorted by their UTF-8 bytes;
- numbers kept exactly as the publisher wrote them (``1.50`` stays ``1.50``);
- strings escaped minimally: ``"`` ``\\`` and control characters only (``/`` and non-ASCII verbatim);
- ``null`` children and empty-object children are removed (recursively: a database has no null nodes);
- a node that does not exist (removed) has the value ``null``.

Data payload rules: all values are strings, keys in the seed's order, measured as the UTF-8 length of the
compact serialisation; 4064 bytes or more triggers ``TooBig`` / ``OnlyKeys``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Sequence

SIZE_LIMIT = 4064  # a data payload of this many bytes or more is too big (seed 000)


@dataclass(frozen=True)
class Num:
    """A JSON number kept as the publisher wrote it."""

    text: str


def parse(text: str) -> Any:
    """Parses JSON text keeping numbers verbatim and object member order (dicts keep insertion order)."""
    return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=lambda c: Num(c))


def normalise(value: Any) -> Any:
    """Drops null and empty-object children, recursively. Returns None for null / empty object."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            nv = normalise(v)
            if nv is not None:
                out[k] = nv
        return out or None
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def _utf8_key(k: str) -> bytes:
    return k.encode("utf-8")


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_string(s: str) -> str:
    """Minimal JSON string escaping: quote, backslash, control characters (short forms where JSON has one,
    otherwise \\u00xx)."""
    out = ['"']
    for ch in s:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_text(value: Any) -> str:
    """The gateway's JSON text of a database value (see module doc). ``None`` → ``null``."""
    value = normalise(value)
    return _dump(value)


def _dump(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Num):
        return value.text
    if isinstance(value, int) or isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, str):
        return escape_string(value)
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: _utf8_key(kv[0]))
        return "{" + ",".join(escape_string(k) + ":" + _dump(v) for k, v in items) + "}"
    raise TypeError(f"not a JSON value: {value!r}")


# ---------------------------------------------------------------------------------------------------------
# A model of the database, to compute the value at a subscription path after a sequence of writes
# ---------------------------------------------------------------------------------------------------------


def split_path(path: str) -> list[str]:
    return [k for k in path.split("/") if k]


class Tree:
    """The database of one app, applied from change events exactly as SPEC §2 describes the ops."""

    def __init__(self) -> None:
        self.root: Any = None

    def get(self, path: str) -> Any:
        node = self.root
        for k in split_path(path):
            if not isinstance(node, dict) or k not in node:
                return None
            node = node[k]
        return node

    def _put(self, keys: list[str], value: Any) -> None:
        value = normalise(value)
        if not keys:
            self.root = value
            return
        if not isinstance(self.root, dict):
            self.root = {}
        node = self.root
        for k in keys[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}
            node = node[k]
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
        self.root = normalise(self.root)

    def set(self, path: str, after: Optional[str]) -> None:
        self._put(split_path(path), parse(after) if after is not None else None)

    def merge(self, path: str, after: str) -> None:
        children = parse(after)
        assert isinstance(children, dict)
        base = split_path(path)
        for k, v in children.items():
            self._put(base + [k], v)

    def remove(self, path: str) -> None:
        self._put(split_path(path), None)

    def apply(self, path: str, op: str, after: Optional[str] = None) -> None:
        """Applies one change event (SET / MERGE / REMOVE / SNAPSHOT)."""
        if op in ("SET", "SNAPSHOT"):
            self.set(path, after)
        elif op == "MERGE":
            self.merge(path, after)
        elif op == "REMOVE":
            self.remove(path)
        else:
            raise ValueError(op)


def children_diff(old: Any, new: Any) -> tuple[dict, list[str], dict]:
    """(added, removed keys sorted by UTF-8 bytes, changed) between two values of a node."""
    old_c = old if isinstance(old, dict) else {}
    new_c = new if isinstance(new, dict) else {}
    added = {k: v for k, v in new_c.items() if k not in old_c}
    removed = sorted((k for k in old_c if k not in new_c), key=_utf8_key)
    changed = {k: v for k, v in new_c.items() if k in old_c and json_text(old_c[k]) != json_text(v)}
    return added, removed, changed


# ---------------------------------------------------------------------------------------------------------
# Data payloads (v1)
# ---------------------------------------------------------------------------------------------------------

Pairs = Sequence[tuple[str, str]]


def serialise_data(pairs: Pairs) -> bytes:
    """Compact JSON object of string values in the given key order, UTF-8."""
    return ("{" + ",".join(escape_string(k) + ":" + escape_string(v) for k, v in pairs) + "}").encode("utf-8")


def size(pairs: Pairs) -> int:
    return len(serialise_data(pairs))


def normalise_sp(path: str) -> str:
    return "/" + "/".join(split_path(path))


def no_data(app: str, sp: str) -> list[tuple[str, str]]:
    return [("t", "noData"), ("app", app), ("sp", normalise_sp(sp))]


def value_ok(app: str, sp: str, value: Any) -> list[tuple[str, str]]:
    return [("s", "OK"), ("t", "value"), ("app", app), ("sp", normalise_sp(sp)), ("d", json_text(value))]


def value_status(app: str, sp: str, status: str) -> list[tuple[str, str]]:
    return [("s", status), ("t", "value"), ("app", app), ("sp", normalise_sp(sp))]


def value(app: str, sp: str, val: Any) -> list[tuple[str, str]]:
    """value-mode payload with the size rule applied."""
    ok = value_ok(app, sp, val)
    if size(ok) >= SIZE_LIMIT:
        return value_status(app, sp, "TooBig")
    return ok


def not_loaded(app: str, sp: str) -> list[tuple[str, str]]:
    return value_status(app, sp, "NotLoaded")


def child_event(app: str, sp: str, added: dict, removed: Sequence[str], changed: dict) -> list[tuple[str, str]]:
    """childEvent payload with the size rules applied (OK → OnlyKeys → TooBig)."""
    sp = normalise_sp(sp)
    removed_text = "[" + ",".join(escape_string(k) for k in sorted(removed, key=_utf8_key)) + "]"

    def build(status: str, a: str, r: str, c: str) -> list[tuple[str, str]]:
        return [("s", status), ("t", "childEvent"), ("app", app), ("sp", sp), ("added", a), ("removed", r),
                ("changed", c)]

    ok = build("OK", _dump_children(added), removed_text, _dump_children(changed))
    if size(ok) < SIZE_LIMIT:
        return ok
    only_keys = build("OnlyKeys", _dump_children({k: True for k in added}), removed_text,
                      _dump_children({k: True for k in changed}))
    if size(only_keys) < SIZE_LIMIT:
        return only_keys
    return build("TooBig", "{}", "[]", "{}")


def _dump_children(children: dict) -> str:
    # An empty set of children is the empty object, not null.
    items = sorted(children.items(), key=lambda kv: _utf8_key(kv[0]))
    return "{" + ",".join(escape_string(k) + ":" + _dump(normalise(v)) for k, v in items) + "}"


def revoke(app: str, sp: str, reason: str) -> list[tuple[str, str]]:
    return [("t", "revoke"), ("r", reason), ("app", app), ("sp", normalise_sp(sp))]


# ---------------------------------------------------------------------------------------------------------
# FCM HTTP v1 request body
# ---------------------------------------------------------------------------------------------------------


def fcm_body(token: str, pairs: Pairs) -> bytes:
    """The exact request body: {"message":{"token":…,"data":{…},"android":{…},"apns":{…}}}."""
    return (
        b'{"message":{"token":' + escape_string(token).encode("utf-8")
        + b',"data":' + serialise_data(pairs)
        + b',"android":{"priority":"high"}'
        + b',"apns":{"headers":{"apns-push-type":"background","apns-priority":"5"},'
          b'"payload":{"aps":{"content-available":1}}}}}'
    )


# ---------------------------------------------------------------------------------------------------------
# Raw JSON member extraction (so assertions compare the bytes the gateway sent, not a re-serialisation)
# ---------------------------------------------------------------------------------------------------------

_WS = " \t\r\n"


def raw_member(text: str, *keys: str) -> Optional[str]:
    """Returns the raw JSON text of the member at ``keys`` (nested objects), or None when absent."""
    decoder = json.JSONDecoder()
    pos = 0
    for depth, key in enumerate(keys):
        pos = _skip_ws(text, pos)
        if text[pos] != "{":
            return None
        pos += 1
        found = False
        while True:
            pos = _skip_ws(text, pos)
            if text[pos] == "}":
                return None
            if text[pos] != '"':
                raise ValueError(f"bad JSON at {pos}")
            name, pos = json.decoder.scanstring(text, pos + 1)
            pos = _skip_ws(text, pos)
            if text[pos] != ":":
                raise ValueError(f"bad JSON at {pos}")
            pos = _skip_ws(text, pos + 1)
            start = pos
            _, end = decoder.raw_decode(text, pos)
            if name == key:
                if depth == len(keys) - 1:
                    return text[start:end]
                pos = start
                found = True
                break
            pos = _skip_ws(text, end)
            if text[pos] == ",":
                pos += 1
        if not found:
            return None
    return None


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def pretty(pairs: Pairs) -> str:
    return serialise_data(pairs).decode("utf-8")
