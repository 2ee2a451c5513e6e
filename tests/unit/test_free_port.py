"""Ports for local servers are picked below the kernel's ephemeral range, so that no
outgoing connection (of any test running beside, or of the cluster itself) can take a
broker's port between the pick and the bind, or while the broker is down for a restart."""

from __future__ import annotations

import socket

import pytest

from tools.cluster.zookeeper import (
    LISTEN_PORTS_ENV,
    LISTEN_PORTS_FROM,
    ZooKeeperError,
    _ephemeral_range,
    free_port,
)


def test_picked_ports_are_bindable_and_outside_the_ephemeral_range():
    low, _ = _ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert LISTEN_PORTS_FROM <= port < low
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_picked():
    with socket.socket() as held:
        held.bind(("127.0.0.1", free_port()))
        held.listen()
        taken = held.getsockname()[1]
        assert all(free_port() != taken for _ in range(2000))


def test_a_launcher_can_be_given_a_range_of_its_own(monkeypatch):
    monkeypatch.setenv(LISTEN_PORTS_ENV, "21000-21200")
    assert all(21000 <= free_port() < 21200 for _ in range(50))
    monkeypatch.setenv(LISTEN_PORTS_ENV, "twenty")
    with pytest.raises(ZooKeeperError, match="expected LOW-HIGH"):
        free_port()
