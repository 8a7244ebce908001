//! The engine's text forms for Python's renderers (`dissector/output/text.py`): the one escape of wire
//! strings and the ways values are shown, each implemented once in the engine's `text` module.

use engine::text::{
    date_ms, push_json, push_message_id, push_payload_preview, push_preview, push_safe_text, push_shown_b64, safe,
    BytesKind, PreviewOf, MAX_VALUE,
};
use engine::value::{Text, Value};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::convert::value_from_py;

/// The Python value as a [`Value`]; a dict's keys that are not str as `json.dumps` writes them (`1`,
/// `true`, `null`); what is not plain data (an int beyond 64 bits, another object) as the text of its
/// `str()`; a str with lone surrogates as Python's `backslashreplace` writes them (the same text
/// `unicode_escape` gives them).
pub fn value_of(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(text) = value.cast::<PyString>() {
        if let Ok(text) = text.to_str() {
            return Ok(Value::from(text.to_owned()));
        }
        let escaped = text.call_method1("encode", ("utf-8", "backslashreplace"))?;
        return Ok(Value::from(String::from_utf8_lossy(escaped.cast::<PyBytes>()?.as_bytes()).into_owned()));
    }
    if let Ok(dict) = value.cast::<PyDict>() {
        let mut entries = Vec::with_capacity(dict.len());
        for (key, item) in dict.iter() {
            let key = match value_of(&key)? {
                Value::Str(text) => text,
                Value::List(_) | Value::Map(_) | Value::Bytes(_) => return value_of(value.str()?.as_any()),
                other => {
                    let mut text = String::new();
                    push_json(&other, &mut text);
                    Text::Owned(text)
                }
            };
            entries.push((key, value_of(&item)?));
        }
        return Ok(Value::Map(entries));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        return value.try_iter()?.map(|item| value_of(&item?)).collect::<PyResult<_>>().map(Value::List);
    }
    match value_from_py(value) {
        Ok(plain) => Ok(plain),
        Err(_) => value_of(value.str()?.as_any()),
    }
}

/// `safe(value, limit=60)`: the one escape of wire strings (`dissector/output/text.py: safe`).
#[pyfunction(name = "safe")]
#[pyo3(signature = (value, limit=MAX_VALUE))]
fn py_safe(value: &Bound<'_, PyAny>, limit: i64) -> PyResult<String> {
    if let Ok(text) = value.cast::<PyString>() {
        if let Ok(text) = text.to_str() {
            let mut out = String::new();
            push_safe_text(text, limit, &mut out);
            return Ok(out);
        }
    }
    Ok(safe(&value_of(value)?, limit))
}

/// `date_ms(value)`: epoch milliseconds as a UTC date and time.
#[pyfunction(name = "date_ms")]
fn py_date_ms(value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(date_ms(&value_of(value)?))
}

/// `shown_b64(value, kind, limit)`: a bytes field of a record as the timeline shows it: (text, is hex).
#[pyfunction(name = "shown_b64")]
#[pyo3(signature = (value, kind="text", limit=1000))]
fn py_shown_b64(value: &Bound<'_, PyAny>, kind: &str, limit: i64) -> PyResult<(String, bool)> {
    let mut out = String::new();
    let hexed = push_shown_b64(&value_of(value)?, BytesKind::from_name(kind), limit, &mut out);
    Ok((out, hexed))
}

/// `message_id_text(value)`: a message id (or a list of them) as the timeline shows it.
#[pyfunction(name = "message_id_text")]
fn py_message_id_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut out = String::new();
    push_message_id(&value_of(value)?, &mut out);
    Ok(out)
}

/// `payload_preview(message)`: a message's payload as `--payload` shows it.
#[pyfunction(name = "payload_preview")]
fn py_payload_preview(message: &Bound<'_, PyAny>) -> PyResult<String> {
    let Ok(dict) = message.cast::<PyDict>() else {
        return py_payload_preview_copied(message);
    };
    let mut out = String::new();
    // the payload's text read where Python holds it: a 64 MiB payload is not copied to be previewed
    let item = |key: &str| dict.get_item(key);
    let (text, b64) = (item("payload_text")?, item("payload_b64")?);
    let payload = match (text.as_ref().map(plain_str), b64.as_ref().map(plain_str)) {
        (Some(Some(text)), _) => PreviewOf::Text(text),
        (None, Some(Some(b64))) => PreviewOf::B64(b64),
        // no payload text, or one that is no plain str
        _ => return py_payload_preview_copied(message),
    };
    let size = item("payload_size")?.map(|v| value_of(&v)).transpose()?.unwrap_or(Value::Null);
    let encrypted = item("encrypted")?.map(|v| v.is_truthy()).transpose()?.unwrap_or(false);
    push_preview(&size, payload, encrypted, &mut out);
    Ok(out)
}

/// A Python str's text where Python holds it; None: no str, or one with lone surrogates.
fn plain_str<'a>(value: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    value.cast::<PyString>().ok().and_then(|text| text.to_str().ok())
}

/// The preview of a message whose payload is no plain str (a str with lone surrogates, another object): read as
/// a value first.
fn py_payload_preview_copied(message: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut out = String::new();
    push_payload_preview(&value_of(message)?, &mut out);
    Ok(out)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_safe, m)?)?;
    m.add_function(wrap_pyfunction!(py_date_ms, m)?)?;
    m.add_function(wrap_pyfunction!(py_shown_b64, m)?)?;
    m.add_function(wrap_pyfunction!(py_message_id_text, m)?)?;
    m.add_function(wrap_pyfunction!(py_payload_preview, m)?)?;
    m.add("UNICODE_VERSION", engine::text::UNICODE_VERSION)?; // of the table of what is printable
    Ok(())
}
