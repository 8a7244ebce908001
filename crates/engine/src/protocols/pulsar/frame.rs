//! One Pulsar frame → [`Decoded`]: sizes, the BaseCommand and its sub-command, and for SEND and
//! MESSAGE the payload section. A pure function of the bytes (and of the decompression limit).

use super::problems::PulsarProblem;
use super::Core;
use crate::model::{Decoded, Finding};
use crate::pb::{self, read_varint, Parsed};
use crate::protocols::protocol::{DecodeCaps, Depth};
use crate::protocols::pulsar::payload;
use crate::schema::Kind;
use crate::value::{Text, Value};
use crate::{finding, name};

/// The command type's name, `UNKNOWN(n)` for a number the schema does not know, `MALFORMED` without one.
fn type_name(core: &Core, number: Option<u64>) -> Text {
    match number {
        None => Text::Name(name!("MALFORMED")),
        Some(n) => match i32::try_from(n).ok().and_then(|n| core.command_types.name(n)) {
            Some(name) => Text::Name(name),
            None => Text::Owned(format!("UNKNOWN({n})")),
        },
    }
}

/// BaseCommand.type (field 1, varint) straight from the wire: the runtime would read an unknown type as
/// CONNECT. Encoders write it first, so the fast path is one tag byte and a short varint.
fn peek_command_type(buf: &[u8]) -> Option<u64> {
    let mut pos = 0;
    if buf.first() == Some(&0x08) {
        pos = 1;
        return read_varint(buf, &mut pos).ok();
    }
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos).ok()?;
        let (number, wt) = (key >> 3, key & 7);
        if number == 0 {
            return None;
        }
        match wt {
            0 => {
                let v = read_varint(buf, &mut pos).ok()?;
                if number == 1 {
                    return Some(v);
                }
            }
            1 => pos = pos.checked_add(8).filter(|&p| p <= buf.len())?,
            2 => {
                let len = read_varint(buf, &mut pos).ok()? as usize;
                pos = pos.checked_add(len).filter(|&p| p <= buf.len())?;
            }
            5 => pos = pos.checked_add(4).filter(|&p| p <= buf.len())?,
            _ => return None,
        }
    }
    None
}

pub fn decode(core: &Core, frame: &[u8], missing: usize, caps: DecodeCaps, depth: Depth) -> Decoded {
    let size = frame.len() + missing;
    let mut findings = Vec::new();
    let malformed =
        |findings| Decoded { type_name: Text::Name(name!("MALFORMED")), command: None, size, findings, body: None };
    let (Some(total), Some(cmd_size)) = (u32_at(frame, 0), u32_at(frame, 4)) else {
        findings.push(finding!(PulsarProblem::FrameTooShort, "length" => frame.len()));
        return malformed(findings);
    };
    let (total, cmd_size) = (total as usize, cmd_size as usize);
    if total + 4 != size {
        findings.push(finding!(PulsarProblem::FrameSizeMismatch, "total_size" => total, "following" => size - 4));
    }
    let cmd_end = 8 + cmd_size;
    if cmd_size + 4 > total {
        findings.push(finding!(PulsarProblem::FrameCmdSize, "cmd_size" => cmd_size, "total_size" => total));
    }
    if cmd_end > frame.len() {
        findings.push(finding!(PulsarProblem::FrameTruncated));
        if missing > 0 && cmd_size + 4 <= total {
            // The wire carried the frame whole and the capture lost its end inside the command: the fields that
            // arrived whole (the type, then the ids, written first) still say what it was, e.g. so that the SEND
            // of a middle chunk keeps its place among the SENDs waiting for receipts under one sequence id.
            if let Some((type_name, command)) = command_prefix(core, &frame[8..]) {
                return Decoded { type_name, command: Some(command), size, findings, body: None };
            }
        }
        return malformed(findings);
    }
    let cmd_bytes = &frame[8..cmd_end];
    let type_num = peek_command_type(cmd_bytes);
    let schema = core.schema;
    let name = type_name(core, type_num);
    let base = match pb::parse_limited(schema, core.base_command, cmd_bytes, caps.max_repeated_elements) {
        Ok(base) => base,
        Err(_) => {
            let error = format!("Error parsing message with type '{}'", schema.messages[core.base_command].full_name);
            findings.push(finding!(PulsarProblem::CommandUnparsable, "error" => error));
            return Decoded { type_name: name, command: None, size, findings, body: None };
        }
    };
    if base.elided > 0 {
        findings.push(finding!(crate::problems::GenericProblem::ProtobufRepeatedElided, "message" => name.clone(),
            "elided" => base.elided, "kept" => caps.max_repeated_elements));
    }
    let mut command: Option<&Parsed> = None;
    let known = type_num.and_then(|n| i32::try_from(n).ok()).filter(|&n| core.command_types.contains(n));
    match (type_num, known) {
        (None, _) => findings.push(finding!(PulsarProblem::CommandNoType)),
        (Some(n), None) => findings.push(finding!(PulsarProblem::CommandUnknownType, "number" => n)),
        (Some(n), Some(_)) => {
            let field = schema.messages[core.base_command]
                .field(n as u32)
                .map(|f| &schema.messages[core.base_command].fields[f]);
            match base.message(schema, n as u32) {
                Some(sub) if field.is_some() => {
                    command = Some(sub);
                    let errors = sub.init_errors(schema);
                    if !errors.is_empty() {
                        required_problems(core, sub, &name, errors, &mut findings);
                    }
                }
                _ => {
                    let field_name = field.map_or(Text::Name(name!("sub-command")), |f| Text::Name(&f.name));
                    findings.push(finding!(PulsarProblem::CommandMissingSubcommand, "type" => name.clone(),
                                       "field" => field_name));
                }
            }
        }
    }
    let extra = |n: u32| n != 1 && Some(n as u64) != type_num;
    let base_fields = &schema.messages[core.base_command].fields;
    if base.slots.iter().any(|(f, _)| extra(base_fields[*f as usize].number)) {
        let types: Vec<Value> = base
            .present_numbers(schema)
            .into_iter()
            .filter(|&n| extra(n))
            .map(|n| Value::Str(type_name(core, Some(n as u64))))
            .collect();
        findings.push(finding!(PulsarProblem::CommandExtraSubcommands, "types" => types));
    }
    let mut unknown: Vec<u32> = base.unknown.iter().copied().filter(|&n| n != 1).collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        unknown.dedup();
        findings.push(finding!(PulsarProblem::CommandUnknownFields,
                     "fields" => unknown.into_iter().map(Value::from).collect::<Vec<_>>()));
    }
    let command_value = command.map(|c| c.to_value(schema));
    let mut body: Option<crate::model::Body> = None;
    if type_num == Some(core.send) || type_num == Some(core.message) {
        let is_message = type_num == Some(core.message);
        let ack_set = if is_message { command.map(|c| c.varints(schema, core.message_ack_set)) } else { None };
        let section = payload::decode_section(core, frame, cmd_end, missing > 0, ack_set.as_deref(), caps, depth);
        findings.extend(section.findings.iter().cloned());
        body = Some(Box::new(section));
    } else if cmd_end < frame.len() {
        findings.push(
            finding!(PulsarProblem::CommandTrailingBytes, "length" => frame.len() - cmd_end, "type" => name.clone()),
        );
    }
    Decoded { type_name: name, command: command_value, size, findings, body }
}

