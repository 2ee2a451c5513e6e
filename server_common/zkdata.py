"""ZooKeeper layout and JSON formats, as Kafka 2.x writes them (SPEC.md "ZooKeeper layout").

Pure functions from values to (path, bytes) and back, shared by brokers, controllers and
the CLI. Decoders raise `ZkDataError` for malformed znodes instead of crashing callers.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from dataclasses import dataclass, field

from client.protocol.topic_ids import ZERO_TOPIC_ID, parse_topic_id, topic_id_str

BROKERS_IDS = "/brokers/ids"
BROKERS_TOPICS = "/brokers/topics"
BROKERS_SEQID = "/brokers/seqid"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
# Dynamic broker configs: /config/brokers/<id>, and <default> for the cluster-wide ones.
CONFIG_BROKERS = "/config/brokers"
BROKER_DEFAULT_ENTITY = "<default>"
# Users' configs (SCRAM credentials): /config/users/<sanitized user>.
CONFIG_USERS = "/config/users"
# Client quotas (Kafka 2.8): /config/users/<u>, /config/users/<u>/clients/<c> and
# /config/clients/<c>, <default> for the defaults, names sanitized as users' are.
CONFIG_CLIENTS = "/config/clients"
ADMIN_DELETE_TOPICS = "/admin/delete_topics"
ADMIN_PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ADMIN_REASSIGN_PARTITIONS = "/admin/reassign_partitions"
# Tributary's own (Kafka has no such path): a broker whose scrubber found damaged bytes
# in a partition it leads asks, with one child per broker, to hand the leadership over.
ADMIN_LEADER_STEP_DOWN = "/admin/leader_step_down"
CLUSTER_ID = "/cluster/id"
# Idempotent producers' id blocks (Kafka 2.8's ZooKeeper ProducerIdManager).
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"

# Paths a fresh cluster needs (Kafka creates the same persistent paths on start-up).
PERSISTENT_PATHS = (
    BROKERS_IDS,
    BROKERS_TOPICS,
    BROKERS_SEQID,
    ISR_CHANGE_NOTIFICATION,
    CONFIG_TOPICS,
    CONFIG_CHANGES,
    CONFIG_BROKERS,
    ADMIN_DELETE_TOPICS,
    ADMIN_LEADER_STEP_DOWN,
)

NO_LEADER = -1
# UpdateMetadata's leader value for a partition whose topic is being deleted (Kafka's
# LeaderAndIsr.LeaderDuringDelete).
LEADER_DURING_DELETE = -2


class ZkDataError(ValueError):
    """A znode's content is not what the layout says."""


