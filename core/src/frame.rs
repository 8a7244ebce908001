//! One Pulsar frame → ``model.Decoded``: sizes, the BaseCommand and its sub-command, and for SEND and
//! MESSAGE the payload section. A pure function of the bytes (and of the decompression limit).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::pb::{self, read_varint, Parsed};
use crate::schema::Kind;
use crate::payload;
use crate::{finding, Core};

pub fn type_name(core: &Core, number: Option<u64>) -> String {
    match number {
        None => "MALFORMED".to_string(),
        Some(n) => match i32::try_from(n).ok().and_then(|n| core.type_names.get(&n)) {
            Some(name) => name.clone(),
            None => format!("UNKNOWN({n})"),
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

pub fn decode_frame<'py>(
    py: Python<'py>,
    core: &Core,
    frame: &[u8],
    missing: usize,
    max_decompressed: u64,
    brief: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let size = frame.len() + missing;
    let findings = PyList::empty(py);
    if frame.len() < 8 {
        findings.append(finding(py, core, "frame.too_short", &[("length", frame.len().into_pyobject(py)?.into_any())])?)?;
        return core.decoded(py, "MALFORMED", None, size, findings, None);
    }
    let total = u32::from_be_bytes(frame[0..4].try_into().unwrap()) as usize;
    let cmd_size = u32::from_be_bytes(frame[4..8].try_into().unwrap()) as usize;
    if total + 4 != size {
        findings.append(finding(py, core, "frame.size_mismatch", &[
            ("total_size", total.into_pyobject(py)?.into_any()),
            ("following", (size - 4).into_pyobject(py)?.into_any()),
        ])?)?;
    }
    let cmd_end = 8 + cmd_size;
    if cmd_size + 4 > total {
        findings.append(finding(py, core, "frame.cmd_size", &[
            ("cmd_size", cmd_size.into_pyobject(py)?.into_any()),
            ("total_size", total.into_pyobject(py)?.into_any()),
        ])?)?;
    }
    if cmd_end > frame.len() {
        findings.append(finding(py, core, "frame.truncated", &[])?)?;
        if missing > 0 && cmd_size + 4 <= total {
            // The wire carried the frame whole and the capture lost its end inside the command: the fields that
            // arrived whole (the type, then the ids, written first) still say what it was, e.g. so that the SEND
            // of a middle chunk keeps its place among the SENDs waiting for receipts under one sequence id.
            if let Some((name, command)) = command_prefix(py, core, &frame[8..])? {
                return core.decoded(py, &name, Some(command), size, findings, None);
            }
        }
        return core.decoded(py, "MALFORMED", None, size, findings, None);
    }
    let cmd_bytes = &frame[8..cmd_end];
    let type_num = peek_command_type(cmd_bytes);
    let schema = &core.schema;
    let base = match pb::parse(schema, core.base_command, cmd_bytes) {
        Ok(base) => base,
        Err(_) => {
            let error = format!("Error parsing message with type '{}'", schema.messages[core.base_command].full_name);
            findings.append(finding(py, core, "command.unparsable", &[("error", PyString::new(py, &error).into_any())])?)?;
            return core.decoded(py, &type_name(core, type_num), None, size, findings, None);
        }
    };
    let name = type_name(core, type_num);
    let mut command: Option<&Parsed> = None;
    let known = type_num.and_then(|n| i32::try_from(n).ok()).filter(|n| core.type_names.contains_key(n));
    match (type_num, known) {
        (None, _) => findings.append(finding(py, core, "command.no_type", &[])?)?,
        (Some(n), None) => findings.append(finding(py, core, "command.unknown_type", &[("number", n.into_pyobject(py)?.into_any())])?)?,
        (Some(n), Some(_)) => {
            let field = schema.messages[core.base_command].field(n as u32).map(|f| &schema.messages[core.base_command].fields[f]);
            match base.message(schema, n as u32) {
                Some(sub) if field.is_some() => {
                    command = Some(sub);
                    let errors = sub.init_errors(schema);
                    if !errors.is_empty() {
                        required_problems(py, core, sub, &name, errors, &findings)?;
                    }
                }
                _ => {
                    let field_name = field.map(|f| f.name_str.clone()).unwrap_or_else(|| "sub-command".into());
                    findings.append(finding(py, core, "command.missing_subcommand", &[
                        ("type", PyString::new(py, &name).into_any()),
                        ("field", PyString::new(py, &field_name).into_any()),
                    ])?)?;
                }
            }
        }
    }
    let present: Vec<u32> = base
        .present_numbers(schema)
        .into_iter()
        .filter(|&n| n != 1 && Some(n as u64) != type_num)
        .collect();
    if !present.is_empty() {
        let types = PyList::new(py, present.iter().map(|&n| type_name(core, Some(n as u64))))?;
        findings.append(finding(py, core, "command.extra_subcommands", &[("types", types.into_any())])?)?;
    }
    let mut unknown: Vec<u32> = base.unknown.iter().copied().filter(|&n| n != 1).collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        unknown.dedup();
        findings.append(finding(py, core, "command.unknown_fields", &[("fields", PyList::new(py, unknown)?.into_any())])?)?;
    }
    let command_dict: Option<Bound<'py, PyDict>> = match command {
        Some(c) => Some(c.to_dict(py, schema)?),
        None => None,
    };
    let mut body = None;
    if type_num == Some(core.send as u64) || type_num == Some(core.message as u64) {
        let ack_set = if type_num == Some(core.message as u64) {
            command.map(|c| c.varints(schema, core.message_ack_set))
        } else {
            None
        };
        let mut section = payload::decode_section(py, core, frame, cmd_end, missing > 0, ack_set.as_deref(), max_decompressed, brief)?;
        if !brief {
            // the per-message records are built here, once, not per message in Python
            let base = match (&command_dict, type_num == Some(core.message as u64)) {
                (Some(cmd), true) => cmd.get_item(pyo3::intern!(py, "message_id"))?.and_then(|v| v.cast_into::<PyDict>().ok()),
                _ => None,
            };
            section.records = Some(payload::message_records(py, &section.messages, base.as_ref())?);
        }
        for f in section.findings.iter() {
            findings.append(f)?;
        }
        body = Some(section.into_py(py, core)?);
    } else if cmd_end < frame.len() {
        findings.append(finding(py, core, "command.trailing_bytes", &[
            ("length", (frame.len() - cmd_end).into_pyobject(py)?.into_any()),
            ("type", PyString::new(py, &name).into_any()),
        ])?)?;
    }
    core.decoded(py, &name, command_dict.map(|d| d.into_any()), size, findings, body)
}

