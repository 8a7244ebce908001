"""The problem ids of TubeMQ's RPC: declared here once, with their severity and message template."""

from __future__ import annotations

from ...problems import ERROR, NOTE, WARNING, register

# -- framing and envelope
register("tubemq.too_short", ERROR, "frame of {length} bytes is too short for its 12-byte header")
register("tubemq.truncated", ERROR, "frame cut short: {captured} of its {size} bytes are in the capture")
register("tubemq.block_oversized", WARNING, "a block of {length} bytes: the reference implementations write at most "
         "{limit}")
register("tubemq.envelope_cut", ERROR, "the frame ends before its {message}")
register("tubemq.unparsable", ERROR, "{message} does not parse")
register("tubemq.bad_flag", ERROR, lambda p: f"RpcConnHeader.flag {p['flag']} is neither request (0) nor response (1)")
register("tubemq.trailing_bytes", WARNING, "{length} bytes after the frame's last message")
register("tubemq.unknown_method", WARNING, "method id {method} is not one TubeMQ declares ({length} bytes not decoded)")
register("tubemq.undecodable_method", NOTE, "method {method} ({name}) is declared by TubeMQ but has no message; "
         "its {length} bytes are not decoded")
register("tubemq.service_mismatch", WARNING, "method {method} belongs to service type {expected}, the request says "
         "{service_type}: the server refuses it")
register("tubemq.missing_required", ERROR, lambda p: f"{p['type']} lacks required fields: " + ", ".join(p["fields"]))

# -- answers
register("tubemq.exception", ERROR, lambda p: f"{p['status']}: {p['exception']}"
         + (f": {p['message']}" if p.get("message") else ""))
register("tubemq.standby_master", WARNING, lambda p: f"a standby master refused the request ({p['exception']}): "
         "the client must fail over to the active master")
register("tubemq.error_code", WARNING, lambda p: f"{p['type']} errCode {p['code']}"
         + (f" {p['name']}" if p.get("name") else "") + (f": {p['message']}" if p.get("message") else ""))
register("tubemq.consume_wait", NOTE, lambda p: f"no message to consume now: errCode {p['code']}"
         + (f" {p['name']}" if p.get("name") else ""))

# -- messages
register("tubemq.checksum_invalid", ERROR, lambda p: f"message {p['message_id']}: checksum {p['wire']} on the wire, "
         f"{p['computed']} computed (the consumer drops it without a word)")
register("tubemq.messages_truncated", NOTE, lambda p: f"{p['messages']} messages: its record lists the first "
         f"{p['kept']} (max_batch_entries), {p['more']} more are counted in messages_summary, not listed"
         + (f"; {p['unlisted_problems']} problems of those not listed (the frame's checksum verdict covers them)"
            if p.get("unlisted_problems") else ""),
         "A GetMessageResponseB2C carries more messages than the max_batch_entries option lets a record list: "
         "every message is read, checked and counted (messages_summary, the frame's checksum, stats), only the "
         "first are kept as messages. Raise it with -o max_batch_entries=N.")
register("tubemq.message_attributes", ERROR, lambda p: f"message {p['message_id']}: its flag says it starts with "
         f"attributes, but their length {p['attr_len']} does not fit its {p['data_size']} bytes (the consumer drops it)")

register("NOT_TUBEMQ", ERROR, "this direction speaks {protocol}; it is not decoded", "TLS, HTTP or SSH on a TubeMQ port")
