"""A job's payload as the program sees it: bytes as they are, or a typed
value carried as JSON — a dataclass, or any value ``json`` writes (a
dict, a list, a number ...) — read back into the same type by the
worker's function.

The rules, one for each side:

- ``encode(value)``: bytes, bytearray and memoryview go as they are; a
  str as its UTF-8 text (as before typed payloads: to send a JSON
  string, pass ``json.dumps(s)``); None as no payload; a dataclass
  instance as the JSON object of its fields (``dataclasses.asdict``);
  anything else as ``json.dumps`` writes it.
- ``decode(payload, cls)``: ``bytes`` (or no type) gives the bytes, ``str``
  their UTF-8 text, a dataclass the instance built from the JSON object
  (its fields' own dataclasses, lists and dicts of them, and optional ones
  built too; keys it has no field for are ignored, as Go's encoding/json
  does), any other type the JSON value, checked against it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Dict, Optional, Type, TypeVar, Union, cast

T = TypeVar("T")

# Union, and X | Y (types.UnionType from Python 3.10 on).
_UNIONS: typing.Tuple[Any, ...] = tuple(u for u in (Union, getattr(types, "UnionType", None)) if u is not None)


class PayloadError(ValueError):
    """A payload that does not decode into the type asked for, or a value
    that does not encode."""


def kind_of(value_or_type: Any) -> Optional[str]:
    """The kind a payload's type names: its class attribute ``kind`` (a
    ``ClassVar[str]`` of a dataclass), or None."""
    cls = value_or_type if isinstance(value_or_type, type) else type(value_or_type)
    kind = getattr(cls, "kind", None)
    return kind if isinstance(kind, str) and kind else None


def encode(value: Any) -> bytes:
    """The payload of value (the rules above)."""
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:
        raise PayloadError(f"a {type(value).__name__} is not bytes, str, a dataclass or a JSON value: {e}") from None


def decode(payload: bytes, cls: Optional[Type[T]]) -> T:
    """payload read as a cls (the rules above)."""
    if cls is None or cls is bytes:
        return cast(T, bytes(payload))
    if cls is str:
        try:
            return cast(T, payload.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise PayloadError(f"not UTF-8 text: {e}") from None
    try:
        value = json.loads(payload)
    except ValueError as e:
        raise PayloadError(f"not JSON: {e}") from None
    return cast(T, _build(cls, value, "payload"))


def _build(tp: Any, value: Any, where: str) -> Any:
    """value, a JSON value, as a tp."""
    if tp is Any or tp is object:
        return value
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in _UNIONS:
        if value is None and type(None) in args:
            return None
        errs = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _build(a, value, where)
            except PayloadError as e:
                errs.append(str(e))
        raise PayloadError("; ".join(errs) or f"{where}: {value!r} is none of {tp}")
    if origin in (list, typing.List):
        _check(value, list, where, tp)
        item = args[0] if args else Any
        return [_build(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin in (dict, typing.Dict):
        _check(value, dict, where, tp)
        item = args[1] if len(args) == 2 else Any
        return {k: _build(item, v, f"{where}[{k!r}]") for k, v in value.items()}
    if origin is not None:
        # Another generic (a tuple, a Literal ...): its plain JSON value.
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        _check(value, dict, where, tp)
        hints = typing.get_type_hints(tp)
        kwargs: Dict[str, Any] = {}
        for f in dataclasses.fields(tp):
            if not f.init:
                continue
            if f.name in value:
                kwargs[f.name] = _build(hints.get(f.name, Any), value[f.name], f"{where}.{f.name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise PayloadError(f"{where}: no field {f.name!r} (the {tp.__name__} it is read into needs one)")
        return tp(**kwargs)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(tp, type):
        _check(value, tp, where, tp)
    return value


def _check(value: Any, want: type, where: str, tp: Any) -> None:
    if isinstance(value, bool) and want in (int, float):
        ok = False
    else:
        ok = isinstance(value, want)
    if not ok:
        name = getattr(tp, "__name__", None) or str(tp)
        raise PayloadError(f"{where}: {_json_kind(value)} where {name} is wanted")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}"[:80]
    if isinstance(value, list):
        return "an array"
    return "an object"
