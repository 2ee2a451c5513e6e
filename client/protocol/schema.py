"""Declarative message schemas: the annotations of a dataclass are its wire schema.

How it works:
- `@struct` turns a class into a frozen, slotted, keyword-only dataclass and compiles its
  annotations into a `StructSchema`. Supported field types: `int` (signed 64-bit),
  `float` (a double), `bool`, `str`, `bytes`, `T | None` (nullable), `list[T]` and any
  other `@struct` class. A field with a default (use `empty_list()` for `= []`) may be
  absent on the wire; a field without one is required. A message is therefore a few lines:

      @struct
      class FetchTopic:
          topic: str
          partitions: list[FetchPartition]

- Encoding: on the wire a struct is a msgpack map keyed by field name. `msgpack_default`
  is the shallow hook handed to `msgpack.packb(default=...)`: msgpack's C packer walks
  lists and primitives itself and calls back only for structs, so encoding builds no
  intermediate copies. `to_plain` does the same conversion recursively in Python (for
  tests, logs, JSON).
- Decoding: `decode_struct(cls, value)` validates a value produced by `msgpack.unpackb` and
  builds the dataclass. Validation is strict where it protects the receiver (bool is not
  int, ints fit in 64 bits, required fields present) and lenient where it helps
  evolution (unknown map keys are ignored). A mismatch raises `SchemaError` whose path
  names the field: "topics[0].partitions[2].fetch_offset: expected int, got str".
  Each struct's decoder (and encoder) is generated once, when the class is defined, as
  straight-line Python (the way `dataclasses` writes `__init__`): primitives are checked
  inline, bytes and lists of primitives are kept as msgpack produced them (records are
  never copied here), and the error path re-runs the slow generic checks to name the field.
- Encoding is not validated: a wrong type in a message you build is reported by the
  receiver (INVALID_REQUEST with the field path) or by msgpack (TypeError).
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from client.protocol.errors import SchemaError

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

T = TypeVar("T")
Decoder = Callable[[Any], Any]

_SCHEMA_ATTR = "__struct_schema__"


class Kind(enum.Enum):
    INT = "int"
    FLOAT = "float"  # a double (KIP-546's quota values)
    BOOL = "bool"
    STR = "str"
    BYTES = "bytes"
    LIST = "list"
    STRUCT = "struct"


@dataclasses.dataclass(frozen=True, slots=True)
class TypeSpec:
    """The wire type of one field (or of a list's items)."""

    kind: Kind
    nullable: bool = False
    item: TypeSpec | None = None  # Kind.LIST only
    struct: type | None = None  # Kind.STRUCT only

    def describe(self) -> str:
        if self.kind is Kind.LIST:
            assert self.item is not None
            text = f"list[{self.item.describe()}]"
        elif self.kind is Kind.STRUCT:
            assert self.struct is not None
            text = self.struct.__name__
        else:
            text = self.kind.value
        return f"{text} | None" if self.nullable else text


@dataclasses.dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: TypeSpec
    required: bool


@dataclasses.dataclass(frozen=True, slots=True)
class StructSchema:
    """A struct's fields in declaration order, plus its compiled decoder."""

    cls: type
    fields: tuple[FieldSpec, ...]
    decode: Decoder = dataclasses.field(repr=False, compare=False)


def empty_list() -> Any:
    """Default for a list field: `partitions: list[int] = empty_list()`."""
    return dataclasses.field(default_factory=list)


# A type checker then knows each struct's generated keyword-only __init__ and frozen fields.
@typing.dataclass_transform(
    frozen_default=True, kw_only_default=True, field_specifiers=(dataclasses.field,)
)
def struct(cls: type[T]) -> type[T]:
    """Make `cls` a frozen, slotted, keyword-only dataclass with a wire schema.

    The schema (field types, compiled decoder and encoder) is built on first use, not at
    import: the CLI imports every message class and should start fast.
    """
    data_cls = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    setattr(data_cls, _SCHEMA_ATTR, None)  # built lazily by schema_of()

    def encode_first_time(obj: Any) -> dict[str, Any]:
        schema_of(data_cls)  # compiles and installs the real encoder
        return data_cls.__wire_encode__(obj)  # type: ignore[attr-defined]

    data_cls.__wire_encode__ = encode_first_time  # type: ignore[attr-defined]
    return data_cls


def _build_schema(data_cls: type) -> StructSchema:
    hints = typing.get_type_hints(data_cls)
    data_fields = dataclasses.fields(data_cls)
    fields = tuple(
        FieldSpec(
            name=field.name,
            type=_type_spec(hints[field.name], f"{data_cls.__name__}.{field.name}"),
            required=(
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ),
        )
        for field in data_fields
    )
    decode = _compile_struct_decoder(data_cls, fields, data_fields)
    schema = StructSchema(data_cls, fields, decode)
    setattr(data_cls, _SCHEMA_ATTR, schema)
    data_cls.__wire_encode__ = _compile_struct_encoder(data_cls, fields)  # type: ignore[attr-defined]
    return schema


def is_struct(cls: object) -> bool:
    return isinstance(cls, type) and _SCHEMA_ATTR in cls.__dict__


def schema_of(cls: type) -> StructSchema:
    try:
        schema = cls.__dict__[_SCHEMA_ATTR]
    except (KeyError, AttributeError):
        raise TypeError(f"{cls!r} is not a @struct class") from None
    if schema is None:
        schema = _build_schema(cls)
    return schema


def decode_struct(cls: type[T], value: Any) -> T:
    """Validate a msgpack-decoded `value` and build `cls`; raises `SchemaError`."""
    return schema_of(cls).decode(value)


def msgpack_default(obj: Any) -> dict[str, Any]:
    """`msgpack.packb(default=...)` hook: a struct becomes a map of its (raw) fields."""
    try:
        encode = type(obj).__wire_encode__
    except AttributeError:
        raise TypeError(f"cannot encode {type(obj).__name__!r} on the wire") from None
    return encode(obj)


def to_plain(value: Any) -> Any:
    """Recursively convert structs to dicts and tuples to lists (what the wire carries)."""
    if is_struct(type(value)):
        return {name: to_plain(item) for name, item in msgpack_default(value).items()}
    if isinstance(value, list | tuple):
        return [to_plain(item) for item in value]
    return value


# --- annotations -> TypeSpec -------------------------------------------------------------

_PRIMITIVES = {
    int: Kind.INT,
    float: Kind.FLOAT,
    bool: Kind.BOOL,
    str: Kind.STR,
    bytes: Kind.BYTES,
}


def _type_spec(annotation: Any, where: str) -> TypeSpec:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) != 1 or len(typing.get_args(annotation)) != 2:
            raise TypeError(f"{where}: only `T | None` unions are supported")
        return dataclasses.replace(_type_spec(members[0], where), nullable=True)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return TypeSpec(Kind.LIST, item=_type_spec(item, where))
    if annotation in _PRIMITIVES:
        return TypeSpec(_PRIMITIVES[annotation])
    if is_struct(annotation):
        return TypeSpec(Kind.STRUCT, struct=annotation)
    raise TypeError(f"{where}: unsupported field type {annotation!r}")