/// (type name, fields) of a BaseCommand cut short: the sub-command's fields that arrived whole; None when
/// the type or the start of its sub-command is not among the bytes at hand.
fn command_prefix<'py>(py: Python<'py>, core: &Core, buf: &[u8]) -> PyResult<Option<(String, Bound<'py, PyAny>)>> {
    let Some(type_num) = peek_command_type(buf) else { return Ok(None) };
    let Some(n) = u32::try_from(type_num).ok().filter(|&n| core.type_names.contains_key(&(n as i32))) else {
        return Ok(None);
    };
    let base = &core.schema.messages[core.base_command];
    let Some(Kind::Message(sub_type)) = base.field(n).map(|f| base.fields[f].kind) else { return Ok(None) };
    // BaseCommand: the type (1), then the sub-command, whose field number is the type's
    let mut pos = 0usize;
    let mut sub = None;
    while pos < buf.len() {
        let Ok(key) = read_varint(buf, &mut pos) else { return Ok(None) };
        let (number, wt) = (key >> 3, key & 7);
        match wt {
            0 => {
                if read_varint(buf, &mut pos).is_err() {
                    return Ok(None);
                }
            }
            2 => {
                let Ok(len) = read_varint(buf, &mut pos) else { return Ok(None) };
                if number == n as u64 {
                    sub = Some((pos, buf.len().min(pos.saturating_add(len as usize))));
                    break;
                }
                pos = pos.saturating_add(len as usize);
            }
            1 => pos += 8,
            5 => pos += 4,
            _ => return Ok(None),
        }
    }
    let Some((start, end)) = sub else { return Ok(None) };
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
    match pb::parse(&core.schema, sub_type, &buf[start..whole]) {
        Ok(parsed) => Ok(Some((type_name(core, Some(type_num)), parsed.to_dict(py, &core.schema)?.into_any()))),
        Err(_) => Ok(None),
    }
}

/// A required enum field holding a value the schema does not know (a newer protocol) parses as absent and
/// its number is among the unknown fields: say so instead of calling the field missing.
fn required_problems<'py>(
    py: Python<'py>,
    core: &Core,
    command: &Parsed,
    name: &str,
    errors: Vec<String>,
    findings: &Bound<'py, PyList>,
) -> PyResult<()> {
    let ty = &core.schema.messages[command.msg];
    let (mut missing, mut odd) = (Vec::new(), Vec::new());
    for path in errors {
        let odd_field = ty.field_by_name(&path).map(|f| command.unknown.contains(&f.number)).unwrap_or(false);
        if odd_field { odd.push(path) } else { missing.push(path) }
    }
    if !missing.is_empty() {
        findings.append(finding(py, core, "command.missing_required", &[
            ("type", PyString::new(py, name).into_any()),
            ("fields", PyList::new(py, missing)?.into_any()),
        ])?)?;
    }
    if !odd.is_empty() {
        findings.append(finding(py, core, "command.unknown_enum", &[
            ("type", PyString::new(py, name).into_any()),
            ("fields", PyList::new(py, odd)?.into_any()),
        ])?)?;
    }
    Ok(())
}
