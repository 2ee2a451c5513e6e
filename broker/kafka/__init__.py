"""The Kafka wire protocol listener: a translation layer in front of the native handlers.

How it works: a listener mapped to `kafka` in `listener.wire.protocol.map` runs the same
connection loop as a native one with another sans-IO connection and another request
handler. The kio request becomes the native `client.protocol.messages` request, the
broker's own `RequestHandlers.handle` (broker/handlers/) serves it exactly as for a
native client, and the native response is turned back into the kio response of the
version the client asked for.

- `wire.py`: the sans-IO connection: Kafka framing and request/response headers, bodies
  decoded and encoded with kio, for the versions `versions.py` advertises;
- `bounds.py`: checks every count and length of a request body against the bytes left
  before kio's native reader (which preallocates from counts) sees it;
- `dispatcher.py`: `KafkaDispatcher`, the connection's request handler: each request
  through its translation to the native handlers and back, errors answered per API;
- `translation.py`: what one API's `Translation` is, and the helpers every translation
  shares;
- `translate_data.py`: the data-plane APIs (Metadata, Produce, Fetch, ListOffsets,
  OffsetForLeaderEpoch, InitProducerId); `translate_admin.py`: the topic admin APIs;
  `translate_configs.py`: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs;
  `translate_replicas.py`: the cluster and replica admin APIs (DescribeCluster,
  ElectLeaders, partition reassignments, DescribeLogDirs, DescribeProducers);
  `translate_groups.py`: the group APIs; `translate_acls.py`: DescribeAcls, CreateAcls,
  DeleteAcls; `translate_sasl.py`: SaslHandshake and SaslAuthenticate, for the
  connection's SASL gate; `translate_users.py`: users' SCRAM credentials
  (DescribeUserScramCredentials, AlterUserScramCredentials); `translate_txn.py`: the
  transaction APIs (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
  Describe/ListTransactions); `translate_txn_markers.py`: WriteTxnMarkers (the
  transaction coordinator's markers); `translate_quotas.py`: client quotas
  (DescribeClientQuotas, AlterClientQuotas);
- `versions.py`: merges the translate modules' tables, with ApiVersions, into what
  ApiVersions advertises and the decoder accepts.

Imports go one way: dispatcher -> versions -> translate_* -> translation; wire -> bounds.
"""