# --- encoders ----------------------------------------------------------------------------


def _compile_struct_encoder(
    cls: type, fields: tuple[FieldSpec, ...]
) -> Callable[[Any], dict[str, Any]]:
    """`def encode(obj): return {"a": obj.a, ...}`: nested structs and lists are left to
    msgpack, which calls `msgpack_default` again for each struct it meets."""
    items = ", ".join(f"{field.name!r}: obj.{field.name}" for field in fields)
    source = f"def encode(obj):\n    return {{{items}}}\n"
    return _define(source, "encode", cls, {})


def _define(source: str, name: str, cls: type, namespace: dict[str, Any]) -> Any:
    """Compile generated `source` (as dataclasses does for __init__) and return `name`."""
    code = compile(source, f"<tributary.schema {cls.__qualname__}.{name}>", "exec")
    exec(code, namespace)
    return namespace[name]


# --- decoders ----------------------------------------------------------------------------


_CONTAINER_NAMES: dict[type, str] = {dict: "map", list: "list"}


def _type_name(value: Any) -> str:
    if value is None:
        return "nil"
    return _CONTAINER_NAMES.get(type(value), type(value).__name__)


def _mismatch(expected: str, value: Any) -> SchemaError:
    return SchemaError(f"expected {expected}, got {_type_name(value)}")


