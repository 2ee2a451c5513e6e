"""The broker's side of ZooKeeper: every read and write, and what it keeps in step.

- `gateway.py`: `BrokerZkGateway`, every ZooKeeper read and write a broker makes, in the
  broker's terms (register, write an ISR, create a topic, claim producer ids...): nothing
  else in the broker knows a znode path;
- `registration.py`: `BrokerIdentity` (broker id, cluster id, broker epoch) and
  `Registration`, which keeps /brokers/ids/<id> alive across ZooKeeper sessions;
- `topic_configs.py`: `TopicConfigs`, the broker defaults plus each topic's overrides
  from /config/topics, kept up to date from /config/changes;
- `broker_configs.py`: `BrokerConfigs`, this broker's dynamic configs from
  /config/brokers/<id> and /config/brokers/<default>, applied live when they change;
- `quota_configs.py`: `QuotaConfigStore`, the client quotas of /config/users and
  /config/clients loaded into the quota managers' configs and kept up to date;
- `acls.py`: `AclStore`, the ACLs of /kafka-acl and /kafka-acl-extended loaded into the
  authorizer and kept up to date from their change notifications, and the conditional
  writes of CreateAcls/DeleteAcls;
- `controlled_shutdown.py`: leaving the cluster: finds the active controller in
  /controller and asks it to move this broker's leaderships away before it stops.
"""
