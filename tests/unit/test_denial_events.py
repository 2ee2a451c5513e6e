"""The `authorization_denied` events of broker/handlers/authorization_check.py: one a
second per (principal, resource, operation) with the count of those not written, a
budget per second in all, and a bounded memory of keys, so a flood of denials cannot fill
the disk (the clock is injected)."""

from __future__ import annotations

from broker.handlers.authorization_check import DenialEvents, Denials
from server_common.security.acls import AclOperation, ResourceType

Op, TOPIC = AclOperation, ResourceType.TOPIC


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def recorder() -> tuple[Denials, Clock, list[dict]]:
    clock, events = Clock(), []
    return Denials(clock, events.append), clock, events


def test_a_denial_is_an_event_with_principal_address_resource_and_operation():
    denials, _, events = recorder()
    denials.note("User:bob", "10.0.0.7", Op.WRITE, TOPIC, "orders")
    assert events == [
        {
            "principal": "User:bob",
            "address": "10.0.0.7",
            "resource_type": "Topic",
            "resource_name": "orders",
            "operation": "Write",
            "suppressed": 0,
        }
    ]
    assert denials.count == 1


def test_repeats_within_a_second_are_counted_and_reported_by_the_next_event():
    denials, clock, events = recorder()
    for _ in range(1000):
        denials.note("User:bob", "10.0.0.7", Op.WRITE, TOPIC, "orders")
    assert len(events) == 1 and denials.count == 1000
    clock.now += 1.0
    denials.note("User:bob", "10.0.0.7", Op.WRITE, TOPIC, "orders")
    assert len(events) == 2 and events[1]["suppressed"] == 999


def test_other_keys_are_not_held_back_by_one_keys_flood():
    denials, _, events = recorder()
    for _ in range(50):
        denials.note("User:bob", "h", Op.WRITE, TOPIC, "orders")
    denials.note("User:bob", "h", Op.READ, TOPIC, "orders")  # another operation
    denials.note("User:bob", "h", Op.WRITE, TOPIC, "payments")  # another resource
    denials.note("User:eve", "h", Op.WRITE, TOPIC, "orders")  # another principal
    assert [(e["principal"], e["resource_name"], e["operation"]) for e in events] == [
        ("User:bob", "orders", "Write"),
        ("User:bob", "orders", "Read"),
        ("User:bob", "payments", "Write"),
        ("User:eve", "orders", "Write"),
    ]


def test_a_flood_of_distinct_resources_is_bounded_per_second_and_nothing_is_lost():
    denials, clock, events = recorder()
    flood = 20_000
    for i in range(flood):
        denials.note("User:eve", "h", Op.WRITE, TOPIC, f"t{i}-" + "x" * 10_000)
    assert len(events) == DenialEvents.MAX_PER_S
    assert all(len(e["resource_name"]) == DenialEvents.NAME_CHARS for e in events)
    assert denials.events is not None
    assert len(denials.events._keys) <= DenialEvents.MAX_KEYS
    clock.now += 1.0
    denials.note("User:eve", "h", Op.WRITE, TOPIC, "last")
    assert len(events) == DenialEvents.MAX_PER_S + 1
    # Every denial is either an event or counted by one.
    total = sum(1 + e["suppressed"] + e.get("other_suppressed", 0) for e in events)
    assert total == flood + 1


def test_remembered_keys_stay_bounded_over_a_long_flood():
    denials, clock, events = recorder()
    for second in range(30):
        clock.now += 1.0
        for i in range(500):
            denials.note("User:eve", "h", Op.WRITE, TOPIC, f"s{second}-{i}")
    assert denials.events is not None
    assert len(denials.events._keys) <= DenialEvents.MAX_KEYS
    assert len(events) == 30 * DenialEvents.MAX_PER_S
    assert sum(1 + e["suppressed"] + e.get("other_suppressed", 0) for e in events) <= 30 * 500