def _decode_int(value: Any) -> int:
    if type(value) is not int:
        raise _mismatch("int", value)
    if not INT64_MIN <= value <= INT64_MAX:
        raise SchemaError(f"expected int64, got {value} (out of range)")
    return value


def _decode_float(value: Any) -> float:
    if type(value) is not float:
        raise _mismatch("float", value)
    return value


def _decode_bool(value: Any) -> bool:
    if type(value) is not bool:
        raise _mismatch("bool", value)
    return value


def _decode_str(value: Any) -> str:
    if type(value) is not str:
        raise _mismatch("str", value)
    return value


def _decode_bytes(value: Any) -> bytes:
    if type(value) is not bytes:
        raise _mismatch("bytes", value)
    return value


_PRIMITIVE_DECODERS: dict[Kind, Decoder] = {
    Kind.INT: _decode_int,
    Kind.FLOAT: _decode_float,
    Kind.BOOL: _decode_bool,
    Kind.STR: _decode_str,
    Kind.BYTES: _decode_bytes,
}
_PRIMITIVE_TYPES: dict[Kind, type] = {
    Kind.FLOAT: float,
    Kind.BOOL: bool,
    Kind.STR: str,
    Kind.BYTES: bytes,
}


def _compile_decoder(spec: TypeSpec) -> Decoder:
    decode = _compile_non_null_decoder(spec)
    if not spec.nullable:
        return decode

    def decode_nullable(value: Any) -> Any:
        return None if value is None else decode(value)

    return decode_nullable


def _compile_non_null_decoder(spec: TypeSpec) -> Decoder:
    if spec.kind is Kind.STRUCT:
        assert spec.struct is not None
        return schema_of(spec.struct).decode
    if spec.kind is Kind.LIST:
        assert spec.item is not None
        return _compile_list_decoder(spec.item)
    return _PRIMITIVE_DECODERS[spec.kind]


def _compile_list_decoder(item: TypeSpec) -> Decoder:
    describe = f"list[{item.describe()}]"
    decode_item = _compile_decoder(item)

    def locate_error(items: list[Any]) -> SchemaError:
        """Slow path, only after a failure: find the first bad item and name its index."""
        for index, element in enumerate(items):
            try:
                decode_item(element)
            except SchemaError as error:
                error.add_index(index)
                return error
        return SchemaError(f"expected {describe}")  # pragma: no cover - defensive

    if item.kind is Kind.INT and not item.nullable:

        def decode_int_list(value: Any) -> list[int]:
            # Fast path: the list msgpack built is kept as it is, after one check pass.
            if type(value) is not list:
                raise _mismatch(describe, value)
            for element in value:
                if type(element) is not int or not INT64_MIN <= element <= INT64_MAX:
                    raise locate_error(value)
            return value

        return decode_int_list

    if item.kind in _PRIMITIVE_TYPES and not item.nullable:
        exact = _PRIMITIVE_TYPES[item.kind]

        def decode_primitive_list(value: Any) -> list[Any]:
            if type(value) is not list:
                raise _mismatch(describe, value)
            for element in value:
                if type(element) is not exact:
                    raise locate_error(value)
            return value

        return decode_primitive_list

    def decode_list(value: Any) -> list[Any]:
        if type(value) is not list:
            raise _mismatch(describe, value)
        try:
            return [decode_item(element) for element in value]
        except SchemaError:
            raise locate_error(value) from None

    return decode_list


