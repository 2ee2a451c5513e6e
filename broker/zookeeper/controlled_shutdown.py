"""Controlled shutdown: before it stops, a broker asks the active controller to move its
leaderships away (Kafka's ControlledShutdown).

How it works: find the controller's address in /controller (through the gateway), send
ControlledShutdown with our broker epoch and wait for the answer: the partitions still
led here. An empty list means done. Otherwise (or on any failure) wait
`controlled.shutdown.retry.backoff.ms` and try again, up to
`controlled.shutdown.max.retries` attempts, each bounded by the request timeout, so a
controller or ZooKeeper that is gone never keeps the broker from exiting.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from broker.zookeeper.gateway import BrokerZkGateway
from broker.zookeeper.registration import BrokerIdentity
from client.connection import BrokerConnectionError, Connector, open_connection
from client.protocol import messages as m
from client.protocol.errors import ErrorCode, ProtocolError, TributaryError
from server_common.zk import ZkError

log = logging.getLogger(__name__)

# An attempt may take the request timeout plus this (finding the controller, connecting).
ATTEMPT_SLACK_S = 5.0


@dataclass(frozen=True)
class ShutdownSettings:
    enable: bool = True  # controlled.shutdown.enable
    max_retries: int = 3  # controlled.shutdown.max.retries
    retry_backoff_s: float = 5.0  # controlled.shutdown.retry.backoff.ms
    request_timeout_s: float = 30.0  # request.timeout.ms


async def controlled_shutdown(
    gateway: BrokerZkGateway,
    identity: BrokerIdentity,
    settings: ShutdownSettings,
    connector: Connector,
) -> bool:
    """Hand our leaderships to others; True if the controller says none are left."""
    if not settings.enable:
        return False
    attempt_timeout = settings.request_timeout_s + ATTEMPT_SLACK_S
    for attempt in range(1, settings.max_retries + 1):
        remaining = None
        try:
            with trio.move_on_after(attempt_timeout) as scope:
                remaining = await _ask_controller(gateway, identity, settings, connector)
            if scope.cancelled_caught:
                raise BrokerConnectionError(f"no answer within {attempt_timeout:.0f}s")
        except (BrokerConnectionError, TributaryError, ProtocolError, OSError, ZkError) as exc:
            log.warning("controlled shutdown attempt %d failed: %s", attempt, exc)
        if remaining == []:
            log.info("controlled shutdown succeeded")
            return True
        if remaining:
            log.info(
                "controlled shutdown attempt %d: %d partition(s) still led here",
                attempt,
                len(remaining),
            )
        await trio.sleep(settings.retry_backoff_s)
    log.warning("controlled shutdown did not complete; shutting down anyway")
    return False


async def _ask_controller(
    gateway: BrokerZkGateway,
    identity: BrokerIdentity,
    settings: ShutdownSettings,
    connector: Connector,
) -> list | None:
    controller = await gateway.controller()
    if controller is None:
        log.warning("no active controller to hand leaderships to; shutting down anyway")
        return []
    if controller.host is None or controller.port is None:
        raise BrokerConnectionError("the controller has no address")
    async with open_connection(
        controller.host,
        controller.port,
        client_id=f"broker-{identity.broker_id}",
        connector=connector,
    ) as connection:
        response = await connection.request(
            m.ControlledShutdownRequest(
                broker_id=identity.broker_id, broker_epoch=identity.broker_epoch
            ),
            timeout_s=settings.request_timeout_s,
        )
    if response.error_code != ErrorCode.NONE:
        raise TributaryError(response.error_code, "controlled shutdown refused")
    return list(response.remaining_partitions)