def _loads(data: bytes | None, path: str) -> dict:
    if data is None:
        raise ZkDataError(f"{path}: no data")
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZkDataError(f"{path}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ZkDataError(f"{path}: expected a JSON object")
    return value


def _dumps(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _int(obj: dict, key: str, path: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ZkDataError(f"{path}: {key!r} must be an integer")
    return value


def _int_list(obj: dict, key: str, path: str) -> tuple[int, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZkDataError(f"{path}: {key!r} must be a list of integers")
    return tuple(value)


# -- paths -----------------------------------------------------------------------------
def broker_path(broker_id: int) -> str:
    return f"{BROKERS_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKERS_TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{BROKERS_TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{BROKERS_TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{BROKERS_TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def broker_config_path(entity: str) -> str:
    """/config/brokers/<id> or /config/brokers/<default>."""
    return f"{CONFIG_BROKERS}/{entity}"


def sanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.sanitize: a user name as a znode name (URL-encoded: letters,
    digits, '.', '-' and '_' stay, everything else is %XX of its UTF-8 bytes)."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize_entity_name(name: str) -> str:
    """Kafka's Sanitizer.desanitize."""
    return urllib.parse.unquote(name, errors="strict")


def user_config_path(user: str) -> str:
    """/config/users/<user>, the user name sanitized as Kafka does. ZkDataError for "."
    and "..", which Kafka's Sanitizer keeps and ZooKeeper refuses as path elements."""
    if user in (".", ".."):
        raise ZkDataError(f"user name {user!r} cannot be a znode name")
    return f"{CONFIG_USERS}/{sanitize_entity_name(user)}"


def entity_config_path(entity_path: str) -> str:
    """/config/<entity path> (`users/alice/clients/<default>`, `clients/c1`...)."""
    return f"/config/{entity_path}"


def delete_topic_path(topic: str) -> str:
    return f"{ADMIN_DELETE_TOPICS}/{topic}"


# -- /brokers/ids/<id> -----------------------------------------------------------------
@dataclass(frozen=True)
class BrokerRegistration:
    """`host`/`port` are the inter-broker listener's; `endpoints` every advertised
    listener as (name, host, port) (empty means just PLAINTEXT at host:port)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    timestamp_ms: int = 0
    metrics_port: int | None = None
    # The znode's creation transaction id: Kafka's "broker epoch" (KIP-380).
    broker_epoch: int = -1
    endpoints: tuple[tuple[str, str, int], ...] = ()
    # Listener name -> security protocol (Kafka's map); a name left out is PLAINTEXT.
    security_protocols: tuple[tuple[str, str], ...] = ()

    def all_endpoints(self) -> tuple[tuple[str, str, int], ...]:
        return self.endpoints or (("PLAINTEXT", self.host, self.port),)

    def encode(self) -> bytes:
        endpoints = self.all_endpoints()
        body = {
            "version": 5,
            "host": self.host,
            "port": self.port,
            "endpoints": [f"{name}://{host}:{port}" for name, host, port in endpoints],
            "listener_security_protocol_map": {
                name: dict(self.security_protocols).get(name, "PLAINTEXT")
                for name, _, _ in endpoints
            },
            "jmx_port": -1,
            "rack": self.rack,
            "timestamp": str(self.timestamp_ms),
        }
        if self.metrics_port is not None:
            body["metrics_port"] = self.metrics_port
        return _dumps(body)

    @classmethod
    def decode(cls, broker_id: int, data: bytes, czxid: int = -1) -> BrokerRegistration:
        path = broker_path(broker_id)
        obj = _loads(data, path)
        host, port = obj.get("host"), obj.get("port")
        if not isinstance(host, str) or not isinstance(port, int):
            raise ZkDataError(f"{path}: host/port missing")
        rack = obj.get("rack")
        metrics_port = obj.get("metrics_port")
        try:
            timestamp = int(obj.get("timestamp", 0))
        except (TypeError, ValueError):
            timestamp = 0
        endpoints = []
        for entry in obj.get("endpoints") or []:
            if not isinstance(entry, str) or "://" not in entry:
                continue
            name, _, address = entry.partition("://")
            ep_host, _, ep_port = address.rpartition(":")
            if ep_port.isdigit():
                endpoints.append((name, ep_host, int(ep_port)))
        return cls(
            broker_id=broker_id,
            host=host,
            port=port,
            rack=rack if isinstance(rack, str) else None,
            timestamp_ms=timestamp,
            metrics_port=metrics_port if isinstance(metrics_port, int) else None,
            broker_epoch=czxid,
            endpoints=tuple(endpoints),
        )


# -- /brokers/topics/<t> ---------------------------------------------------------------
@dataclass(frozen=True)
class TopicAssignment:
    """A topic's replica assignment and id, as Kafka 2.8's TopicZNode holds them.

    With an id the znode is version 3 and carries `"topic_id"` (Kafka's base64 text);
    without one (a topic created before ids existed) it is version 2 and the controller
    gives it one when it loads the topic. A zero id in a znode counts as none.
    `zk_version` is the znode version the value was read at (-1: not read), for a
    conditional set; it is not part of the value."""

    topic: str
    partitions: dict[int, tuple[int, ...]]
    adding_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None
    zk_version: int = field(default=-1, compare=False)

    @property
    def id_text(self) -> str | None:
        """The id as the znode writes it (Kafka's base64 text), None without one."""
        return None if self.topic_id is None else topic_id_str(self.topic_id)

    def encode(self) -> bytes:
        def as_json(mapping: dict[int, tuple[int, ...]]) -> dict[str, list[int]]:
            return {str(p): list(r) for p, r in sorted(mapping.items())}

        body: dict = {
            "version": 2 if self.topic_id is None else 3,
            "partitions": as_json(self.partitions),
            "adding_replicas": as_json(self.adding_replicas),
            "removing_replicas": as_json(self.removing_replicas),
        }
        if self.topic_id is not None:
            body["topic_id"] = self.id_text
        return _dumps(body)

    @classmethod
    def decode(cls, topic: str, data: bytes, zk_version: int = -1) -> TopicAssignment:
        path = topic_path(topic)
        obj = _loads(data, path)

        def parse(key: str, required: bool) -> dict[int, tuple[int, ...]]:
            raw = obj.get(key)
            if raw is None and not required:
                return {}
            if not isinstance(raw, dict):
                raise ZkDataError(f"{path}: {key!r} must be an object")
            result = {}
            for p, replicas in raw.items():
                try:
                    partition = int(p)
                except ValueError:
                    raise ZkDataError(f"{path}: bad partition id {p!r}") from None
                result[partition] = _int_list({"r": replicas}, "r", f"{path} {key}[{p}]")
            return result

        topic_id = None
        if obj.get("topic_id") is not None:
            try:
                topic_id = parse_topic_id(obj["topic_id"])
            except ValueError as exc:
                raise ZkDataError(f"{path}: bad topic_id ({exc})") from None
            if topic_id == ZERO_TOPIC_ID:
                topic_id = None
        return cls(
            topic=topic,
            partitions=parse("partitions", True),
            adding_replicas=parse("adding_replicas", False),
            removing_replicas=parse("removing_replicas", False),
            topic_id=topic_id,
            zk_version=zk_version,
        )


# -- /brokers/topics/<t>/partitions/<p>/state -----------------------------------------
@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leadership record; `zk_version` is the znode version it was read at."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = 0

    def encode(self) -> bytes:
        return _dumps(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, zk_version: int, path: str = "state") -> LeaderAndIsr:
        obj = _loads(data, path)
        return cls(
            leader=_int(obj, "leader", path),
            leader_epoch=_int(obj, "leader_epoch", path),
            isr=_int_list(obj, "isr", path),
            controller_epoch=_int(obj, "controller_epoch", path),
            zk_version=zk_version,
        )

    def same_state(self, other: LeaderAndIsr) -> bool:
        """Equal apart from the znode version (Kafka's checkLeaderAndIsrZkData)."""
        return (
            self.leader == other.leader
            and self.leader_epoch == other.leader_epoch
            and sorted(self.isr) == sorted(other.isr)
        )


# -- /config/topics/<t> ----------------------------------------------------------------
def encode_topic_config(config: dict[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_topic_config(topic: str, data: bytes) -> dict[str, str]:
    return decode_entity_config(topic_config_path(topic), data)


# /config/brokers/<entity> and /config/users/<user> hold the same
# {"version": 1, "config": {...}} as a topic's.
encode_broker_config = encode_topic_config
encode_user_config = encode_topic_config


def decode_entity_config(path: str, data: bytes) -> dict[str, str]:
    obj = _loads(data, path)
    config = obj.get("config", {})
    if not isinstance(config, dict):
        raise ZkDataError(f"{path}: 'config' must be an object")
    return {str(k): str(v) for k, v in config.items()}


# -- /config/changes/config_change_<seq> (Kafka's version 2 notification) ------------------
CONFIG_CHANGE_PREFIX = "config_change_"


def encode_config_change(entity_path: str) -> bytes:
    """A notification that /config/<entity_path> changed (e.g. "topics/demo")."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(path: str, data: bytes) -> str:
    """The entity path a notification names; `ZkDataError` if it has none."""
    entity = _loads(data, path).get("entity_path")
    if not isinstance(entity, str):
        raise ZkDataError(f"{path}: 'entity_path' must be a string")
    return entity


def config_change_sequence(name: str) -> int | None:
    """The sequence number of a `config_change_<seq>` child, None for other names."""
    digits = name.removeprefix(CONFIG_CHANGE_PREFIX)
    return int(digits) if name.startswith(CONFIG_CHANGE_PREFIX) and digits.isdigit() else None


# -- /controller -------------------------------------------------------------------------
def encode_controller(controller_id: int, timestamp_ms: int, host: str, port: int) -> bytes:
    return _dumps(
        {
            "version": 1,
            "brokerid": controller_id,
            "timestamp": str(timestamp_ms),
            "host": host,
            "port": port,
        }
    )


@dataclass(frozen=True)
class ControllerRegistration:
    controller_id: int
    host: str | None
    port: int | None
    timestamp_ms: int

    @classmethod
    def decode(cls, data: bytes) -> ControllerRegistration:
        obj = _loads(data, CONTROLLER)
        host, port = obj.get("host"), obj.get("port")
        try:
            timestamp = int(obj.get("timestamp", 0))
        except (TypeError, ValueError):
            timestamp = 0
        return cls(
            controller_id=_int(obj, "brokerid", CONTROLLER),
            host=host if isinstance(host, str) else None,
            port=port if isinstance(port, int) else None,
            timestamp_ms=timestamp,
        )


# -- /isr_change_notification -----------------------------------------------------------
def encode_isr_change(partitions: list[tuple[str, int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
        }
    )


def decode_isr_change(data: bytes, path: str = ISR_CHANGE_NOTIFICATION) -> list[tuple[str, int]]:
    obj = _loads(data, path)
    result = []
    for entry in obj.get("partitions", []):
        if not isinstance(entry, dict):
            raise ZkDataError(f"{path}: bad partition entry")
        topic = entry.get("topic")
        if not isinstance(topic, str):
            raise ZkDataError(f"{path}: bad topic")
        result.append((topic, _int(entry, "partition", path)))
    return result


# -- /admin/* ---------------------------------------------------------------------------
def encode_partition_list(partitions: list[tuple[str, int]]) -> bytes:
    """/admin/preferred_replica_election: {"version":1,"partitions":[{topic,partition}]}."""
    return encode_isr_change(partitions)


decode_partition_list = decode_isr_change


def leader_step_down_path(broker_id: int) -> str:
    """/admin/leader_step_down/<broker id>: {"version":1,"partitions":[{topic,partition}]}."""
    return f"{ADMIN_LEADER_STEP_DOWN}/{broker_id}"


def encode_reassignment(plan: dict[tuple[str, int], tuple[int, ...]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in sorted(plan.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    path = ADMIN_REASSIGN_PARTITIONS
    obj = _loads(data, path)
    plan = {}
    for entry in obj.get("partitions", []):
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ZkDataError(f"{path}: bad partition entry")
        plan[(entry["topic"], _int(entry, "partition", path))] = _int_list(entry, "replicas", path)
    return plan
