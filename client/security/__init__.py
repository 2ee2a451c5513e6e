"""Client-side security: authenticating to a broker.

- `sasl_client`: the client's side of SASL PLAIN and SCRAM-SHA-256/512 (`SaslClient`:
  the initial response, then one answer per server challenge), and `salted_password`
  for KIP-554's AlterUserScramCredentials;
- `jaas`: Kafka's `sasl.jaas.config` values (login module, control flag, options);
- `secure_connector`: the client's security options (`SecurityConfig`, also from Kafka
  client properties) and the connector that does TLS and the native SASL exchange on
  every connection it opens (the one module here that does I/O).
"""
