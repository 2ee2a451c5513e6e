"""Users' SCRAM credentials (KIP-554): DescribeUserScramCredentials and
AlterUserScramCredentials.

How it works: messages declared with `schema.struct` (the conventions are in the package
docstring), field for field Kafka's. Mechanisms travel as KIP-554's numbers
(`SCRAM_SHA_256` = 1, `SCRAM_SHA_512` = 2). An upsertion carries the salt and the
salted password (Hi(password, salt, iterations)), never the password; a description
carries each mechanism's iteration count, never a key. Any broker serves both: it reads
and writes /config/users/<user> in ZooKeeper, as Kafka 2.8's brokers do.
"""

from __future__ import annotations

from client.protocol.schema import empty_list, struct

# KIP-554's ScramMechanism numbers.
SCRAM_UNKNOWN = 0
SCRAM_SHA_256 = 1
SCRAM_SHA_512 = 2
SCRAM_MECHANISM_NAMES = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}

# --- DescribeUserScramCredentials (50) -----------------------------------------------------


@struct
class DescribeUserScramCredentialsUser:
    name: str


@struct
class DescribeUserScramCredentialsRequest:
    users: list[DescribeUserScramCredentialsUser] | None = None  # None or []: every user


@struct
class ScramCredentialInfo:
    mechanism: int
    iterations: int


@struct
class DescribeUserScramCredentialsResult:
    user: str
    error_code: int
    error_message: str | None
    credential_infos: list[ScramCredentialInfo] = empty_list()


@struct
class DescribeUserScramCredentialsResponse:
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    results: list[DescribeUserScramCredentialsResult]


# --- AlterUserScramCredentials (51) --------------------------------------------------------


@struct
class ScramCredentialDeletion:
    name: str
    mechanism: int


@struct
class ScramCredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # the salted password stays out of logs
        return (
            f"ScramCredentialUpsertion(name={self.name!r}, mechanism={self.mechanism}, "
            f"iterations={self.iterations})"
        )


@struct
class AlterUserScramCredentialsRequest:
    deletions: list[ScramCredentialDeletion] = empty_list()
    upsertions: list[ScramCredentialUpsertion] = empty_list()


@struct
class AlterUserScramCredentialsResult:
    user: str
    error_code: int
    error_message: str | None


@struct
class AlterUserScramCredentialsResponse:
    throttle_time_ms: int
    results: list[AlterUserScramCredentialsResult]
