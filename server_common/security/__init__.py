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
  /config/users (`ScramCredentialCache`, the `ScramCredentialSource` of `sasl`);
- `user_credentials`: reading /config/users from ZooKeeper into that cache, at start and
  on every change (`UserCredentials`, for brokers and the controller).

Listener security (the transport):
- `listener_config`: each listener's security protocol, TLS files and SASL settings
  (`listener.security.protocol.map`, ssl.*, sasl.*, with `listener.name.<l>.` prefixes);
- `tls`: SSL contexts from PEM files, the server-side TLS handshake, a client
  certificate's principal (RFC 2253 subject);
- `authenticator`: one connection's SASL exchange as a pure state machine (what may be
  served before authentication, the handshake, the tokens, failures);
- `sasl_gate`: its Trio shell, wrapping a connection's request handler (both wires).
"""
