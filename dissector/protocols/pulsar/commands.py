"""The one command table of the Pulsar protocol.

Per BaseCommand type: its wire number and sub-command field (from the schema), the role that sends it, what
answers it and under which key (request_id, producer and sequence id, the connection's handshake, a PING's
direction), which producer or consumer it is about, and the fields its timeline line shows. Every other
module reads Pulsar's commands from here.
"""

from __future__ import annotations

from dissector import _core as _core

from ..base import CommandSpec, CommandTable, Key, Space

# The names and numbers come from the schema the compiled core embeds (proto/pulsar/PulsarApi.proto).
TYPE_NAMES: dict[int, str] = dict(sorted(_core.tables("pulsar")["command_types"]))
TYPE_NUMBERS: dict[str, int] = {name: num for num, name in TYPE_NAMES.items()}
SEND, MESSAGE = TYPE_NUMBERS["SEND"], TYPE_NUMBERS["MESSAGE"]
PAYLOAD_TYPES = frozenset((SEND, MESSAGE))

CLIENT, BROKER, ANY = "client", "broker", "any"

# Where requests wait for their answers.
REQUEST = Space("request", duplicates=True, unmatched=True)  # by request_id
PUBLISH = Space("send", unmatched=True)  # SENDs by (producer_id, sequence_id); chunks of a message share one
HANDSHAKE = Space("handshake", slot=True)  # CONNECT or AUTH_RESPONSE awaiting CONNECTED / AUTH_CHALLENGE
CHALLENGE = Space("challenge", slot=True, unanswered=False, opened_by="server")  # AUTH_CHALLENGE awaiting AUTH_RESPONSE
KEEPALIVE = Space("ping", slot=True, opened_by="any")  # a PING from either side awaiting the other's PONG

BY_REQUEST_ID = Key(REQUEST, ("request_id",))
BY_SEQUENCE = Key(PUBLISH, ("producer_id", "sequence_id"))

_REQ = ("req", "request_id")
_PROD, _CONS = ("prod", "producer_id"), ("cons", "consumer_id")
_PRODUCER = {"scope": "producer", "scope_id": "producer_id"}
_CONSUMER = {"scope": "consumer", "scope_id": "consumer_id"}


# A timeline of () shows the command's first five scalar fields.
def _request(name: str, sender: str = CLIENT, timeline=(), **kw) -> CommandSpec:
    return CommandSpec(name, TYPE_NUMBERS[name], sender, timeline, opens=BY_REQUEST_ID, **kw)


def _response(name: str, answers: tuple[str, ...] | None, timeline=(), **kw) -> CommandSpec:
    return CommandSpec(name, TYPE_NUMBERS[name], BROKER, timeline, answers=(BY_REQUEST_ID,),
                       answer_types=frozenset(answers) if answers is not None else None, **kw)


def _lookup_pair(request: str, response: str, request_timeline=(), response_timeline=(), **kw) -> list[CommandSpec]:
    return [_request(request, timeline=request_timeline, **kw),
            _response(response, (request,), timeline=response_timeline)]


