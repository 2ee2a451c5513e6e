"""Security shared by the broker and controller processes: who a connection is.

- `principal`: Kafka's `KafkaPrincipal` ("User:alice"), `ANONYMOUS`, and the principal
  of the connection whose request is being served (`current_principal()`), set by the
  connection loop once the connection has authenticated;
- `acls`: ACLs (resource patterns, entries, filters) and `AclAuthorizer`, Kafka 2.8
  AclAuthorizer's decision over them (super users, deny wins, implied operations);
- `sasl`: the server side of SASL PLAIN and SCRAM-SHA-256/512, pure (`SaslServerFactory`
  makes one `SaslServer` per connection's exchange);
- `scram`: SCRAM credentials as Kafka stores them (the mechanisms, the credential string
  of /config/users/<user>, deriving keys from a salted password);
- `credential_cache`: the SCRAM credentials a broker checks logins against, kept from
  /config/users (`ScramCredentialCache`, the `ScramCredentialSource` of `sasl`).
"""
