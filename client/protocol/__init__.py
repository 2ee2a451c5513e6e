"""The wire protocol and record format shared by brokers, controllers and clients.

Sans-IO: nothing here touches sockets or trio. Framing is a 4-byte big-endian length
followed by a msgpack body; record batches travel inside Produce/Fetch as opaque bytes.
"""
