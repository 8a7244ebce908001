"""pulsar-dissect: Apache Pulsar wire-protocol dissector library."""
