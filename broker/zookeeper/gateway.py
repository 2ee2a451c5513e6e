"""Every ZooKeeper read and write a broker makes, in one place.

How it works: `BrokerZkGateway` wraps the ZooKeeper seam (`server_common.zk.ZooKeeper`)
and speaks in the broker's terms: register this broker, read topic configs, write an ISR
change, publish ISR change notifications, create or mark a topic for deletion, ask for a
preferred election or a reassignment, find the controller, claim a block of producer ids
for idempotent producers. It encodes and decodes the znodes (`server_common.zkdata`,
`broker.core.producer_ids`), so nothing else in the broker knows a ZooKeeper path.

Failures: the seam's `ZkError`s pass through, except where the answer is part of the
protocol (a conditional ISR write that lost to the controller is an `IsrUpdateConflict`,
a topic that exists already is `None`...). An ISR write that ZooKeeper could not answer
is an `IsrUpdateFailed` for the core to retry.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable

import trio

from broker.core.partition import (
    IsrUpdateConflict,
    IsrUpdateFailed,
    IsrUpdateOutcome,
    IsrUpdateSucceeded,
)
from broker.core.producer_ids import BLOCK_SIZE, ProducerIdBlock, encode_block, next_block
from client.protocol.topic_ids import new_topic_id
from client.protocol.types import TopicPartition
from server_common import zkdata
from server_common.security import user_credentials
from server_common.zk import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    ZkError,
    ZooKeeper,
)

log = logging.getLogger(__name__)

# While a previous incarnation's ephemeral registration has not expired yet, look again
# this often.
REGISTRATION_RETRY_S = 0.5
# Another broker's preferred election is being processed: look again this often.
ELECTION_RETRY_S = 0.1


class BrokerIdTakenError(RuntimeError):
    """Another live broker holds this broker id."""


class BrokerZkGateway:
    def __init__(self, zk: ZooKeeper):
        self.zk = zk

    # -- session -----------------------------------------------------------------------
    @property
    def session_events(self) -> trio.MemoryReceiveChannel[SessionEvent]:
        return self.zk.session_events

    @property
    def session_timeout_s(self) -> float:
        return self.zk.session_timeout_ms / 1000

    async def start(self) -> None:
        await self.zk.start()
        await self.zk.ensure_paths(zkdata.PERSISTENT_PATHS)

    async def stop(self) -> None:
        await self.zk.stop()

    # -- identity ----------------------------------------------------------------------
    async def cluster_id(self) -> str | None:
        """The cluster's id (/cluster/id), created by the first broker to ask."""
        existing = await self.zk.get_or_none(zkdata.CLUSTER_ID)
        if existing is None:
            value = json.dumps({"version": "1", "id": uuid.uuid4().hex[:22]}).encode()
            try:
                await self.zk.create(zkdata.CLUSTER_ID, value, makepath=True)
            except NodeExistsError:
                pass
            existing = await self.zk.get_or_none(zkdata.CLUSTER_ID)
        try:
            return json.loads(existing[0])["id"] if existing else None
        except (ValueError, KeyError, TypeError):
            return None

    async def register(self, registration: zkdata.BrokerRegistration, patience_s: float) -> int:
        """Create our ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid).

        A registration left by our own previous incarnation disappears when its session
        expires: wait for that up to `patience_s`, then give up (`BrokerIdTakenError`).
        """
        path = zkdata.broker_path(registration.broker_id)
        with trio.move_on_after(patience_s):
            while True:
                try:
                    _, stat = await self.zk.create_with_stat(
                        path, registration.encode(), ephemeral=True, makepath=True
                    )
                    return stat.czxid
                except NodeExistsError:
                    existing = await self.zk.exists(path)
                    if existing is not None and existing.ephemeral_owner == self.zk.session_id:
                        return existing.czxid
                await trio.sleep(REGISTRATION_RETRY_S)
        raise BrokerIdTakenError(
            f"broker id {registration.broker_id} is registered by another live broker"
        )

    async def controller(self) -> zkdata.ControllerRegistration | None:
        """The active controller's registration (None: no active controller)."""
        result = await self.zk.get_or_none(zkdata.CONTROLLER)
        return None if result is None else zkdata.ControllerRegistration.decode(result[0])

    async def live_broker_ids(self) -> set[int]:
        children = await self.zk.get_children_or_empty(zkdata.BROKERS_IDS)
        return {int(c) for c in children if c.isdigit()}

    async def live_broker_racks(self) -> dict[int, str | None]:
        """Each live broker's rack (`broker.rack`, None if it has none), from its
        registration in /brokers/ids, as replica assignment needs them."""
        racks: dict[int, str | None] = {}
        for broker_id in sorted(await self.live_broker_ids()):
            found = await self.zk.get_or_none(zkdata.broker_path(broker_id))
            if found is None:
                continue  # gone since the listing
            try:
                registration = zkdata.BrokerRegistration.decode(broker_id, found[0])
            except zkdata.ZkDataError:
                continue
            racks[broker_id] = registration.rack or None
        return racks

    # -- replication ---------------------------------------------------------------------
    async def write_isr(self, tp: TopicPartition, state: zkdata.LeaderAndIsr) -> IsrUpdateOutcome:
        """The leader's ISR change as a conditional set on the partition state znode."""
        path = zkdata.partition_state_path(tp.topic, tp.partition)
        try:
            stat = await self.zk.set(path, state.encode(), version=state.zk_version)
            return IsrUpdateSucceeded(stat.version)
        except BadVersionError:
            current = await self._read_state(path)
            if current is not None and current.same_state(state):
                return IsrUpdateSucceeded(current.zk_version)
            return IsrUpdateConflict(current)
        except NoNodeError:
            return IsrUpdateConflict(None)
        except ZkError as exc:
            return IsrUpdateFailed(f"{type(exc).__name__}: {exc}")

    async def _read_state(self, path: str) -> zkdata.LeaderAndIsr | None:
        try:
            result = await self.zk.get_or_none(path)
        except ZkError:
            return None
        if result is None:
            return None
        data, stat = result
        try:
            return zkdata.LeaderAndIsr.decode(data, stat.version, path)
        except zkdata.ZkDataError:
            return None

    async def publish_isr_changes(self, partitions: Iterable[TopicPartition]) -> None:
        """One sequential /isr_change_notification/isr_change_ znode naming them."""
        data = zkdata.encode_isr_change([(tp.topic, tp.partition) for tp in partitions])
        await self.zk.create(
            f"{zkdata.ISR_CHANGE_NOTIFICATION}/{zkdata.ISR_CHANGE_PREFIX}",
            data,
            sequence=True,
            makepath=True,
        )

    # -- topics --------------------------------------------------------------------------
    async def topic_configs(self, topics: list[str]) -> dict[str, dict[str, str]]:
        """Config overrides of `topics` (/config/topics/<t>; {} where there are none or
        the znode is unreadable)."""
        results = await self.zk.get_many([zkdata.topic_config_path(t) for t in topics])
        overrides: dict[str, dict[str, str]] = {}
        for topic, result in zip(topics, results, strict=True):
            overrides[topic] = {}
            if result is not None:
                try:
                    overrides[topic] = zkdata.decode_topic_config(topic, result[0])
                except zkdata.ZkDataError as exc:
                    log.warning("ignoring a bad topic config: %s", exc)
        return overrides

    async def set_topic_config(self, topic: str, config: dict[str, str]) -> None:
        """Replace /config/topics/<t>, then announce it with a sequential
        /config/changes/config_change_ znode (every broker watches those, as in Kafka)."""
        await self._replace_and_announce(
            zkdata.topic_config_path(topic), zkdata.encode_topic_config(config), f"topics/{topic}"
        )

    async def broker_configs(self, entities: list[str]) -> dict[str, dict[str, str]]:
        """Dynamic broker configs of `entities` (broker ids or `<default>`) from
        /config/brokers/<entity> ({} where there are none or the znode is unreadable)."""
        return await self._entity_configs(entities, zkdata.broker_config_path, "broker")

    async def set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        """Replace /config/brokers/<entity> and announce it (entity path brokers/<entity>),
        as Kafka's AdminZkClient.changeBrokerConfig does."""
        await self._replace_and_announce(
            zkdata.broker_config_path(entity),
            zkdata.encode_broker_config(config),
            f"brokers/{entity}",
        )

    # -- users (SCRAM credentials) ---------------------------------------------------------
    async def user_configs(self, users: list[str]) -> dict[str, dict[str, str]]:
        """Configs of `users` (/config/users/<sanitized user>; {} where there are none or
        the znode is unreadable)."""
        return await user_credentials.read_user_configs(self.zk, users)

    async def _entity_configs(
        self, entities: list[str], path_of: Callable[[str], str], kind: str
    ) -> dict[str, dict[str, str]]:
        return await user_credentials.read_entity_configs(self.zk, entities, path_of, kind)

    async def all_user_configs(self) -> dict[str, dict[str, str]]:
        """Every user with a znode under /config/users, and its config."""
        return await user_credentials.read_all_user_configs(self.zk)

    async def set_user_config(self, user: str, config: dict[str, str]) -> None:
        """Replace /config/users/<user> and announce it (entity path users/<user>), as
        Kafka's AdminZkClient.changeConfigs does for ConfigType.User."""
        await self._replace_and_announce(
            zkdata.user_config_path(user),
            zkdata.encode_user_config(config),
            f"users/{zkdata.sanitize_entity_name(user)}",
        )

    # -- client quotas (users, client-ids and both) ---------------------------------------
    async def quota_entity_paths(self) -> list[str]:
        """Every entity path under /config/users and /config/clients: `users/<u>`,
        `users/<u>/clients/<c>`, `clients/<c>` (names as ZooKeeper holds them)."""
        paths = []
        for user in await self.zk.get_children_or_empty(zkdata.CONFIG_USERS):
            paths.append(f"users/{user}")
            clients = await self.zk.get_children_or_empty(f"{zkdata.CONFIG_USERS}/{user}/clients")
            paths.extend(f"users/{user}/clients/{client}" for client in clients)
        for client in await self.zk.get_children_or_empty(zkdata.CONFIG_CLIENTS):
            paths.append(f"clients/{client}")
        return paths

    async def entity_configs(self, entity_paths: list[str]) -> dict[str, dict[str, str]]:
        """The configs of `entity_paths` (/config/<path>; {} where there is none)."""
        return await self._entity_configs(entity_paths, zkdata.entity_config_path, "entity")

    async def set_entity_config(self, entity_path: str, config: dict[str, str]) -> None:
        """Replace /config/<entity_path> (a quota entity's) and announce it; a
        user+client-id entity's user znode is created first, with no config, if missing
        (Kafka's AdminZkClient.changeUserOrUserClientIdConfig)."""
        parts = entity_path.split("/")
        if len(parts) == 4:
            try:
                await self.zk.create(
                    zkdata.entity_config_path("/".join(parts[:2])),
                    zkdata.encode_user_config({}),
                    makepath=True,
                )
            except NodeExistsError:
                pass
        await self._replace_and_announce(
            zkdata.entity_config_path(entity_path), zkdata.encode_user_config(config), entity_path
        )

    async def _replace_and_announce(self, path: str, data: bytes, entity_path: str) -> None:
        """Write a config znode (creating it if needed), then add the sequential
        /config/changes/config_change_ znode every broker watches, naming `entity_path`."""
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            await self.zk.create(path, data, makepath=True)
        await self.zk.create(
            f"{zkdata.CONFIG_CHANGES}/{zkdata.CONFIG_CHANGE_PREFIX}",
            zkdata.encode_config_change(entity_path),
            sequence=True,
            makepath=True,
        )

    async def config_change_entities(self, names: list[str]) -> list[str]:
        """The entity paths the named /config/changes children announce (unreadable or
        vanished ones left out)."""
        paths = [f"{zkdata.CONFIG_CHANGES}/{name}" for name in names]
        entities = []
        for path, result in zip(paths, await self.zk.get_many(paths), strict=True):
            if result is None:
                continue
            try:
                entities.append(zkdata.decode_config_change(path, result[0]))
            except zkdata.ZkDataError as exc:
                log.warning("ignoring a bad config change notification: %s", exc)
        return entities

    async def delete_config_changes(self, names: list[str]) -> int:
        """Delete the named /config/changes children (ones already gone are skipped);
        returns how many this call deleted."""
        deleted = 0
        for name in names:
            try:
                await self.zk.delete(f"{zkdata.CONFIG_CHANGES}/{name}")
                deleted += 1
            except NoNodeError:
                pass  # another broker purged it first
        return deleted

    async def watch_config_changes(self):
        """A channel of /config/changes' child lists, now and on every change."""
        return await self.zk.watch_children(zkdata.CONFIG_CHANGES)

    async def topic_exists(self, topic: str) -> bool:
        return await self.zk.exists(zkdata.topic_path(topic)) is not None

    async def topic_being_deleted(self, topic: str) -> bool:
        return await self.zk.exists(zkdata.delete_topic_path(topic)) is not None

    async def topic_assignment(self, topic: str) -> zkdata.TopicAssignment | None:
        result = await self.zk.get_or_none(zkdata.topic_path(topic))
        return None if result is None else zkdata.TopicAssignment.decode(topic, result[0])

    async def create_topic(
        self,
        topic: str,
        assignment: dict[int, list[int]],
        config: dict[str, str],
        topic_id: uuid.UUID | None = None,
    ) -> uuid.UUID | None:
        """Write /config/topics/<t>, then /brokers/topics/<t> with the topic's id (a new
        random one unless given; the controller watches the znode, so the config is there
        first). The id written, or None if the topic exists already."""
        topic_id = topic_id or new_topic_id()
        config_path = zkdata.topic_config_path(topic)
        data = zkdata.encode_topic_config(config)
        try:
            await self.zk.create(config_path, data, makepath=True)
        except NodeExistsError:
            await self.zk.set(config_path, data)
        value = zkdata.TopicAssignment(
            topic, {p: tuple(r) for p, r in assignment.items()}, topic_id=topic_id
        )
        try:
            await self.zk.create(zkdata.topic_path(topic), value.encode(), makepath=True)
        except NodeExistsError:
            return None
        return topic_id

    async def topic_assignment_and_version(self, topic: str) -> zkdata.TopicAssignment | None:
        """The topic znode's assignment, with the version it was read at (for a
        conditional update), or None."""
        result = await self.zk.get_or_none(zkdata.topic_path(topic))
        if result is None:
            return None
        return zkdata.TopicAssignment.decode(topic, result[0], result[1].version)

    async def add_partitions(self, assignment: zkdata.TopicAssignment) -> bool:
        """Write the topic znode with partitions added (Kafka's AdminZkClient
        createPartitions: the controller's watch on the znode does the rest). A
        conditional set at the version `assignment` was read at: False if the znode
        changed since."""
        try:
            await self.zk.set(
                zkdata.topic_path(assignment.topic), assignment.encode(), assignment.zk_version
            )
        except (BadVersionError, NoNodeError):
            return False
        return True

    async def mark_topic_for_deletion(self, topic: str) -> None:
        try:
            await self.zk.create(zkdata.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass  # marked already

    # -- admin requests to the controller ----------------------------------------------------
    async def request_preferred_election(self, partitions: list[TopicPartition]) -> None:
        """Write /admin/preferred_replica_election, waiting while another is being
        processed (the caller bounds the wait)."""
        data = zkdata.encode_partition_list([(tp.topic, tp.partition) for tp in partitions])
        while True:
            try:
                await self.zk.create(zkdata.ADMIN_PREFERRED_REPLICA_ELECTION, data, makepath=True)
                return
            except NodeExistsError:
                await trio.sleep(ELECTION_RETRY_S)

    async def request_leader_step_down(self, broker_id: int, partitions: list[TopicPartition]):
        """Ask the controller to move these leaderships away from `broker_id` (the
        scrubber found damaged bytes). A request of ours still there (a controller that
        failed over before handling it) is replaced, which notifies the controller again."""
        path = zkdata.leader_step_down_path(broker_id)
        data = zkdata.encode_partition_list([(tp.topic, tp.partition) for tp in partitions])
        try:
            await self.zk.create(path, data, makepath=True)
        except NodeExistsError:
            try:
                await self.zk.delete(path)
            except NoNodeError:
                pass
            await self.zk.create(path, data, makepath=True)

    async def start_reassignment(self, plan: dict[tuple[str, int], tuple[int, ...]]) -> bool:
        """Write /admin/reassign_partitions; False if a reassignment is in progress."""
        try:
            await self.zk.create(
                zkdata.ADMIN_REASSIGN_PARTITIONS, zkdata.encode_reassignment(plan), makepath=True
            )
        except NodeExistsError:
            return False
        return True

    async def reassignment_plan(self) -> dict[tuple[str, int], tuple[int, ...]]:
        """The reassignment in progress ({} if none)."""
        result = await self.zk.get_or_none(zkdata.ADMIN_REASSIGN_PARTITIONS)
        return zkdata.decode_reassignment(result[0]) if result else {}

    # -- idempotent producers ----------------------------------------------------------
    async def claim_producer_id_block(
        self, broker_id: int, block_size: int = BLOCK_SIZE
    ) -> ProducerIdBlock:
        """The next block of producer ids, claimed with a conditional write on
        /latest_producer_id_block (Kafka's ZooKeeper ProducerIdManager): a lost race with
        another broker reads the node again."""
        path = zkdata.LATEST_PRODUCER_ID_BLOCK
        while True:
            found = await self.zk.get_or_none(path)
            block = next_block(found[0] if found else None, broker_id, block_size)
            try:
                if found is None:
                    await self.zk.create(path, encode_block(block))
                else:
                    await self.zk.set(path, encode_block(block), version=found[1].version)
            except (BadVersionError, NodeExistsError):
                log.debug("lost the race for a producer id block; reading again")
                continue
            log.info("claimed producer id block [%d, %d]", block.start, block.end)
            return block
