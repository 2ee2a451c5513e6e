"""Security shared by the broker and controller processes: who a connection is.

- `principal`: Kafka's `KafkaPrincipal` ("User:alice"), `ANONYMOUS`, and the principal
  of the connection whose request is being served (`current_principal()`), set by the
  connection loop once the connection has authenticated;
- `acls`: ACLs (resource patterns, entries, filters) and `AclAuthorizer`, Kafka 2.8
  AclAuthorizer's decision over them (super users, deny wins, implied operations).
"""
