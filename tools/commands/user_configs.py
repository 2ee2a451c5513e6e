"""`tributary configs describe|alter --entity-type users`: users' SCRAM credentials, in the
manner of kafka-configs.sh with --bootstrap-server (KIP-554).

How it works: `alter --entity-name bob --add-config
'SCRAM-SHA-512=[password=...],SCRAM-SHA-256=[iterations=8192,password=...]'` upserts
each named mechanism's credential (iterations default to 4096) and `--delete-config
SCRAM-SHA-512` deletes one, in one AlterUserScramCredentials request
(client/admin/users.py: the password is salted here and never sent). `describe` prints,
as kafka-configs does, `SCRAM credential configs for user-principal 'bob' are
SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096` for the named user, or for
every user with credentials when no name is given. Bad arguments are one line and exit
2; no message, line or log ever carries a password.
"""

from __future__ import annotations

import argparse
import re

from client.admin import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
    open_admin,
)
from client.protocol.errors import TributaryError
from tools.commands.common import bootstrap_of, client_options, run_async
from tools.errors import CliError

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# One `name=value` or `name=[k=v,...]` item of --add-config (commas inside [] stay).
_ITEM = re.compile(r"\s*([^=,\[\]]+?)\s*=\s*(\[[^\]]*\]|[^,\[\]]*)\s*(?:,|$)")


def _usage(message: str) -> CliError:
    return CliError(message, exit_code=2)


def _split_items(text: str) -> list[tuple[str, str]]:
    items, pos = [], 0
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if match is None or match.end() == pos:
            raise _usage(
                "--add-config: expected MECHANISM=[password=...] items, e.g. "
                "'SCRAM-SHA-512=[password=...],SCRAM-SHA-256=[iterations=8192,password=...]'"
            )
        items.append((match.group(1), match.group(2)))
        pos = match.end()
    return items


def parse_scram_additions(texts: list[str], user: str) -> list[UserScramCredentialUpsertion]:
    """The upsertions --add-config asks for (CliError, exit 2, on bad input; the message
    never repeats a value)."""
    upsertions: list[UserScramCredentialUpsertion] = []
    seen: set[str] = set()
    for text in texts:
        for mechanism, value in _split_items(text):
            if mechanism not in MECHANISMS:
                raise _usage(
                    f"--add-config: {mechanism[:50]!r} is not a user config Tributary "
                    f"supports (SCRAM-SHA-256, SCRAM-SHA-512)"
                )
            if mechanism in seen:
                raise _usage(f"--add-config: {mechanism} is given twice")
            seen.add(mechanism)
            if not (value.startswith("[") and value.endswith("]")):
                raise _usage(f"--add-config: {mechanism} needs [password=...]")
            options: dict[str, str] = {}
            for part in value[1:-1].split(","):
                key, sep, option = part.partition("=")
                key = key.strip()
                if not sep or key not in ("password", "iterations") or key in options:
                    raise _usage(
                        f"--add-config: {mechanism} takes password=... and optionally "
                        "iterations=N, each once"
                    )
                options[key] = option
            if not options.get("password"):
                raise _usage(f"--add-config: {mechanism} needs a non-empty password=...")
            iterations = 4096
            if "iterations" in options:
                try:
                    iterations = int(options["iterations"])
                except ValueError:
                    raise _usage(f"--add-config: {mechanism} iterations must be a number") from None
            upsertions.append(
                UserScramCredentialUpsertion(user, mechanism, options["password"], iterations)
            )
    return upsertions


def parse_scram_deletions(texts: list[str], user: str) -> list[UserScramCredentialDeletion]:
    names = [part.strip() for text in texts for part in text.split(",") if part.strip()]
    for name in names:
        if name not in MECHANISMS:
            raise _usage(
                f"--delete-config: {name[:50]!r} is not a user config Tributary supports "
                "(SCRAM-SHA-256, SCRAM-SHA-512)"
            )
    return [UserScramCredentialDeletion(user, name) for name in dict.fromkeys(names)]


def _user(args: argparse.Namespace, required: bool) -> str | None:
    if args.topic is not None or args.entity_default:
        raise _usage("--entity-type users takes --entity-name USER only")
    if required and not args.entity_name:
        raise _usage("--entity-type users needs --entity-name USER")
    return args.entity_name


def alter_users(args: argparse.Namespace) -> int:
    user = _user(args, required=True)
    assert user is not None
    upsertions = parse_scram_additions(args.add_config, user)
    deletions = parse_scram_deletions(args.delete_config, user)
    if not upsertions and not deletions:
        raise _usage("configs alter needs --add-config or --delete-config")
    if both := sorted({u.mechanism for u in upsertions} & {d.mechanism for d in deletions}):
        raise _usage(f"{both[0]} is both added and deleted")
    bootstrap = bootstrap_of(args)

    async def alter() -> dict[str, TributaryError | None]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.alter_user_scram_credentials([*deletions, *upsertions])

    for error in run_async(alter).values():
        if error is not None:
            raise CliError(str(error))
    print(f"Completed updating config for user {user}.")
    return 0


def _line(user: str, infos: list[ScramCredentialInfo]) -> str:
    described = ", ".join(f"{i.mechanism}=iterations={i.iterations}" for i in infos)
    return f"SCRAM credential configs for user-principal '{user}' are {described}"


def describe_users(args: argparse.Namespace) -> int:
    user = _user(args, required=False)
    bootstrap = bootstrap_of(args)

    async def describe() -> dict[str, list[ScramCredentialInfo] | TributaryError]:
        async with open_admin(bootstrap, **client_options(args)) as admin:
            return await admin.describe_user_scram_credentials(None if user is None else [user])

    results = run_async(describe)
    for name, result in sorted(results.items()):
        if isinstance(result, TributaryError):
            # Kafka's kafka-configs prints nothing for a user without credentials.
            if user is not None and result.code.name == "RESOURCE_NOT_FOUND":
                continue
            raise CliError(str(result))
        print(_line(name, result))
    return 0
