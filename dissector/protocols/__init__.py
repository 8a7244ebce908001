"""The protocols this tool dissects, each declared in one folder (see ``base.ProtocolSpec``).

``register`` adds a protocol (the built-in ones register themselves below; a test or a plug-in may add
more); the pipeline, the analysis and the renderers find them here by name, by port and by frame.
"""

from __future__ import annotations

from .base import ProtocolSpec

_PROTOCOLS: dict[str, ProtocolSpec] = {}


def register(protocol: ProtocolSpec) -> ProtocolSpec:
    _PROTOCOLS[protocol.name] = protocol
    return protocol


def unregister(name: str) -> None:
    _PROTOCOLS.pop(name, None)


def get(name: str) -> ProtocolSpec:
    return _PROTOCOLS[name]


def registered() -> list[ProtocolSpec]:
    return list(_PROTOCOLS.values())


def select(names: tuple[str, ...] = ()) -> list[ProtocolSpec]:
    """The protocols named (all registered ones when none is); an unknown name is a ValueError."""
    if not names:
        return registered()
    unknown = [n for n in names if n not in _PROTOCOLS]
    if unknown:
        raise ValueError(f"unknown protocol(s) {', '.join(unknown)}; known: {', '.join(_PROTOCOLS)}")
    return [_PROTOCOLS[n] for n in names]


from .pulsar import PULSAR  # noqa: E402  (the built-in protocols register after the registry exists)
from .tubemq import TUBEMQ  # noqa: E402

register(PULSAR)
register(TUBEMQ)
