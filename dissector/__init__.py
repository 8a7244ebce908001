"""pulsar-dissect: a wire-protocol dissector library (Apache Pulsar, and any protocol declared under
``dissector.protocols``).

The usual entry points: ``analysed_records`` (the JSON Lines contract of a capture, in capture order),
``analysed_events`` (the same as plain data: ``model.Annotated`` frames and ``model.Event`` values),
``dissect_file`` (decoded frames and events before the conversation analysis), and ``Dissector`` (push
packets, TCP segments or clock ticks from any source, e.g. a live sniffer). ``Options`` holds every setting.
"""

from .options import Options
from .pipeline import Dissector, dissect_file, dissect_packets
from .run import analysed_events, analysed_records

__all__ = ["Dissector", "Options", "analysed_events", "analysed_records", "dissect_file", "dissect_packets"]
