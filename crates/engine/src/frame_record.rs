//! A frame's record written to a sink ([`build_record`]): the contract's keys in their order (as
//! `records.rs` lists them), the body's keys by the protocol whose body it is (through the registry), then
//! the analysis' notes. Above the protocols, which write their keys with `records.rs`'s sinks.

use crate::analysis::Frame;
use crate::name;
use crate::protocols;
use crate::records::{map_get_slice, own, Atom, Expert, Front, Key, Merged, RecordSink, RecordStyle, SinkResult};
use crate::value::{Map, Value};

/// The front end's strings of a frame's protocol, src, dst and direction, for its own sink.
pub type RouteObjects<'a, F> = [&'a <F as Front>::Str; 4];

/// A frame and what the record adds to it.
pub struct RecordInput<'a, F: Front> {
    pub frame: &'a Frame<'a>,
    /// None where the front end made none (the engine's sinks need none).
    pub route: Option<RouteObjects<'a, F>>,
    /// The packet of the frame's first byte.
    pub first_packet: i64,
    /// The decoder's then the analysis' findings.
    pub expert: &'a [Expert<F>],
    /// A Python-declared protocol's own keys (`ProtocolSpec.record_fields`).
    pub protocol_keys: Option<&'a Map>,
    pub notes: &'a Map,
    /// The frame's bytes (`Options.keep_frame_bytes`).
    pub data: Option<&'a F::Bytes>,
}

/// Write a frame's record to `sink`. Returns the number of its problems (what --strict counts).
pub fn build_record<F: Front>(
    sink: &mut impl RecordSink<F>,
    input: &RecordInput<'_, F>,
    style: RecordStyle,
) -> SinkResult<usize> {
    let (frame, pdu) = (input.frame, input.frame.pdu);
    let mut merged = Merged::new(input.protocol_keys, input.notes);
    sink.open(Key::Item, false)?;
    own!(merged, sink, "index", |key| sink.put(key, Atom::Value(&Value::from(frame.index))));
    own!(merged, sink, "protocol", |key| sink.put(key, Atom::Str(frame.protocol, input.route.map(|r| r[0]))));
    own!(merged, sink, "time", |key| sink.put(key, Atom::Value(&Value::Float(frame.time))));
    own!(merged, sink, "conn", |key| sink.put(key, Atom::Value(&Value::from(frame.conn))));
    own!(merged, sink, "src", |key| sink.put(key, Atom::Str(frame.src, input.route.map(|r| r[1]))));
    own!(merged, sink, "dst", |key| sink.put(key, Atom::Str(frame.dst, input.route.map(|r| r[2]))));
    own!(merged, sink, "direction", |key| sink.put(key, Atom::Str(frame.direction, input.route.map(|r| r[3]))));
    own!(merged, sink, "packet", |key| sink.put(key, Atom::Value(&Value::from(frame.packet))));
    own!(merged, sink, "type", |key| sink.put(key, Atom::Text(&pdu.type_name)));
    own!(merged, sink, "command", |key| match &pdu.command {
        Some(command) => sink.put(key, Atom::Value(command)),
        None => sink.put(key, Atom::EmptyMap),
    });
    own!(merged, sink, "size", |key| sink.put(key, Atom::Value(&Value::from(pdu.size))));
    let note = name!("note");
    let mut problems = input.expert.iter().filter(|e| e.severity != note).count();
    match merged.replaced(sink, name!("problems"))? {
        true => {
            problems = merged
                .layers
                .iter()
                .rev()
                .find_map(|l| map_get_slice(l, "problems"))
                .and_then(Value::as_list)
                .map_or(0, <[Value]>::len)
        }
        false => {
            sink.open(Key::Name(name!("problems")), true)?;
            for e in input.expert.iter().filter(|e| e.severity != note) {
                sink.put(Key::Item, e.message.atom()?)?;
            }
            sink.close()?;
        }
    }
    if !input.expert.is_empty() {
        own!(merged, sink, "expert", |key| -> SinkResult<()> {
            sink.open(key, true)?;
            for e in input.expert {
                sink.open(Key::Item, false)?;
                sink.put(Key::Name(name!("id")), Atom::Name(e.id))?;
                sink.put(Key::Name(name!("severity")), Atom::Name(e.severity))?;
                sink.put(Key::Name(name!("message")), e.message.atom()?)?;
                sink.close()?;
            }
            sink.close()
        });
    }
    if u64::try_from(input.first_packet).ok() != Some(frame.packet) {
        own!(merged, sink, "first_packet", |key| sink.put(key, Atom::Value(&Value::Int(input.first_packet))));
    }
    if let Some(body) = &pdu.body {
        protocols::write_body_keys(sink, &mut merged, pdu, body.as_ref(), style)?;
    }
    merged.rest(sink)?;
    if let Some(data) = input.data {
        sink.put(Key::Name(name!("frame_bytes")), Atom::Bytes(data))?;
    }
    sink.close()?;
    Ok(problems)
}
