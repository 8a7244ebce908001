"""Generated protobuf modules for the Pulsar wire protocol: the tests build frames with them and use the
official protobuf runtime as an oracle for the compiled core (which decodes without them).

``PulsarApi_pb2`` and ``PulsarMarkers_pb2`` are generated from ``proto/pulsar/`` by
``python tests/pulsar_pb/regen.py`` and committed; do not edit them by hand::

    from pulsar_pb import PulsarApi_pb2, PulsarMarkers_pb2
"""
