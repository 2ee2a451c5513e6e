"""Kafka's `sasl.jaas.config` values: one JAAS login-module entry, parsed.

How it works (Kafka's JaasConfig): an entry is `<LoginModuleClass> <flag> key=value ...;`
where the flag is required, requisite, sufficient or optional and a value is a word or
a double-quoted string (a backslash escapes the next character), e.g.

    org.apache.kafka.common.security.scram.ScramLoginModule required
        username="alice" password="alice-secret";

`parse_jaas_config` returns a `JaasEntry` (login module, control flag, options in
order); anything else raises ValueError with a message that never repeats a value (it
may be a password). `PLAIN_LOGIN_MODULE` / `SCRAM_LOGIN_MODULE` are Kafka's class names;
`plain_users(options)` reads a PLAIN server's `user_<name>="<password>"` options.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
MAX_JAAS_CONFIG_CHARS = 1 << 20


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options may hold passwords
        return f"JaasEntry({self.login_module!r}, {self.control_flag!r}, {sorted(self.options)})"


_SPECIAL = '=;"'


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) pairs: kind is "word", "quoted", "=" or ";"."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise ValueError("sasl.jaas.config has an unterminated quoted value")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    chars.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    chars.append(c)
                    i += 1
            out.append(("quoted", "".join(chars)))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            out.append(("word", text[start:i]))
    return out


def parse_jaas_config(text: str) -> JaasEntry:
    """One login-module entry of a `sasl.jaas.config` value (see the module docstring)."""
    if len(text) > MAX_JAAS_CONFIG_CHARS:
        raise ValueError("sasl.jaas.config is too long")
    tokens = _tokens(text)
    if not tokens:
        raise ValueError("sasl.jaas.config is empty")
    if tokens[0][0] != "word":
        raise ValueError("sasl.jaas.config must start with a login module class name")
    module = tokens[0][1]
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in CONTROL_FLAGS:
        raise ValueError(
            f"sasl.jaas.config: the login module must be followed by a control flag "
            f"({', '.join(CONTROL_FLAGS)})"
        )
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while True:
        if i >= len(tokens):
            raise ValueError("sasl.jaas.config: expected ';' at the end of the entry")
        kind, value = tokens[i]
        if kind == ";":
            break
        if kind != "word":
            raise ValueError("sasl.jaas.config: expected an option name")
        if (
            i + 2 >= len(tokens)
            or tokens[i + 1][0] != "="
            or tokens[i + 2][0]
            not in (
                "word",
                "quoted",
            )
        ):
            raise ValueError(f"sasl.jaas.config: option {value[:50]!r} must be name=value")
        if value in options:
            raise ValueError(f"sasl.jaas.config: option {value[:50]!r} is given twice")
        options[value] = tokens[i + 2][1]
        i += 3
    if i + 1 != len(tokens):
        raise ValueError("sasl.jaas.config must hold exactly one login module entry, ended by ';'")
    return JaasEntry(module, flag, options)


def plain_users(options: dict[str, str]) -> dict[str, str]:
    """A PLAIN server's users: the `user_<name>="<password>"` options (Kafka's
    PlainServerCallbackHandler)."""
    return {
        key[len("user_") :]: value
        for key, value in options.items()
        if key.startswith("user_") and len(key) > len("user_")
    }
