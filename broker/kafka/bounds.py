"""Checks a Kafka request body's counts and lengths before kio reads it.

Why: kio's reader is native code that sizes each array from its count field before it
reads the elements (`Vec::with_capacity(count)`), so a frame of a few bytes claiming
1.5 billion elements makes it ask for gigabytes, and a failed allocation aborts the
whole process: no Python exception, nothing to catch. `check_bounds` walks the body the
way kio will, reading only lengths and counts, and raises `BoundsError` (a ValueError)
when one cannot fit in the bytes left: an array of N elements needs at least N times its
element's smallest encoding (N * size for fixed-size primitives, at least 1 byte each),
a string or bytes field its length. Readable requests pass unchanged; kio still does the
real decoding and all other validation.

How: a request class is compiled once (cached per class) into a plan: runs of
fixed-size fields merged into one skip, length-prefixed strings and bytes, nested
entities (nullable ones behind an int8 marker), legacy (int32 count, -1 null) and
compact (unsigned varint count + 1, 0 null) arrays, and, for flexible versions, the
tagged-field section: each known tag's field is walked within its own declared size; an
unknown tag is refused (kio refuses it too). The classification is kio's own
(`kio.serial._introspect`, which kio's native reader uses to build its schema), so the
walk follows the same cursor as the decode. Pure and sans-IO.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)


class BoundsError(ValueError):
    """A count or length in a request body that its bytes cannot hold."""


# Wire sizes of kio's fixed-size kafka_types.
_FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_LENGTH_PREFIXED = frozenset({"string", "bytes", "records"})

# Step kinds of a plan. A step is a tuple (kind, ...):
#   (_SKIP, size)                     fixed-size fields
#   (_LEGACY_STRING,)                 int16 length, -1 null
#   (_LEGACY_BYTES,)                  int32 length, -1 null
#   (_COMPACT,)                       unsigned varint length + 1, 0 null (strings, bytes)
#   (_ENTITY, plan, nullable)         a nested entity, behind an int8 marker if nullable
#   (_LEGACY_ARRAY, elem, min_size)   int32 count, -1 null
#   (_COMPACT_ARRAY, elem, min_size)  unsigned varint count + 1, 0 null
# An array's elem is an int (fixed element size: the array is skipped whole) or a step.
_SKIP, _LEGACY_STRING, _LEGACY_BYTES, _COMPACT, _ENTITY, _LEGACY_ARRAY, _COMPACT_ARRAY = range(7)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """One entity class: its untagged fields in order, then (if flexible) its tags."""

    steps: tuple[tuple[Any, ...], ...]
    flexible: bool
    tagged: dict[int, tuple[Any, ...]]
    min_size: int
    fixed: int | None  # the untagged fields' size when all of them are fixed-size


def check_bounds(request_type: type, data: bytes, offset: int) -> int:
    """Walk the body of kio class `request_type` in `data` from `offset`; the position
    where it ends. Raises `BoundsError` if a count or length does not fit."""
    end = _walk_entity(plan_for(request_type), data, offset, len(data))
    if end > len(data):
        raise BoundsError(f"the body runs {end - len(data)} bytes past the frame")
    return end


@functools.cache
def plan_for(entity_type: type) -> _Plan:
    """The cached walk plan of a kio entity class (raises BoundsError for a field kind
    kio's reader does not have either)."""
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    steps: list[tuple[Any, ...]] = []
    tagged: dict[int, tuple[Any, ...]] = {}
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        step = _field_step(field, flexible)
        if tag is not None:
            tagged[int(tag)] = step
        elif step[0] == _SKIP and steps and steps[-1][0] == _SKIP:
            steps[-1] = (_SKIP, steps[-1][1] + step[1])
        else:
            steps.append(step)
    min_size = sum(_min_size(step) for step in steps) + (1 if flexible else 0)
    fixed = sum(step[1] for step in steps) if all(step[0] == _SKIP for step in steps) else None
    return _Plan(tuple(steps), flexible, tagged, min_size, fixed)


def _field_step(field: dataclasses.Field[Any], flexible: bool) -> tuple[Any, ...]:
    # kio reads a tagged primitive as not nullable; the walk reads a null length the
    # same either way and leaves refusing it to kio.
    field_class = classify_field(field)
    if isinstance(field_class, EntityField | EntityTupleField):
        # kio reads a nullable entity behind a marker whether or not it is tagged; array
        # elements are never nullable.
        nullable = isinstance(field_class, EntityField) and is_optional(field)
        inner: tuple[Any, ...] = (_ENTITY, plan_for(field_class.type_), nullable)
    else:
        inner = _primitive_step(get_schema_field_type(field), flexible, field.name)
    if not isinstance(field_class, EntityTupleField | PrimitiveTupleField):
        return inner
    elem: int | tuple[Any, ...] = inner
    if inner[0] == _SKIP:
        elem = inner[1]
    elif inner[0] == _ENTITY and not inner[1].flexible and inner[1].fixed is not None:
        elem = inner[1].fixed
    return (
        _COMPACT_ARRAY if flexible else _LEGACY_ARRAY,
        elem,
        max(1, _min_size(inner)),
    )


def _primitive_step(kafka_type: str, flexible: bool, name: str) -> tuple[Any, ...]:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return (_SKIP, size)
    if kafka_type not in _LENGTH_PREFIXED:
        raise BoundsError(f"field {name} has kafka_type {kafka_type!r}, unknown to the walker")
    if flexible:
        return (_COMPACT,)
    return (_LEGACY_STRING,) if kafka_type == "string" else (_LEGACY_BYTES,)


def _min_size(step: tuple[Any, ...]) -> int:
    """The fewest bytes `step` can take on the wire (null or empty)."""
    kind = step[0]
    if kind == _SKIP:
        return int(step[1])
    if kind == _ENTITY:
        return 1 if step[2] else int(step[1].min_size)
    return {_LEGACY_STRING: 2, _LEGACY_BYTES: 4, _COMPACT: 1, _LEGACY_ARRAY: 4}.get(kind, 1)


def _walk_entity(plan: _Plan, data: bytes, pos: int, end: int) -> int:
    # Fixed-size runs and short compact strings inline: this loop runs per element.
    for step in plan.steps:
        kind = step[0]
        if kind == _SKIP:
            pos += step[1]
        elif kind == _COMPACT and pos < end and data[pos] < 0x80:
            length = data[pos]  # the string's length + 1 (0: null), in one byte
            pos += length or 1
            if pos > end:
                raise BoundsError(f"length {length - 1} runs past byte {end}")
        else:
            pos = _walk_step(step, data, pos, end)
    if not plan.flexible:
        return pos
    if pos < end and data[pos] == 0:  # no tagged fields
        return pos + 1
    return _walk_tags(plan, data, pos, end)


def _walk_tags(plan: _Plan, data: bytes, pos: int, end: int) -> int:
    count, pos = _read_uvarint(data, pos, end)
    if count * 2 > end - pos:  # a tag and a size, at least
        raise BoundsError(f"{count} tagged fields at byte {pos}, {end - pos} bytes left")
    for _ in range(count):
        tag, pos = _read_uvarint(data, pos, end)
        size, pos = _read_uvarint(data, pos, end)
        if size > end - pos:
            raise BoundsError(f"tagged field {tag} of {size} bytes at byte {pos}, {end - pos} left")
        tagged_step = plan.tagged.get(tag)
        if tagged_step is None:
            raise BoundsError(f"unknown tagged field {tag} at byte {pos}")
        tag_end = pos + size
        pos = _walk_step(tagged_step, data, pos, tag_end)
        if pos > tag_end:
            raise BoundsError(f"tagged field {tag} runs past its {size} bytes")
    return pos


def _walk_step(step: tuple[Any, ...], data: bytes, pos: int, end: int) -> int:
    kind = step[0]
    if kind == _SKIP:
        return int(pos + step[1])
    if kind == _ENTITY:
        if step[2]:  # nullable: an int8 marker, -1 for null
            if pos >= end:
                raise BoundsError(f"entity marker runs past byte {end}")
            pos += 1
            if data[pos - 1] == 0xFF:
                return pos
        return _walk_entity(step[1], data, pos, end)
    if kind == _COMPACT or kind == _COMPACT_ARRAY:
        count, pos = _read_uvarint(data, pos, end)
        count -= 1
    elif kind == _LEGACY_STRING:
        if pos + 2 > end:
            raise BoundsError(f"string length runs past byte {end}")
        (count,) = _INT16.unpack_from(data, pos)
        pos += 2
    else:
        if pos + 4 > end:
            raise BoundsError(f"length runs past byte {end}")
        (count,) = _INT32.unpack_from(data, pos)
        pos += 4
    if count < 0:
        if count == -1:
            return pos  # null (kio refuses it where the field is not nullable)
        raise BoundsError(f"negative length {count} at byte {pos}")
    if kind < _LEGACY_ARRAY:  # string or bytes
        if count > end - pos:
            raise BoundsError(f"length {count} at byte {pos}, {end - pos} bytes left")
        return pos + count
    elem, min_size = step[1], step[2]
    if count * min_size > end - pos:
        raise BoundsError(
            f"array of {count} elements at byte {pos} needs at least {count * min_size} "
            f"bytes, {end - pos} left"
        )
    if isinstance(elem, int):
        return pos + count * elem
    if elem[0] == _ENTITY and not elem[2]:
        plan = elem[1]
        fixed = plan.fixed
        if fixed is None:
            for _ in range(count):
                pos = _walk_entity(plan, data, pos, end)
            return pos
        for _ in range(count):  # flexible, fixed-size fields then (mostly no) tags
            pos += fixed
            if pos < end and data[pos] == 0:
                pos += 1
            else:
                pos = _walk_tags(plan, data, pos, end)
        return pos
    for _ in range(count):
        pos = _walk_step(elem, data, pos, end)
    return pos


def _read_uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint as kio reads it: at most 5 bytes."""
    if pos < end and data[pos] < 0x80:
        return data[pos], pos + 1
    value = shift = 0
    for _ in range(5):
        if pos >= end:
            raise BoundsError(f"varint runs past byte {end}")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise BoundsError(f"varint of more than 5 bytes at byte {pos - 5}")
