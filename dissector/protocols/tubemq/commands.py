"""The one command table of TubeMQ's RPC.

A TubeMQ frame's type is the message its method carries (``RegisterRequestP2M``, ``SendMessageResponseB2P``):
per method of the compiled core's method table (``crates/engine/src/protocols/tubemq/mod.rs``, the one place the method ids and
their messages are written) a request, sent by the connection's client, and its response, sent by the
server, which answers it under the frame's serial number. An exception (``RspExceptionBody``) answers any
request. Methods upstream declares but never encodes, and ids nobody declares, are types too, so that their
answers still pair.
"""

from __future__ import annotations

from dissector import _core as _core

from ..base import CommandSpec, CommandTable, Key, Space

CLIENT, MASTER, BROKER, ANY = "client", "master", "broker", "any"

# (id, constant, service, request message, response message): the core's table
METHODS: tuple[tuple[int, str, str, str | None, str | None], ...] = tuple(_core.tables("tubemq")["methods"])

# A response echoes its request's serial number: requests wait under it, a serial seen twice while the
# first waits is a duplicate, a response with no request waiting under its serial is unmatched.
SERIAL = Space("serial", duplicates=True, unmatched=True)
BY_SERIAL = Key(SERIAL, ("@serial",))

EXCEPTION = "RspExceptionBody"
UNKNOWN_REQUEST, UNKNOWN_RESPONSE = "UNKNOWN_REQUEST", "UNKNOWN_RESPONSE"

_CLIENT_ID, _GROUP = ("client", "clientId"), ("group", "groupName")
_TOPIC, _PARTITION = ("topic", "topicName"), ("part", "partitionId")
_ERR = ("err", "errCode")

# The fields a type's timeline line shows; a type not listed shows its first five scalar fields.
TIMELINE: dict[str, tuple[tuple[str, str], ...]] = {
    "RegisterRequestP2M": (_CLIENT_ID, ("topics", "topicList"), ("host", "hostName")),
    "HeartRequestP2M": (_CLIENT_ID, ("topics", "topicList")),
    "CloseRequestP2M": (_CLIENT_ID,),
    "RegisterRequestC2M": (_CLIENT_ID, _GROUP, ("topics", "topicList")),
    "HeartRequestC2M": (_CLIENT_ID, _GROUP, ("event", "event.opType_name")),
    "HeartResponseM2C": (_ERR, ("event", "event.opType_name"), ("rebalance", "event.rebalanceId")),
    "CloseRequestC2M": (_CLIENT_ID, _GROUP),
    "RegisterRequestB2M": (_CLIENT_ID,),
    "HeartRequestB2M": (("broker", "brokerId"),),
    "CloseRequestB2M": (("broker", "brokerId"),),
    "SendMessageRequestP2B": (_CLIENT_ID, _TOPIC, _PARTITION),
    "SendMessageResponseB2P": (_ERR, ("msg_id", "messageId"), ("offset", "appendOffset")),
    "RegisterRequestC2B": (("op", "opType"), _CLIENT_ID, _GROUP, _TOPIC, _PARTITION),
    "HeartBeatRequestC2B": (_CLIENT_ID, _GROUP),
    "GetMessageRequestC2B": (_CLIENT_ID, _GROUP, _TOPIC, _PARTITION),
    "GetMessageResponseB2C": (_ERR, ("offset", "currOffset"), ("max", "maxOffset")),
    "CommitOffsetRequestC2B": (_CLIENT_ID, _GROUP, _TOPIC, _PARTITION),
    "CommitOffsetResponseB2C": (_ERR, ("offset", "currOffset")),
    "RegisterRequestC2MV2": (_CLIENT_ID, _GROUP, ("topics", "topicList")),
    "HeartRequestC2MV2": (_CLIENT_ID, _GROUP),
    EXCEPTION: (("exception", "exceptionName"),),
}
_RESPONSE_TIMELINE = (_ERR, ("msg", "errMsg"))

# request fields a response's analysis learns from the request it answers
REMEMBER = ("clientId", "groupName", "topicName", "partitionId")


def _server(service: str) -> str:
    return MASTER if service == "master" else BROKER


def _specs() -> list[CommandSpec]:
    specs: list[CommandSpec] = []
    for method, constant, service, request, response in METHODS:
        request = request or f"{constant}_REQUEST"
        response = response or f"{constant}_RESPONSE"
        specs.append(CommandSpec(request, method, CLIENT, TIMELINE.get(request, ()), opens=BY_SERIAL,
                                 remember=REMEMBER))
        specs.append(CommandSpec(response, 1000 + method, _server(service),
                                 TIMELINE.get(response, _RESPONSE_TIMELINE), answers=(BY_SERIAL,),
                                 answer_types=frozenset((request,))))
    specs.append(CommandSpec(UNKNOWN_REQUEST, -1, CLIENT, opens=BY_SERIAL))
    specs.append(CommandSpec(UNKNOWN_RESPONSE, -2, ANY, answers=(BY_SERIAL,),
                             answer_types=frozenset((UNKNOWN_REQUEST,))))
    specs.append(CommandSpec(EXCEPTION, -3, ANY, TIMELINE[EXCEPTION], answers=(BY_SERIAL,)))
    return specs


COMMANDS = CommandTable(_specs())
