"""The producer's settings that need reading: acks, compression, and whether idempotence
is on.

How it works: `parse_acks` takes Kafka's values (0, 1, all / -1) as numbers or text;
`parse_compression` a codec name (none, gzip, lz4, zstd). `idempotence_enabled` applies
Kafka 3.x's rule: idempotence (on by default) needs acks=all, retries and at most 5
requests in flight per connection; asked for explicitly with other settings it is a
config error, and left at its default it is quietly turned off by them.
"""

from __future__ import annotations

from client.protocol.records import Codec

# Idempotence (Kafka's ProducerConfig): at most this many requests in flight per broker.
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
_CODECS = {"none": Codec.NONE, "gzip": Codec.GZIP, "lz4": Codec.LZ4, "zstd": Codec.ZSTD}


def parse_acks(acks: int | str) -> int:
    """Kafka's acks values: 0, 1, all / -1."""
    if isinstance(acks, str):
        text = acks.strip().lower()
        if text == "all":
            return -1
        try:
            acks = int(text)
        except ValueError:
            raise ValueError(f"acks must be 0, 1 or all, not {acks!r}") from None
    if acks not in (0, 1, -1):
        raise ValueError(f"acks must be 0, 1 or all, not {acks!r}")
    return acks


def parse_compression(name: str | Codec) -> Codec:
    if isinstance(name, Codec):
        return name
    try:
        return _CODECS[name.strip().lower()]
    except KeyError:
        raise ValueError(
            f"compression_type must be one of {', '.join(_CODECS)}, not {name!r}"
        ) from None


def idempotence_enabled(
    enable_idempotence: bool | None, acks: int, retries: int, max_in_flight: int
) -> bool:
    """Kafka 3.x's rule: idempotence needs acks=all, retries > 0 and at most 5 requests
    in flight. Asked for explicitly (True) with others, ValueError; left at its default
    (None), it is on unless they conflict."""
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks must be all (not {acks})")
    if retries <= 0:
        conflicts.append("retries must be greater than 0")
    if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            f"max_in_flight_requests_per_connection must be at most "
            f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} (not {max_in_flight})"
        )
    if enable_idempotence is None:
        return not conflicts
    if enable_idempotence and conflicts:
        raise ValueError("enable_idempotence requires: " + "; ".join(conflicts))
    return bool(enable_idempotence)
