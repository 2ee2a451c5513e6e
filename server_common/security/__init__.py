"""Security shared by the broker and controller processes: who a connection is.

- `principal`: Kafka's `KafkaPrincipal` ("User:alice"), `ANONYMOUS`, and the principal
  of the connection whose request is being served (`current_principal()`), set by the
  connection loop once the connection has authenticated.
"""