_SPECS = [
    # -- connection
    CommandSpec("CONNECT", TYPE_NUMBERS["CONNECT"], CLIENT,
                (("client", "client_version"), ("proto", "protocol_version"), ("auth", "auth_method_name"),
                 ("proxy_to", "proxy_to_broker_url")), opens=Key(HANDSHAKE)),
    CommandSpec("CONNECTED", TYPE_NUMBERS["CONNECTED"], BROKER,
                (("server", "server_version"), ("proto", "protocol_version"), ("max_msg", "max_message_size")),
                answers=(Key(HANDSHAKE),)),
    CommandSpec("AUTH_CHALLENGE", TYPE_NUMBERS["AUTH_CHALLENGE"], BROKER, answers=(Key(HANDSHAKE),),
                opens=Key(CHALLENGE)),
    CommandSpec("AUTH_RESPONSE", TYPE_NUMBERS["AUTH_RESPONSE"], CLIENT, answers=(Key(CHALLENGE),),
                opens=Key(HANDSHAKE)),
    CommandSpec("PING", TYPE_NUMBERS["PING"], ANY, opens=Key(KEEPALIVE, ("@direction",))),
    CommandSpec("PONG", TYPE_NUMBERS["PONG"], ANY, answers=(Key(KEEPALIVE, ("@reverse",)),)),
    CommandSpec("ERROR", TYPE_NUMBERS["ERROR"], BROKER, (_REQ, ("error", "error"), ("msg", "message")),
                answers=(BY_REQUEST_ID, Key(HANDSHAKE))),
    CommandSpec("SUCCESS", TYPE_NUMBERS["SUCCESS"], BROKER, (_REQ,), answers=(BY_REQUEST_ID,),
                answer_types=frozenset(("SUBSCRIBE", "UNSUBSCRIBE", "CLOSE_PRODUCER", "CLOSE_CONSUMER", "SEEK",
                                        "WATCH_TOPIC_LIST_CLOSE"))),
    # -- producers
    _request("PRODUCER", timeline=(_REQ, _PROD, ("name", "producer_name"), ("topic", "topic"),
                                   ("mode", "producer_access_mode"), ("schema", "schema.type")),
             remember=("producer_id",), creates="producer"),
    _response("PRODUCER_SUCCESS", ("PRODUCER",), (_REQ, ("name", "producer_name"), ("last_seq", "last_sequence_id"),
                                                  ("ready", "producer_ready")),
              interim=("producer_ready", False), **_PRODUCER),
    CommandSpec("SEND", SEND, CLIENT, (_PROD, ("seq", "sequence_id"), ("n", "num_messages"), ("chunk", "is_chunk")),
                opens=BY_SEQUENCE, **_PRODUCER),
    CommandSpec("SEND_RECEIPT", TYPE_NUMBERS["SEND_RECEIPT"], BROKER,
                (_PROD, ("seq", "sequence_id"), ("id", "message_id"), ("highest_seq", "highest_sequence_id")),
                answers=(BY_SEQUENCE,), **_PRODUCER),
    CommandSpec("SEND_ERROR", TYPE_NUMBERS["SEND_ERROR"], BROKER,
                (_PROD, ("seq", "sequence_id"), ("error", "error"), ("msg", "message")),
                answers=(BY_SEQUENCE,), **_PRODUCER),
    _request("CLOSE_PRODUCER", ANY, (_REQ, _PROD), **_PRODUCER),
    # -- consumers
    _request("SUBSCRIBE", timeline=(_REQ, _CONS, ("topic", "topic"), ("sub", "subscription"), ("type", "subType"),
                                    ("name", "consumer_name"), ("initial", "initialPosition"),
                                    ("start", "start_message_id"), ("durable", "durable"), ("schema", "schema.type")),
             remember=("consumer_id",), creates="consumer"),  # its SUCCESS: an Exclusive consumer holds it
    _request("UNSUBSCRIBE", remember=("consumer_id",), **_CONSUMER),  # its SUCCESS closes the consumer
    _request("CLOSE_CONSUMER", ANY, (_REQ, _CONS), **_CONSUMER),
    _request("SEEK", timeline=(_REQ, _CONS, ("id", "message_id"), ("time", "message_publish_time", "date_ms")),
             **_CONSUMER),
    CommandSpec("FLOW", TYPE_NUMBERS["FLOW"], CLIENT, (_CONS, ("permits", "messagePermits")), **_CONSUMER),
    CommandSpec("MESSAGE", MESSAGE, BROKER, (_CONS, ("id", "message_id"), ("redelivery", "redelivery_count")),
                **_CONSUMER),
    _request("ACK", timeline=(_CONS, ("type", "ack_type"), ("ids", "message_id"), _REQ), **_CONSUMER),
    _response("ACK_RESPONSE", ("ACK",), **_CONSUMER),
    CommandSpec("REDELIVER_UNACKNOWLEDGED_MESSAGES", TYPE_NUMBERS["REDELIVER_UNACKNOWLEDGED_MESSAGES"], CLIENT,
                (_CONS, ("ids", "message_ids")), **_CONSUMER),
    CommandSpec("REACHED_END_OF_TOPIC", TYPE_NUMBERS["REACHED_END_OF_TOPIC"], BROKER, **_CONSUMER),
    CommandSpec("ACTIVE_CONSUMER_CHANGE", TYPE_NUMBERS["ACTIVE_CONSUMER_CHANGE"], BROKER, **_CONSUMER),
    *_lookup_pair("CONSUMER_STATS", "CONSUMER_STATS_RESPONSE", **_CONSUMER),
    *_lookup_pair("GET_LAST_MESSAGE_ID", "GET_LAST_MESSAGE_ID_RESPONSE", (_REQ, _CONS),
                  (_REQ, ("id", "last_message_id"), ("mark_delete", "consumer_mark_delete_position")), **_CONSUMER),
    # -- lookups and schemas
    _request("LOOKUP", timeline=(_REQ, ("topic", "topic"), ("authoritative", "authoritative")), remember=("topic",)),
    _response("LOOKUP_RESPONSE", ("LOOKUP",), (_REQ, ("response", "response"), ("url", "brokerServiceUrl"),
                                               ("authoritative", "authoritative"), ("error", "error"),
                                               ("msg", "message"))),
    *_lookup_pair("PARTITIONED_METADATA", "PARTITIONED_METADATA_RESPONSE", (_REQ, ("topic", "topic")),
                  (_REQ, ("partitions", "partitions"), ("response", "response"), ("error", "error"))),
    *_lookup_pair("GET_TOPICS_OF_NAMESPACE", "GET_TOPICS_OF_NAMESPACE_RESPONSE"),
    *_lookup_pair("GET_SCHEMA", "GET_SCHEMA_RESPONSE", (_REQ, ("topic", "topic"), ("version", "schema_version")),
                  (_REQ, ("schema", "schema.type"), ("name", "schema.name"), ("error", "error_code"),
                   ("msg", "error_message"))),
    *_lookup_pair("GET_OR_CREATE_SCHEMA", "GET_OR_CREATE_SCHEMA_RESPONSE"),
    CommandSpec("TOPIC_MIGRATED", TYPE_NUMBERS["TOPIC_MIGRATED"], BROKER),
]
# Transactions, topic-list watches and scalable topics: a request and its response, sent by either side as far
# as this tool knows (the sides are told apart by the commands above).
for _req, _resp in (("NEW_TXN", "NEW_TXN_RESPONSE"), ("ADD_PARTITION_TO_TXN", "ADD_PARTITION_TO_TXN_RESPONSE"),
                    ("ADD_SUBSCRIPTION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN_RESPONSE"), ("END_TXN", "END_TXN_RESPONSE"),
                    ("END_TXN_ON_PARTITION", "END_TXN_ON_PARTITION_RESPONSE"),
                    ("END_TXN_ON_SUBSCRIPTION", "END_TXN_ON_SUBSCRIPTION_RESPONSE"),
                    ("TC_CLIENT_CONNECT_REQUEST", "TC_CLIENT_CONNECT_RESPONSE"),
                    ("WATCH_TOPIC_LIST", "WATCH_TOPIC_LIST_SUCCESS"),
                    ("SCALABLE_TOPIC_SUBSCRIBE", "SCALABLE_TOPIC_SUBSCRIBE_RESPONSE")):
    if _req in TYPE_NUMBERS and _resp in TYPE_NUMBERS:
        _SPECS.append(_request(_req, ANY))
        _SPECS.append(CommandSpec(_resp, TYPE_NUMBERS[_resp], ANY, answers=(BY_REQUEST_ID,),
                                  answer_types=frozenset((_req,))))
if "WATCH_TOPIC_LIST_CLOSE" in TYPE_NUMBERS:
    _SPECS.append(_request("WATCH_TOPIC_LIST_CLOSE", ANY))
# Every other type of the schema: known by name, sent by either side, paired with nothing.
_declared = {s.name for s in _SPECS}
_SPECS += [CommandSpec(name, number, ANY) for number, name in sorted(TYPE_NAMES.items()) if name not in _declared]

COMMANDS = CommandTable(_SPECS)
