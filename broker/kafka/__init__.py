"""The Kafka wire protocol listener: a translation layer in front of the native handlers.

How it works: `wire.py` is the sans-IO connection (Kafka framing and request/response
headers, bodies decoded and encoded with kio). `translate.py` dispatches each decoded
request through a `Translation` (translation.py): the kio request becomes the native
`client.protocol.messages` request, the broker's own `RequestHandlers.handle` serves it
exactly as for a native client, and the native response is turned back into the kio
response of the version the client asked for. `translate.py` holds the data-plane APIs,
`translate_admin.py` and `translate_groups.py` the admin and group APIs; `versions.py`
merges their version ranges into what ApiVersions advertises.
"""
