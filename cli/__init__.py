"""pulsar-dissect command-line interface."""