fn u32_at(frame: &[u8], pos: usize) -> Option<u32> {
    Some(u32::from_be_bytes(frame.get(pos..pos + 4)?.try_into().ok()?))
}

/// (type name, fields) of a BaseCommand cut short: the sub-command's fields that arrived whole; None when
/// the type or the start of its sub-command is not among the bytes at hand.
fn command_prefix(core: &Core, buf: &[u8]) -> Option<(Text, Value)> {
    let type_num = peek_command_type(buf)?;
    let n = u32::try_from(type_num).ok().filter(|&n| core.command_types.contains(n as i32))?;
    let base = &core.schema.messages[core.base_command];
    let Some(Kind::Message(sub_type)) = base.field(n).map(|f| base.fields[f].kind) else { return None };
    // BaseCommand: the type (1), then the sub-command, whose field number is the type's
    let mut pos = 0usize;
    let mut sub = None;
    while pos < buf.len() {
        let key = read_varint(buf, &mut pos).ok()?;
        let (number, wt) = (key >> 3, key & 7);
        match wt {
            0 => {
                read_varint(buf, &mut pos).ok()?;
            }
            2 => {
                let len = read_varint(buf, &mut pos).ok()?;
                if number == n as u64 {
                    sub = Some((pos, buf.len().min(pos.saturating_add(len as usize))));
                    break;
                }
                pos = pos.saturating_add(len as usize);
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => return None,
        }
    }
    let (start, end) = sub?;
    let (mut whole, mut pos) = (start, start); // the end of the last field that arrived whole
    while pos < end {
        let Ok(key) = read_varint(&buf[..end], &mut pos) else { break };
        let ok = match key & 7 {
            0 => read_varint(&buf[..end], &mut pos).is_ok(),
            2 => match read_varint(&buf[..end], &mut pos) {
                Ok(len) => {
                    pos = pos.saturating_add(len as usize);
                    true
                }
                Err(_) => false,
            },
            1 => {
                pos += 8;
                true
            }
            5 => {
                pos += 4;
                true
            }
            _ => false,
        };
        if !ok || pos > end {
            break;
        }
        whole = pos;
    }
    let parsed = pb::parse(core.schema, sub_type, &buf[start..whole]).ok()?;
    Some((type_name(core, Some(type_num)), parsed.to_value(core.schema)))
}

/// A required enum field holding a value the schema does not know (a newer protocol) parses as absent and
/// its number is among the unknown fields: say so instead of calling the field missing.
fn required_problems(core: &Core, command: &Parsed, name: &Text, errors: Vec<String>, findings: &mut Vec<Finding>) {
    let ty = &core.schema.messages[command.msg];
    let (mut missing, mut odd) = (Vec::new(), Vec::new());
    for path in errors {
        // (only an enum field: a scalar of the wrong wire type is kept among the unknown fields too, and missing)
        let odd_field = ty
            .field_by_name(&path)
            .is_some_and(|f| matches!(f.kind, Kind::Enum(_)) && command.unknown.contains(&f.number));
        if odd_field {
            odd.push(Value::from(path))
        } else {
            missing.push(Value::from(path))
        }
    }
    if !missing.is_empty() {
        findings.push(finding!(PulsarProblem::CommandMissingRequired, "type" => name.clone(), "fields" => missing));
    }
    if !odd.is_empty() {
        findings.push(finding!(PulsarProblem::CommandUnknownEnum, "type" => name.clone(), "fields" => odd));
    }
}
