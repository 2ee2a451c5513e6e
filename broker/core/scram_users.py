"""Users' SCRAM credentials as KIP-554's admin APIs change and describe them (pure).

How it works (Kafka 2.8's ZkAdminManager, step for step): `check_alterations` fails
every user with an empty name ("Username must not be empty", UNACCEPTABLE_CREDENTIAL),
an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384
("Too few iterations" / "Too many iterations", UNACCEPTABLE_CREDENTIAL) or, Tributary's
additions, a salt under 12 bytes (a credential no login could use) or the name "." or
".." (no znode can be named so; Kafka fails them with an internal error); then every user
with the same (user, mechanism) twice (DUPLICATE_RESOURCE). A failed user has none of its
changes applied. The shell reads the remaining users' configs from ZooKeeper and
`apply_alterations` fails a deletion of a credential that does not exist
(RESOURCE_NOT_FOUND), else returns the user's new config: deletions remove the
mechanism's key, upsertions set it to the credential derived from the salted password
(scram.py). Keys that are not SCRAM credentials (quotas) are kept.

`describe_user` answers one user of DescribeUserScramCredentials from its config: each
mechanism with its iterations, never a key; a user named explicitly without any SCRAM
credential is RESOURCE_NOT_FOUND. `check_describe` finds empty and repeated names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from client.protocol import messages as m
from client.protocol.errors import ErrorCode
from server_common.security.scram import (
    MECHANISMS,
    credential_from_string,
    credential_to_string,
    from_salted_password,
)

USERNAME_EMPTY = "Username must not be empty"
# Names Kafka's Sanitizer keeps as they are and ZooKeeper refuses as a znode name (Kafka
# fails them with an internal error; here they are refused up front).
UNSTORABLE_NAMES = (".", "..")
MIN_SALT_BYTES = 12  # scramp's (RFC 5802 sets no floor; a shorter one could not log in)


@dataclass
class UserFailure:
    code: ErrorCode
    message: str


@dataclass
class UserChanges:
    deletions: list[str] = field(default_factory=list)  # mechanism names
    upsertions: list[m.ScramCredentialUpsertion] = field(default_factory=list)


def _mechanism_name(code: int) -> str | None:
    return m.SCRAM_MECHANISM_NAMES.get(code)


def _name_problem(name: str) -> UserFailure | None:
    if not name:
        return UserFailure(ErrorCode.UNACCEPTABLE_CREDENTIAL, USERNAME_EMPTY)
    if name in UNSTORABLE_NAMES:
        return UserFailure(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be . or ..")
    return None


def _upsertion_problem(upsertion: m.ScramCredentialUpsertion) -> UserFailure | None:
    if problem := _name_problem(upsertion.name):
        return problem
    name = _mechanism_name(upsertion.mechanism)
    if name is None:
        return UserFailure(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    mechanism = MECHANISMS[name]
    if upsertion.iterations < mechanism.min_iterations:
        return UserFailure(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > mechanism.max_iterations:
        return UserFailure(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if len(upsertion.salt) < MIN_SALT_BYTES:
        return UserFailure(
            ErrorCode.UNACCEPTABLE_CREDENTIAL, f"Salt must be at least {MIN_SALT_BYTES} bytes"
        )
    if not upsertion.salted_password:
        return UserFailure(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salted password must not be empty")
    return None


def _deletion_problem(deletion: m.ScramCredentialDeletion) -> UserFailure | None:
    if problem := _name_problem(deletion.name):
        return problem
    if _mechanism_name(deletion.mechanism) is None:
        return UserFailure(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def check_alterations(
    request: m.AlterUserScramCredentialsRequest,
) -> tuple[list[str], dict[str, UserFailure], dict[str, UserChanges]]:
    """The users in request order, those that fail before ZooKeeper is read, and the
    changes of the others."""
    order: list[str] = []
    failures: dict[str, UserFailure] = {}
    changes: dict[str, UserChanges] = {}
    seen: set[tuple[str, int]] = set()
    duplicates: set[str] = set()
    for deletion in request.deletions:
        order.append(deletion.name)
        problem = _deletion_problem(deletion)
        if problem is not None:
            failures.setdefault(deletion.name, problem)
            continue
        pair = (deletion.name, deletion.mechanism)
        if pair in seen:
            duplicates.add(deletion.name)
        seen.add(pair)
        changes.setdefault(deletion.name, UserChanges()).deletions.append(
            m.SCRAM_MECHANISM_NAMES[deletion.mechanism]
        )
    for upsertion in request.upsertions:
        order.append(upsertion.name)
        problem = _upsertion_problem(upsertion)
        if problem is not None:
            failures.setdefault(upsertion.name, problem)
            continue
        pair = (upsertion.name, upsertion.mechanism)
        if pair in seen:
            duplicates.add(upsertion.name)
        seen.add(pair)
        changes.setdefault(upsertion.name, UserChanges()).upsertions.append(upsertion)
    for user in duplicates:
        failures.setdefault(
            user,
            UserFailure(
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            ),
        )
    for user in failures:
        changes.pop(user, None)
    return list(dict.fromkeys(order)), failures, changes


def apply_alterations(
    config: Mapping[str, str], changes: UserChanges
) -> dict[str, str] | UserFailure:
    """The user's new config, or why the changes cannot apply."""
    if any(name not in config for name in changes.deletions):
        return UserFailure(
            ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        )
    new = dict(config)
    for name in changes.deletions:
        new.pop(name, None)
    for upsertion in changes.upsertions:
        name = m.SCRAM_MECHANISM_NAMES[upsertion.mechanism]
        credential = from_salted_password(
            name, bytes(upsertion.salt), bytes(upsertion.salted_password), upsertion.iterations
        )
        new[name] = credential_to_string(credential)
    return new


def check_describe(users: list[str]) -> dict[str, m.DescribeUserScramCredentialsResult]:
    """Results for the empty and repeated names of an explicit list."""
    results: dict[str, m.DescribeUserScramCredentialsResult] = {}
    counts: dict[str, int] = {}
    for user in users:
        counts[user] = counts.get(user, 0) + 1
    for user, count in counts.items():
        if not user:
            results[user] = _describe_error(user, ErrorCode.RESOURCE_NOT_FOUND, USERNAME_EMPTY)
        elif count > 1:
            results[user] = _describe_error(
                user,
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}",
            )
    return results


def describe_user(
    user: str, config: Mapping[str, str], explicit: bool
) -> m.DescribeUserScramCredentialsResult | None:
    """One user's result (None: not explicitly asked for and has no credential)."""
    infos = []
    for name, code in ((n, c) for c, n in sorted(m.SCRAM_MECHANISM_NAMES.items())):
        value = config.get(name)
        if value is None:
            continue
        try:
            iterations = credential_from_string(value).iterations
        except ValueError:
            return _describe_error(
                user,
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"Unable to get credential info for user {user}: bad {name} value",
            )
        infos.append(m.ScramCredentialInfo(mechanism=code, iterations=iterations))
    if infos:
        return m.DescribeUserScramCredentialsResult(
            user=user, error_code=0, error_message=None, credential_infos=infos
        )
    if not explicit:
        return None
    return _describe_error(
        user,
        ErrorCode.RESOURCE_NOT_FOUND,
        f"Attempt to describe a user credential that does not exist: {user}",
    )


def _describe_error(
    user: str, code: ErrorCode, message: str
) -> m.DescribeUserScramCredentialsResult:
    return m.DescribeUserScramCredentialsResult(
        user=user, error_code=int(code), error_message=message
    )
