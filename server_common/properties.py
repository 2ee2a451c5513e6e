"""Typed configuration in Kafka's style: dotted names, Java properties files, defaults.

How it works: a `ConfigDef` lists every key with its type, default, validator and one
line of documentation. `ConfigDef.parse(values)` turns strings (from a properties file,
`--override key=value` flags or environment) into a `dict` of typed values, rejecting
unknown keys and bad values with a `ConfigError` that names the key. Brokers and
controllers each declare their own `ConfigDef`; the launcher writes properties files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self


class ConfigError(ValueError):
    """A configuration value or file is invalid; the message names the key."""


_MISSING = object()


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_int(text: str) -> int:
    return int(text.strip().replace("_", ""))


def _parse_float(text: str) -> float:
    return float(text.strip())


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


PARSERS: dict[str, Callable[[str], Any]] = {
    "int": _parse_int,
    "bool": _parse_bool,
    "float": _parse_float,
    "str": lambda s: s.strip(),
    "list": _parse_list,
}
# What a value given as a Python object (not a string) must be, per config type.
_EXPECTED_TYPES: dict[str, type | tuple[type, ...]] = {
    "int": int,
    "bool": bool,
    "str": str,
    "list": list,
    "float": (int, float),
}


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: Any
    doc: str
    validator: Callable[[Any], str | None] | None = None

    def parse(self, raw: Any) -> Any:
        if isinstance(raw, str):
            try:
                value = PARSERS[self.type](raw)
            except ValueError as exc:
                raise ConfigError(f"{self.name}: {exc}") from None
        else:
            value = raw
            expected = _EXPECTED_TYPES[self.type]
            if not isinstance(value, expected) or (
                self.type in ("int", "float") and isinstance(value, bool)
            ):
                raise ConfigError(f"{self.name}: expected {self.type}, got {value!r}")
        if self.type == "float":
            value = float(value)
        if self.validator is not None and (problem := self.validator(value)) is not None:
            raise ConfigError(f"{self.name}: {problem}")
        return value


def at_least(minimum: int) -> Callable[[int], str | None]:
    return lambda v: None if v >= minimum else f"must be >= {minimum}, got {v}"


def one_of(*choices: str) -> Callable[[str], str | None]:
    return lambda v: None if v in choices else f"must be one of {', '.join(choices)}, got {v!r}"


class ConfigDef:
    def __init__(self, keys: Iterable[ConfigKey]):
        self.keys = {k.name: k for k in keys}

    def parse(self, values: Mapping[str, Any], *, allow_unknown: bool = False) -> dict[str, Any]:
        """Typed values for every key: the given ones parsed, the rest defaulted."""
        result: dict[str, Any] = {}
        for name, raw in values.items():
            key = self.keys.get(name)
            if key is None:
                if allow_unknown:
                    continue
                raise ConfigError(f"unknown configuration {name!r}")
            result[name] = key.parse(raw)
        for name, key in self.keys.items():
            if name not in result:
                if key.default is _MISSING or key.default is REQUIRED:
                    raise ConfigError(f"{name} is required")
                result[name] = key.default
        return result

    def describe(self) -> str:
        return "\n".join(
            f"{k.name} ({k.type}, default {k.default!r}): {k.doc}" for k in self.keys.values()
        )


REQUIRED = _MISSING


def read_properties(path: str | Path) -> dict[str, str]:
    """Read a Java-style properties file (key=value or key: value, # and ! comments)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in stripped:
                key, value = stripped.split(sep, 1)
                break
        else:
            raise ConfigError(f"{path}:{number}: expected key=value, got {stripped!r}")
        result[key.strip()] = value.strip()
    return result


def load_properties(
    path: str | Path | None = None, overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A properties file's values (if a path is given) updated with `overrides`."""
    values: dict[str, str] = {}
    if path is not None:
        values.update(read_properties(path))
    values.update(overrides or {})
    return values


class PropertiesConfig:
    """Base of the server configs: typed values by Kafka name (`config["broker.id"]`),
    built from a properties file plus overrides with `load`."""

    values: dict[str, Any]

    def __init__(self, values: Mapping[str, Any]) -> None:
        """Subclasses parse `values` with their `ConfigDef`."""
        self.values = dict(values)

    @classmethod
    def load(
        cls, path: str | Path | None = None, overrides: Mapping[str, str] | None = None
    ) -> Self:
        return cls(load_properties(path, overrides))

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def write_properties(path: str | Path, values: Mapping[str, Any]) -> None:
    def render(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return ",".join(map(str, v))
        return str(v)

    lines = [f"{k}={render(v)}" for k, v in values.items()]
    # Owner-only (0600): a server's properties may hold secrets (sasl.jaas.config's
    # passwords, ssl.key.password), as Kafka's docs ask of server.properties.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # also when the file already existed with a wider mode
    with os.fdopen(fd, "w") as out:
        out.write("\n".join(lines) + "\n")


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """`key=value` strings (from --override flags) into a dict."""
    result = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"expected key=value, got {item!r}")
        key, value = item.split("=", 1)
        result[key.strip()] = value.strip()
    return result


def parse_listener(text: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` or `host:port` -> (host, port)."""
    address = text.split("://", 1)[-1]
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ConfigError(f"expected host:port, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"bad port in {text!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"port out of range in {text!r}")
    return host or "0.0.0.0", number


def parse_listeners(text: str, default_name: str = "PLAINTEXT") -> list[tuple[str, str, int]]:
    """`NAME://host:port,NAME2://host:port` -> [(name, host, port)] (Kafka's listeners)."""
    listeners = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name = item.split("://", 1)[0].upper() if "://" in item else default_name
        if not name.replace("_", "").isalnum():
            raise ConfigError(f"bad listener name in {item!r}")
        host, port = parse_listener(item)
        listeners.append((name, host, port))
    names = [n for n, _, _ in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"listener names must be unique: {text!r}")
    return listeners
