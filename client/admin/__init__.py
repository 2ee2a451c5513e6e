"""The admin client: topics, cluster description, leader elections, reassignments, log
dirs, offsets, record deletion, consumer groups and their offsets.

How it works: `async with open_admin("host:port") as admin:` builds an `Admin`, one
object whose methods come from one mixin per family of requests, over a shared base
that keeps a `Metadata` of the whole cluster and routes requests. Describing is reading
that metadata fresh. Changing is one request to any live broker (the broker that gets it
writes ZooKeeper, as Kafka 2.x's did), tried on the next broker if the connection fails;
log dir requests go to every broker at once, offsets and record deletion to each
partition's leader (retried after a metadata refresh while leaders move), group
requests to the group's coordinator (looked up again while it moves or loads). Results
are per item: each topic, partition or group maps to None (success) or a
`TributaryError`; single-item helpers raise it.

The modules:
- `client.py`: `Admin` (the mixins combined) and `open_admin`;
- `base.py`: `AdminBase`: the metadata, the connection pool, `_request_any` (any broker,
  next one on a connection failure), per-item error values;
- `topics.py`: `TopicAdmin`: create, grow (CreatePartitions), delete, list and describe
  topics; describe and alter their configs;
- `configs.py`: `ConfigAdmin`: topic and broker configs (per broker, or the cluster
  defaults) described with sources and synonyms, altered incrementally or replaced;
- `brokers.py`: `BrokerAdmin`: `describe_cluster`, DescribeLogDirs and VerifyLogDirs to
  each broker;
- `replicas.py`: `ReplicaAdmin`: preferred leader elections, partition reassignments;
- `offsets.py`: `OffsetAdmin`: ListOffsets and DeleteRecords to partition leaders;
- `groups.py`: `GroupAdmin`: list, describe and delete consumer groups, read and alter
  their committed offsets;
- `acls.py`: `AclAdmin`: create, describe and delete ACLs (`Acl`, `AclFilter`);
- `users.py`: `UserAdmin`: users' SCRAM credentials (KIP-554), described and altered
  (the password is salted here; only the salted password is sent), with their values;
- `transactions.py`: `TransactionAdmin`: list transactions (every broker) and describe
  one (its coordinator), KIP-664, with their values (`TransactionListing`,
  `TransactionDescription`);
- `quotas.py`: `QuotaAdmin`: client quotas (KIP-546) of users, client-ids and both,
  described and altered;
- `results.py`: the values taken and returned (`NewTopic`, `TopicDescription`,
  `GroupDescription`...) and `GroupOffsetsError`.
"""

from client.admin.acls import Acl, AclFilter
from client.admin.base import DEFAULT_ADMIN_TIMEOUT_MS
from client.admin.client import Admin, open_admin
from client.admin.results import (
    ClusterDescription,
    ConfigEntry,
    GroupDescription,
    GroupListing,
    GroupOffsetsError,
    LogDirDescription,
    MemberDescription,
    NewTopic,
    PartitionDescription,
    Reassignment,
    ReplicaLogInfo,
    TopicDescription,
)
from client.admin.users import (
    ScramCredentialInfo,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

__all__ = [
    "DEFAULT_ADMIN_TIMEOUT_MS",
    "Acl",
    "AclFilter",
    "Admin",
    "ClusterDescription",
    "ConfigEntry",
    "GroupDescription",
    "GroupListing",
    "GroupOffsetsError",
    "LogDirDescription",
    "MemberDescription",
    "NewTopic",
    "PartitionDescription",
    "Reassignment",
    "ReplicaLogInfo",
    "TopicDescription",
    "ScramCredentialInfo",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "open_admin",
]
