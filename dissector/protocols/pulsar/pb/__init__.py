"""Generated protobuf modules for the Pulsar wire protocol.

``PulsarApi_pb2`` and ``PulsarMarkers_pb2`` are generated from ``proto/pulsar/`` by
``python -m dissector.protocols.pulsar.pb.regen`` and committed; do not edit them by hand.
They need only the ``protobuf`` runtime::

    from dissector.protocols.pulsar.pb import PulsarApi_pb2, PulsarMarkers_pb2
"""
