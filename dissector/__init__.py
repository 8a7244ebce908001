"""pulsar-dissect: Apache Pulsar wire-protocol dissector library.

The usual entry points: ``dissect_file`` (decoded frames and stream events of a capture file, in capture order),
``analysed_events`` / ``analysed_records`` (the same after the conversation analysis, as objects or as the
JSON Lines contract), and ``Dissector`` (push packets or TCP segments from any source, e.g. a live sniffer).
"""

from .pipeline import Dissector, Options, dissect_file, dissect_packets
from .run import analysed_events, analysed_records

__all__ = ["Dissector", "Options", "analysed_events", "analysed_records", "dissect_file", "dissect_packets"]
