"""WriteTxnMarkers (27) on the Kafka listener: a transaction coordinator's COMMIT/ABORT
markers, one to one with the native request (broker/handlers/txn_markers.py).

Version 1 (the flexible one; kio has no v0, and v2 adds KIP-890 part 2's transaction
version): the markers' producer id, epoch, result, coordinator epoch and partitions go
to the native handler as they are, and each partition's error comes back. An error for
the whole request puts its code on every partition.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.translation import KafkaHeader, Translation, build, response_class
from client.protocol import messages as m
from client.protocol.api import ApiKey


def _to_native(request: Any, header: KafkaHeader) -> m.WriteTxnMarkersRequest:
    return m.WriteTxnMarkersRequest(
        markers=[
            m.WritableTxnMarker(
                producer_id=int(marker.producer_id),
                producer_epoch=int(marker.producer_epoch),
                transaction_result=bool(marker.transaction_result),
                coordinator_epoch=int(marker.coordinator_epoch),
                topics=[
                    m.WritableTxnMarkerTopic(
                        name=str(topic.name),
                        partition_indexes=[int(p) for p in topic.partition_indexes],
                    )
                    for topic in marker.topics
                ],
            )
            for marker in request.markers
        ]
    )


def _response(
    version: int, markers: list[tuple[int, list[tuple[str, list[tuple[int, int]]]]]]
) -> Any:
    return build(
        response_class(ApiKey.WRITE_TXN_MARKERS, version),
        markers=[
            dict(
                producer_id=producer_id,
                topics=[
                    dict(
                        name=name,
                        partitions=[
                            dict(partition_index=partition, error_code=code)
                            for partition, code in partitions
                        ],
                    )
                    for name, partitions in topics
                ],
            )
            for producer_id, topics in markers
        ],
    )


def _from_native(response: m.WriteTxnMarkersResponse, version: int) -> Any:
    return _response(
        version,
        [
            (
                marker.producer_id,
                [
                    (topic.name, [(p.partition_index, p.error_code) for p in topic.partitions])
                    for topic in marker.topics
                ],
            )
            for marker in response.markers
        ],
    )


def _error(request: Any, version: int, code: int) -> Any:
    return _response(
        version,
        [
            (
                int(marker.producer_id),
                [
                    (str(topic.name), [(int(p), code) for p in topic.partition_indexes])
                    for topic in marker.topics
                ],
            )
            for marker in request.markers
        ],
    )


WRITE_TXN_MARKERS = Translation(
    api_key=ApiKey.WRITE_TXN_MARKERS,
    min_version=1,
    max_version=1,
    to_native=_to_native,
    from_native=_from_native,
    error_response=_error,
)

TRANSLATIONS: dict[int, Translation] = {int(WRITE_TXN_MARKERS.api_key): WRITE_TXN_MARKERS}
