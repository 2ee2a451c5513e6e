"""The Kafka APIs and versions the Kafka listener serves: what ApiVersions advertises and
what the decoder accepts.

How it works: every translate module (translate_data.py, translate_admin.py,
translate_configs.py, translate_groups.py, translate_users.py, translate_sasl.py,
translate_txn.py, translate_txn_markers.py, translate_quotas.py)
exposes `TRANSLATIONS: dict[int, Translation]`, each entry with the version range its
functions translate correctly; none of them imports this module.
`translations()` merges them with ApiVersions' own translation (here: its answer is the
merged table itself, so ApiVersions can only advertise what is really translated), and
`supported()` is the resulting {api_key: (min_version, max_version)} table.
`check_against_kio()` verifies that kio has request and response classes for every
advertised version (the tests call it). The dispatcher (dispatcher.py) and the wire
decoder (wire.py, given `supported` by broker/server.py) read the merged table.

Data-plane ranges (translate_data.py) and why they stop where they do:
- Produce 3-9: v3 is the first with v2 record batches; v10+ add KIP-951 leader hints.
- Fetch 4-17: v7+ carry fetch sessions (KIP-227), kept by the broker's session cache;
  v4-6 are sessionless. v13+ name topics by topic id (Kafka 3.1; @platformatic/kafka
  fetches only so); v14-17 add nothing a consumer sends (tiered storage, KIP-903's
  replica state, KIP-951's leader hints, KIP-853's directory id); v18 is KRaft-only.
- ListOffsets 1-8: v7 adds MAX_TIMESTAMP (-3, KIP-734), v8 EARLIEST_LOCAL_TIMESTAMP (-4,
  the log start: no tiered storage); v9's LATEST_TIERED (-5) would be meaningless here.
- Metadata 0-12: v10+ answer topic ids, v12 may ask by topic id; v13 adds nothing a
  client needs.
- OffsetForLeaderEpoch 2-4, ApiVersions 0-3 (here); DescribeAcls, CreateAcls and
  DeleteAcls 1-3 (translate_acls.py).
- WriteTxnMarkers 1 (translate_txn_markers.py): kio has no v0; v2 is KIP-890 part 2.
- InitProducerId 0-4: every version librdkafka and the Java client use for idempotence
  and transactions; v5 is unreleased in Kafka 2.8/3.x era clients.
- Transactions (translate_txn.py): AddPartitionsToTxn 0-3 (v4+ is KIP-890's
  broker-to-broker batch, native here), AddOffsetsToTxn 0-3, EndTxn 0-3 (v4+ are
  KIP-890 part 2's epoch bumps, which the coordinator does not do), TxnOffsetCommit 0-3
  (v3 is KIP-447's), DescribeTransactions 0, ListTransactions 0 (KIP-664).
"""

from __future__ import annotations

import functools
from typing import Any

from broker.kafka import (
    translate_acls,
    translate_admin,
    translate_configs,
    translate_data,
    translate_groups,
    translate_quotas,
    translate_replicas,
    translate_sasl,
    translate_txn,
    translate_txn_markers,
    translate_users,
)
from broker.kafka.translation import (
    ZERO_MS,
    Translation,
    build,
    kafka_error,
    request_class,
    response_class,
    schema_class,
)
from client.protocol import messages as m
from client.protocol.api import ApiKey
from client.protocol.errors import ErrorCode


def _api_versions_response(version: int, code: int) -> Any:
    cls = response_class(ApiKey.API_VERSIONS, version)
    entry = schema_class(cls, "ApiVersion")
    return build(
        cls,
        error_code=kafka_error(code),
        api_keys=tuple(
            entry(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(supported().items())
        ),
        throttle_time=ZERO_MS,
    )


API_VERSIONS = Translation(
    api_key=ApiKey.API_VERSIONS,
    min_version=0,
    max_version=3,
    to_native=lambda request, header: m.ApiVersionsRequest(),
    from_native=lambda response, version: _api_versions_response(version, ErrorCode.NONE),
    error_response=lambda request, version, code: _api_versions_response(version, code),
)


@functools.cache
def translations() -> dict[int, Translation]:
    """Every API the Kafka listener serves, merged from the translate modules."""
    merged: dict[int, Translation] = {int(API_VERSIONS.api_key): API_VERSIONS}
    for module in (
        translate_data,
        translate_admin,
        translate_configs,
        translate_groups,
        translate_replicas,
        translate_acls,
        translate_sasl,
        translate_users,
        translate_txn_markers,
        translate_txn,
        translate_quotas,
    ):
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
