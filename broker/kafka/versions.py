"""The Kafka APIs and versions the Kafka listener serves: what ApiVersions advertises and
what the decoder accepts.

How it works: every translate module (translate.py, translate_admin.py,
translate_groups.py) exposes `TRANSLATIONS: dict[int, Translation]`, each entry with the
version range its functions translate correctly. `translations()` merges them and
`supported()` is the resulting
{api_key: (min_version, max_version)} table, so ApiVersions can only advertise what is
really translated. `check_against_kio()` verifies that kio has request and response
classes for every advertised version (the tests call it).

Data-plane ranges (translate.py) and why they stop where they do:
- Produce 3-9: v3 is the first with v2 record batches; v10+ add KIP-951 leader hints.
- Fetch 4-12: v13+ name topics by topic id, which Tributary does not have.
- ListOffsets 1-6: v7 adds MAX_TIMESTAMP (-3), which the native handler does not serve.
- Metadata 0-12: v10+ carry topic ids; we send the zero UUID (unknown), as Kafka does
  for topics without one; v13 adds nothing a client needs.
- OffsetForLeaderEpoch 2-4, ApiVersions 0-3.
- InitProducerId 0-4: every version librdkafka and the Java client use for idempotence;
  v5 is unreleased in Kafka 2.8/3.x era clients.
"""

from __future__ import annotations

import functools

from broker.kafka.translation import Translation, request_class, response_class


@functools.cache
def translations() -> dict[int, Translation]:
    """Every API the Kafka listener serves, merged from the translate modules."""
    # Imported here: translate.py imports this module (ApiVersions answers from it).
    from broker.kafka import translate, translate_admin, translate_groups

    merged: dict[int, Translation] = {}
    for module in (translate, translate_admin, translate_groups):
        for api_key, translation in module.TRANSLATIONS.items():
            if api_key in merged:
                raise ValueError(f"api {api_key} is translated by two modules")
            merged[api_key] = translation
    return dict(sorted(merged.items()))


@functools.cache
def supported() -> dict[int, tuple[int, int]]:
    """{api_key: (min_version, max_version)} for ApiVersions and the decoder."""
    return {k: (t.min_version, t.max_version) for k, t in translations().items()}


def check_against_kio() -> None:
    """Raise if kio lacks a request or response class for an advertised version."""
    for api_key, (low, high) in supported().items():
        for version in range(low, high + 1):
            request_class(api_key, version)
            response_class(api_key, version)
