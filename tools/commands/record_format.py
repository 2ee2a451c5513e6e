"""How `tributary consume` prints a record: the formats and Kafka's formatter properties.

How it works: `RecordFormatter` turns one `ConsumerRecord` into the bytes to write,
for one of four formats:
- `text` (default): the value as UTF-8 (undecodable bytes replaced), preceded by what
  the `print.*` properties ask for, as kafka-console-consumer's DefaultMessageFormatter
  prints it: `CreateTime:<ts>`, `Partition:<p>`, `Offset:<o>`, the headers
  (`k:v,k:v` or `NO_HEADERS`), the key, each followed by `key.separator` (tab), then the
  value and `line.separator` (newline);
- `raw`: the same layout with key and value written as the bytes stored (nothing
  decoded or replaced), so binary records come out byte for byte; `--separator` sets the
  line separator (`\\0` for records that may contain newlines);
- `json`: one object per line, key and value as UTF-8 text (undecodable bytes
  replaced), headers as an object;
- `base64`: the same object with key, value and header values base64-encoded: lossless
  for any bytes.
Separators accept the escapes `\\n`, `\\t`, `\\r`, `\\0` and `\\\\`, as typed on a
command line.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from itertools import chain
from typing import Any

from tools.errors import CliError

FORMATS = ("text", "json", "raw", "base64")
# kafka-console-consumer's --property names this formatter understands, with defaults.
DEFAULT_PROPERTIES = {
    "print.timestamp": "false",
    "print.partition": "false",
    "print.offset": "false",
    "print.headers": "false",
    "print.key": "false",
    "print.value": "true",
    "key.separator": "\t",
    "line.separator": "\n",
    "headers.separator": ",",
    "null.literal": "null",
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


def unescape(text: str) -> str:
    """`\\n`, `\\t`, `\\r`, `\\0`, `\\\\` as the characters they name; others kept."""
    out: list[str] = []
    chars = iter(text)
    for char in chars:
        if char != "\\":
            out.append(char)
            continue
        following = next(chars, "")
        out.append(_ESCAPES.get(following, "\\" + following))
    return "".join(out)


def parse_properties(pairs: Iterable[str]) -> dict[str, str]:
    """`["print.key=true", ...]` over the defaults; `CliError` for unknown names or values."""
    props = dict(DEFAULT_PROPERTIES)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or name not in DEFAULT_PROPERTIES:
            known = ", ".join(sorted(DEFAULT_PROPERTIES))
            raise CliError(
                f"--property expects NAME=VALUE with NAME one of {known}; got {pair!r}", 2
            )
        if name.startswith("print.") and value.strip().lower() not in ("true", "false"):
            raise CliError(f"--property {name} must be true or false, not {value!r}", 2)
        props[name] = value.strip().lower() if name.startswith("print.") else unescape(value)
    return props


class RecordFormatter:
    def __init__(self, fmt: str = "text", properties: dict[str, str] | None = None) -> None:
        if fmt not in FORMATS:
            raise CliError(f"--format must be one of {', '.join(FORMATS)}", 2)
        self.format = fmt
        props = {**DEFAULT_PROPERTIES, **(properties or {})}
        self.flags = {name[6:] for name, value in props.items() if value == "true"}
        self.key_separator = props["key.separator"].encode()
        self.line_separator = props["line.separator"].encode()
        self.headers_separator = props["headers.separator"].encode()
        self.null = props["null.literal"].encode()

    @property
    def values_only(self) -> bool:
        """The default layout: each value and the line separator, nothing else."""
        return self.flags == {"value"} and self.format in ("text", "raw")

    def render_all(self, records: Iterable[Any]) -> bytes:
        """Every record rendered, concatenated. The default layout (values only, text or
        raw) takes a fast path: see `render_values`."""
        if not self.values_only:
            return b"".join(map(self.render, records))
        return self.render_values([r.value for r in records])

    def render_batches(self, batches: Iterable[Any]) -> bytes:
        """The records of these `ConsumerBatch`es rendered, concatenated: the same bytes
        as `render_all` of their records; the default layout straight from the value
        columns, without a record object."""
        if not self.values_only:
            return self.render_all(chain.from_iterable(b.records() for b in batches))
        return self.render_values(list(chain.from_iterable(b.values for b in batches)))

    def render_values(self, values: list[bytes | None]) -> bytes:
        """The default layout (values only): each value and the line separator. One
        join of the values as they are when none is null and (text) all is ASCII, the
        common case; otherwise nulls are written as `null.literal` and a text value
        that is not ASCII is decoded, each on its own."""
        if not values:
            return b""
        separator = self.line_separator
        try:
            # A null value raises TypeError: cheaper than looking for one first.
            joined = separator.join(values)  # type: ignore[arg-type]
        except TypeError:  # a null value
            joined = None
        if joined is None or not (self.format == "raw" or joined.isascii()):
            null = self.null
            if self.format == "raw":
                rendered = [null if v is None else v for v in values]
            else:
                rendered = [
                    null if v is None else v if v.isascii() else self._bytes(v, True)
                    for v in values
                ]
            joined = separator.join(rendered)
        return joined + separator

    def render(self, record: Any) -> bytes:
        if self.format in ("json", "base64"):
            return json.dumps(self._object(record)).encode() + b"\n"
        text = self.format == "text"
        parts: list[bytes] = []
        if "timestamp" in self.flags:
            parts.append(b"CreateTime:%d" % record.timestamp)
        if "partition" in self.flags:
            parts.append(b"Partition:%d" % record.partition)
        if "offset" in self.flags:
            parts.append(b"Offset:%d" % record.offset)
        if "headers" in self.flags:
            headers = [
                name.encode() + b":" + self._bytes(value, text) for name, value in record.headers
            ]
            parts.append(self.headers_separator.join(headers) if headers else b"NO_HEADERS")
        if "key" in self.flags:
            parts.append(self._bytes(record.key, text))
        if "value" in self.flags:
            parts.append(self._bytes(record.value, text))
        return self.key_separator.join(parts) + self.line_separator

    def _bytes(self, data: bytes | None, text: bool) -> bytes:
        if data is None:
            return self.null
        if text:  # what a terminal can show: undecodable bytes replaced
            return data.decode("utf-8", errors="replace").encode()
        return data

    def _object(self, record: Any) -> dict:
        encode = _b64 if self.format == "base64" else _text
        out = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": encode(record.key),
            "value": encode(record.value),
        }
        if record.headers:
            out["headers"] = {name: encode(value) for name, value in record.headers}
        if self.format == "base64":
            out["encoding"] = "base64"
        return out


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