def _primitive_check(spec: TypeSpec, var: str) -> str | None:
    """A condition true when `var` is NOT a valid non-nil value of a primitive spec."""
    if spec.kind is Kind.INT:
        return f"type({var}) is not int or not INT64_MIN <= {var} <= INT64_MAX"
    if spec.kind in _PRIMITIVE_TYPES:
        return f"type({var}) is not {_PRIMITIVE_TYPES[spec.kind].__name__}"
    return None


def _check_lines(spec: TypeSpec, var: str, name: str, decoder: str) -> list[str]:
    """Generated statements validating (and for lists/structs, decoding) `var`."""
    error = f"raise field_error({name!r}, {decoder}, {var})"
    check = _primitive_check(spec, var)
    if check is not None:
        return [f"if {check}:", f"    {error}"]
    item = spec.item
    item_check = None
    if spec.kind is Kind.LIST and item is not None and not item.nullable:
        item_check = _primitive_check(item, "item")
    if item_check is not None:  # a list of primitives: checked in place, kept as it is
        return [
            f"if type({var}) is not list:",
            f"    {error}",
            f"for item in {var}:",
            f"    if {item_check}:",
            f"        {error}",
        ]
    return [
        "try:",
        f"    {var} = {decoder}({var})",
        "except SchemaError as error:",
        f"    error.add_field({name!r})",
        "    raise",
    ]


def _field_error(name: str, decode: Decoder | None, value: Any) -> SchemaError:
    """Slow path: the precise error for field `name` (missing when `decode` is None)."""
    if decode is None:
        error = SchemaError("missing required field")
    else:
        try:
            decode(value)
        except SchemaError as raised:
            error = raised
        else:  # pragma: no cover - the inline check and the decoder agree
            error = SchemaError("invalid value")
    error.add_field(name)
    return error


def _compile_struct_decoder(
    cls: type,
    fields: tuple[FieldSpec, ...],
    data_fields: tuple[dataclasses.Field[Any], ...],
) -> Decoder:
    """Generate `decode(value)` for one struct: fetch each field from the map, check
    primitives (and lists of them) inline, call compiled decoders for lists of structs and
    structs, fill in defaults, then fill the slots of a new instance."""
    namespace: dict[str, Any] = {
        "cls": cls,
        "SchemaError": SchemaError,
        "mismatch": _mismatch,
        "field_error": _field_error,
        "INT64_MIN": INT64_MIN,
        "INT64_MAX": INT64_MAX,
    }
    lines = [
        "def decode(value):",
        "    if type(value) is not dict:",
        f"        raise mismatch({f'map ({cls.__name__})'!r}, value)",
    ]
    for index, (field, data_field) in enumerate(zip(fields, data_fields, strict=True)):
        var, decoder = f"v{index}", f"decode_{index}"
        namespace[decoder] = _compile_decoder(field.type)
        lines += ["    try:", f"        {var} = value[{field.name!r}]", "    except KeyError:"]
        if field.required:
            lines.append(f"        raise field_error({field.name!r}, None, None) from None")
        elif data_field.default_factory is not dataclasses.MISSING:
            namespace[f"default_{index}"] = data_field.default_factory
            lines.append(f"        {var} = default_{index}()")
        else:
            namespace[f"default_{index}"] = data_field.default
            lines.append(f"        {var} = default_{index}")
        checks = _check_lines(field.type, var, field.name, decoder)
        if field.type.nullable:
            lines += ["    else:", f"        if {var} is not None:"]
            lines += [f"            {line}" for line in checks]
        else:
            lines.append("    else:")
            lines += [f"        {line}" for line in checks]
    # Build the instance the way the frozen dataclass's own __init__ does (object.__setattr__
    # on its slots), minus the keyword-argument call: this halves the cost of decoding.
    lines.append("    obj = new(cls)")
    for index, field in enumerate(fields):
        namespace[f"set_{index}"] = cls.__dict__[field.name].__set__  # the slot's descriptor
        lines.append(f"    set_{index}(obj, v{index})")
    lines.append("    return obj")
    namespace["new"] = object.__new__
    return _define("\n".join(lines) + "\n", "decode", cls, namespace)
