"""Client-side security: authenticating to a broker, pure (no I/O).

- `sasl_client`: the client's side of SASL PLAIN and SCRAM-SHA-256/512 (`SaslClient`:
  the initial response, then one answer per server challenge), and `salted_password`
  for KIP-554's AlterUserScramCredentials;
- `jaas`: Kafka's `sasl.jaas.config` values (login module, control flag, options).
"""
