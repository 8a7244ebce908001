"""Generated protobuf modules for the Pulsar wire protocol.

``PulsarApi_pb2`` and ``PulsarMarkers_pb2`` are generated from ``proto/`` by
``python -m dissector.pb.regen`` and committed; do not edit them by hand.
They need only the ``protobuf`` runtime::

    from dissector.pb import PulsarApi_pb2, PulsarMarkers_pb2
"""
