"""The broker's request handlers: one module per family of requests, and the dispatch.

How it works: `RequestHandlers.handle(header, request, listener)` is what every
connection's reader calls (`server_common.network.serve_connection`, set up in
broker/server.py; a Kafka listener's requests arrive here too, through
broker/kafka/dispatcher.py). It looks the API key up in one table, `_dispatch`, built
below, that names the handler of every API a broker serves, and awaits it: one lookup
per request, and the handler is the family's own bound method. Metadata (answered with
the addresses of the listener it came in on) and the group APIs (which need the client
id and the listener: `GroupHandlers.handle`) take the request's context as well. An API
no broker serves is answered UNSUPPORTED_VERSION.

The families see only what they use (the replica manager, the metadata cache, the
ZooKeeper gateway, the broker's identity, a clock...). Data plane handlers call the
sans-IO core synchronously, before any `await`, so requests of one connection reach the
core in the order they arrived; a response that has to wait is a `Reply` the core's
callback fills. No handler wakes a timer or a fetcher: the core reports those itself
(`ReplicaManager`'s `wake_at` and `followers_changed`).

- `data_plane.py`: Produce, Fetch (through the fetch sessions, KIP-227), ListOffsets,
  OffsetForLeaderEpoch, DeleteRecords (`DataPlaneHandlers`), the tuned paths;
- `metadata.py`: Metadata and ApiVersions, answered from the metadata cache;
- `txn_verify.py`: the produce path's transactional checks (KIP-890's verification);
- `txn_markers.py`: WriteTxnMarkers, the transaction coordinator's COMMIT/ABORT
  markers appended as leader (then `ReplicaManager.txn_marker_listeners`);
- `producer_ids.py`: InitProducerId, ids from blocks claimed in ZooKeeper;
  `producers.py`: DescribeProducers, the producer state partition leaders keep;
- `controller_requests.py`: LeaderAndIsr, UpdateMetadata, StopReplica, fenced by
  controller and broker epoch;
- `log_dirs.py`: DescribeLogDirs and VerifyLogDirs (an on-demand scrub);
- `topics.py`: CreateTopics, CreatePartitions, DeleteTopics, written to ZooKeeper,
  with `TopicDefaults` (the broker settings they apply);
- `configs.py`: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs of topics and
  brokers (dynamic broker configs);
- `users.py`: DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554),
  users' SCRAM credentials in /config/users;
- `quotas.py`: DescribeClientQuotas and AlterClientQuotas (KIP-546), client quotas in
  /config/users and /config/clients;
- `elections.py`: ElectLeaders (preferred); `reassignments.py`: Alter- and
  ListPartitionReassignments; both write the /admin znodes the controller watches;
- `groups.py`: the consumer group APIs (`GROUP_APIS`), over the group coordinator
  (broker/tasks/group_service.py); `coordinators.py`: FindCoordinator's answer for a
  group or transactional id (the leader of its internal topic partition);
- `transactions.py`: the transaction APIs (InitProducerId with a transactional id,
  FindCoordinator key type 1, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, Describe/
  ListTransactions) over the transaction coordinator (broker/tasks/txn_service.py), added
  to the table by broker/txn_wiring.py;
- `acls.py`: DescribeAcls, CreateAcls, DeleteAcls over the ACLs in ZooKeeper;
- `authorization.py`: with an authorizer configured, every request is checked before
  its handler runs (Kafka 2.8 KafkaApis' operations), with `authorization_check.py`
  (the request's principal and host, the ways to answer a refusal) and
  `authorization_groups.py` (the group APIs' rules) and `authorization_transactions.py`
  (the transaction APIs');
- `metadata_changes.py`: waiting until the metadata cache shows a state (the admin
  handlers wait for leaders, deletions, elections).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.core.fetch_sessions import FetchManager, FetchSessionCache, FetchSessionConfig
from broker.core.log.config import LogConfig
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from broker.handlers.acls import AclHandlers
from broker.handlers.authorization import Authorization
from broker.handlers.configs import ConfigHandlers
from broker.handlers.controller_requests import ControllerRequestHandlers
from broker.handlers.data_plane import DataPlaneHandlers
from broker.handlers.elections import ElectionHandlers
from broker.handlers.groups import GROUP_APIS, GroupHandlers
from broker.handlers.log_dirs import LogDirHandlers
from broker.handlers.metadata import MetadataHandlers
from broker.handlers.metadata_changes import MetadataChanges
from broker.handlers.producer_ids import ProducerIdHandlers
from broker.handlers.producers import ProducerHandlers
from broker.handlers.quotas import QuotaHandlers
from broker.handlers.reassignments import ReassignmentHandlers
from broker.handlers.topics import TopicDefaults, TopicHandlers
from broker.handlers.txn_markers import TxnMarkerHandlers
from broker.handlers.users import UserHandlers
from broker.tasks.log_scrubber import LogScrubber
from broker.zookeeper.acls import AclStore
from broker.zookeeper.broker_configs import BrokerConfigs
from broker.zookeeper.gateway import BrokerZkGateway
from broker.zookeeper.registration import BrokerIdentity
from broker.zookeeper.topic_configs import TopicConfigs
from client.protocol.api import ApiKey
from client.protocol.codec import RequestHeader
from client.protocol.errors import ErrorCode
from server_common.network import error_answer


class RequestHandlers:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        gateway: BrokerZkGateway,
        *,
        identity: BrokerIdentity,
        topic_configs: TopicConfigs,
        metadata_changes: MetadataChanges,
        topic_defaults: TopicDefaults,
        default_log_config: LogConfig,
        clock: Callable[[], int],
        log_dir: str,
        groups: GroupHandlers | None = None,
        scrubber: LogScrubber | None = None,
        broker_configs: BrokerConfigs | None = None,
        fetch_sessions: FetchManager | None = None,
        authorization: Authorization | None = None,
        acls: AclStore | None = None,
    ):
        self.authorization = authorization
        self.acls = AclHandlers(acls)
        self.fetch_sessions = fetch_sessions or FetchManager(
            FetchSessionCache(FetchSessionConfig())
        )
        self.data_plane = DataPlaneHandlers(
            replica_manager, metadata_cache, clock, self.fetch_sessions
        )
        self.producer_ids = ProducerIdHandlers(gateway, identity)
        self.txn_markers = TxnMarkerHandlers(replica_manager, metadata_cache, clock)
        self.controller_requests = ControllerRequestHandlers(
            replica_manager,
            metadata_cache,
            identity=identity,
            topic_configs=topic_configs,
            metadata_changes=metadata_changes,
            clock=clock,
        )
        self.log_dirs = LogDirHandlers(replica_manager, identity, log_dir, scrubber)
        self.producers = ProducerHandlers(replica_manager)
        self.topics = TopicHandlers(
            gateway,
            metadata_cache,
            metadata_changes,
            topic_defaults=topic_defaults,
            default_log_config=default_log_config,
        )
        self.metadata = MetadataHandlers(
            metadata_cache,
            identity,
            auto_create=self.topics.auto_create if topic_defaults.auto_create_topics else None,
        )
        self.configs = ConfigHandlers(gateway, lambda: topic_configs.default, broker_configs)
        self.elections = ElectionHandlers(gateway, metadata_cache, metadata_changes)
        self.reassignments = ReassignmentHandlers(gateway)
        self.users = UserHandlers(gateway)
        self.quotas = QuotaHandlers(gateway)
        self.groups = groups
        data, controller = self.data_plane, self.controller_requests
        # API key -> handler(request), for every API but Metadata and the group APIs
        # (`handle` passes those the request's context). The request is that API's
        # message: its type follows from the key.
        self._dispatch: dict[int, Callable[[Any], Awaitable[object]]] = {
            ApiKey.API_VERSIONS: self.metadata.api_versions,
            ApiKey.PRODUCE: data.produce,
            ApiKey.FETCH: data.fetch,
            ApiKey.LIST_OFFSETS: data.list_offsets,
            ApiKey.DELETE_RECORDS: data.delete_records,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: data.offset_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.producer_ids.init_producer_id,
            ApiKey.DESCRIBE_PRODUCERS: self.producers.describe_producers,
            ApiKey.WRITE_TXN_MARKERS: self.txn_markers.write_txn_markers,
            ApiKey.LEADER_AND_ISR: controller.leader_and_isr,
            ApiKey.UPDATE_METADATA: controller.update_metadata,
            ApiKey.STOP_REPLICA: controller.stop_replica,
            ApiKey.DESCRIBE_LOG_DIRS: self.log_dirs.describe_log_dirs,
            ApiKey.VERIFY_LOG_DIRS: self.log_dirs.verify_log_dirs,
            ApiKey.CREATE_TOPICS: self.topics.create_topics,
            ApiKey.DELETE_TOPICS: self.topics.delete_topics,
            ApiKey.CREATE_PARTITIONS: self.topics.create_partitions,
            ApiKey.DESCRIBE_CONFIGS: self.configs.describe_configs,
            ApiKey.ALTER_CONFIGS: self.configs.alter_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.configs.incremental_alter_configs,
            ApiKey.ELECT_LEADERS: self.elections.elect_leaders,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.reassignments.alter_partition_reassignments,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.reassignments.list_partition_reassignments,
            ApiKey.DESCRIBE_ACLS: self.acls.describe_acls,
            ApiKey.CREATE_ACLS: self.acls.create_acls,
            ApiKey.DELETE_ACLS: self.acls.delete_acls,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: self.users.describe_user_scram_credentials,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: self.users.alter_user_scram_credentials,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: self.quotas.describe_client_quotas,
            ApiKey.ALTER_CLIENT_QUOTAS: self.quotas.alter_client_quotas,
        }

    def add_handlers(self, handlers: dict[int, Callable[[Any], Awaitable[object]]]) -> None:
        """Serve more APIs (a family wired after construction: the transaction APIs)."""
        self._dispatch.update(handlers)

    async def handle(self, header: RequestHeader, request: Any, listener: str | None = None) -> Any:
        """Serve one request that arrived through `listener` (None: any/unknown), once
        the authorizer (if one is configured) let it through."""
        if self.authorization is not None:

            async def call(allowed: Any) -> Any:
                return await self._serve(header, allowed, listener)

            return await self.authorization.handle(header.api_key, request, listener, call)
        return await self._serve(header, request, listener)

    async def _serve(self, header: RequestHeader, request: Any, listener: str | None) -> Any:
        if header.api_key == ApiKey.METADATA:
            return await self.metadata.metadata(request, listener)
        if header.api_key in GROUP_APIS and self.groups is not None:
            return await self.groups.handle(header, request, listener)
        handler = self._dispatch.get(header.api_key)
        if handler is None:
            return error_answer(
                ErrorCode.UNSUPPORTED_VERSION,
                f"api {ApiKey(header.api_key).name} is not served by brokers",
            )
        return await handler(request)
