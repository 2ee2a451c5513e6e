"""One confluent-kafka (librdkafka) group member as its own process, for the Kafka-protocol
group tests: `python -m tests.support.kafka_group_member BOOTSTRAP GROUP TOPIC NAME`.

It subscribes, consumes, and commits synchronously after each poll, printing one JSON line
per event on stdout: `assigned` (partitions), `consumed` (partition, offset, value) and
`committed` (partition -> next offset, printed only once the broker acknowledged it). It
runs until killed or until stdin closes.
"""

from __future__ import annotations

import json
import sys
import threading

from confluent_kafka import Consumer, KafkaException


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def main(bootstrap: str, group: str, topic: str, name: str) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 3000,
            "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 2000,
        }
    )

    def on_assign(_consumer, partitions) -> None:
        emit("assigned", partitions=sorted(p.partition for p in partitions))

    consumer.subscribe([topic], on_assign=on_assign)
    try:
        while not stop.is_set():
            messages = consumer.consume(num_messages=200, timeout=0.2)
            latest: dict[int, int] = {}
            for message in messages:
                if message.error():
                    continue
                emit(
                    "consumed",
                    partition=message.partition(),
                    offset=message.offset(),
                    value=message.value().decode(),
                )
                latest[message.partition()] = message.offset() + 1
            if latest:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:  # a rebalance in between: say so, go on
                    emit("commit_failed", error=str(exc))
                else:
                    emit("committed", offsets={str(p): o for p, o in latest.items()})
    finally:
        consumer.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
