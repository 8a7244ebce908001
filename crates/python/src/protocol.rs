//! A protocol as the pipeline sees it: its declarations (read once from the Python ``ProtocolSpec``), its
//! framing and its decoder. A protocol implemented in the core (``ProtocolSpec.core``: Pulsar) frames and
//! decodes here; a protocol declared in Python only (a plug-in, the tests' toy) gives callables, which the
//! same generic code calls. A spec's callable, when given, takes the place of the core's.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::convert::{map_from_py, map_to_py, value_from_py, StrToPy};
use engine::model::{Decoded, Finding};
use engine::protocols::{self, Depth, Protocol as EngineProtocol};
use engine::transport::splitter::{BadLength, Framing, Head, PduLength};
use engine::value::Value;

/// What the decoder needs of the options.
pub struct DecodeOptions {
    pub max_decompressed: u64,
    /// How deep bodies are decoded.
    pub depth: Depth,
    pub options: Py<PyAny>, // for the decoders of protocols declared in Python
}

/// A spec's framing: the core's, with the spec's Python callables (when given) in place of its methods.
pub struct SpecFraming {
    core: Option<Box<dyn Framing>>,
    pdu_length: Option<Py<PyAny>>,
    resync: Option<Py<PyAny>>,
    oversized_head: Option<Py<PyAny>>,
    min_pdu: usize,
    foreign_kind: String,
}

pub struct Protocol {
    pub name: Py<PyString>,
    pub client_role: String,
    pub server_roles: Vec<String>,
    pub ports: Vec<(u16, String)>,
    /// command type → the role that sends it (or "any")
    pub senders: HashMap<String, String>,
    pub framing: SpecFraming,
    /// its largest frame when the options do not say (`ProtocolSpec.max_frame_size`)
    pub max_frame_size: Option<usize>,
    /// The protocol compiled into the engine by that name (``ProtocolSpec.core``), if any.
    core: Option<&'static dyn EngineProtocol>,
    decode: Option<Py<PyAny>>,
    confirms: Option<Py<PyAny>>,
}

fn optional(spec: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Py<PyAny>>> {
    let v = spec.getattr(name)?;
    Ok(if v.is_none() { None } else { Some(v.unbind()) })
}

impl Protocol {
    /// Read a ``ProtocolSpec``.
    pub fn from_spec(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<Protocol> {
        let core =
            match spec.getattr("core")?.extract::<Option<String>>()?.as_deref() {
                None => None,
                Some(name) => Some(protocols::by_name(name).ok_or_else(|| {
                    pyo3::exceptions::PyValueError::new_err(format!("no protocol {name:?} in the core"))
                })?),
            };
        let core_framing = core.map(|protocol| protocol.framing());
        let min_pdu = match spec.getattr("min_pdu")?.extract::<Option<usize>>()? {
            Some(n) => n,
            None => core_framing.as_ref().map(|f| f.min_pdu()).unwrap_or(1),
        };
        let foreign_kind = match spec.getattr("foreign_kind")?.extract::<Option<String>>()? {
            Some(k) => k,
            None => {
                core_framing.as_ref().map(|f| f.foreign_kind().to_string()).unwrap_or_else(|| "FOREIGN_PROTOCOL".into())
            }
        };
        let pdu_length = optional(spec, "pdu_length")?;
        if pdu_length.is_none() && core_framing.is_none() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a protocol needs pdu_length or a core implementation",
            ));
        }
        let framing = SpecFraming {
            core: core_framing,
            pdu_length,
            resync: optional(spec, "resync")?,
            oversized_head: optional(spec, "oversized_head")?,
            min_pdu,
            foreign_kind,
        };
        let mut senders = HashMap::new();
        for command in spec.getattr("commands")?.try_iter()? {
            let command = command?;
            senders
                .insert(command.getattr("name")?.extract::<String>()?, command.getattr("sender")?.extract::<String>()?);
        }
        let ports: Vec<(u16, String)> = spec
            .getattr("ports")?
            .cast::<PyDict>()?
            .iter()
            .map(|(k, v)| Ok((k.extract::<u16>()?, v.extract::<String>()?)))
            .collect::<PyResult<_>>()?;
        let decode = optional(spec, "decode")?;
        if decode.is_none() && core.is_none() {
            return Err(pyo3::exceptions::PyValueError::new_err("a protocol needs decode or a core implementation"));
        }
        Ok(Protocol {
            name: PyString::intern(py, &spec.getattr("name")?.extract::<String>()?).unbind(),
            client_role: spec.getattr("client_role")?.extract()?,
            server_roles: spec.getattr("server_roles")?.extract()?,
            ports,
            senders,
            framing,
            max_frame_size: spec.getattr("max_frame_size")?.extract()?,
            core,
            decode,
            confirms: optional(spec, "confirms")?,
        })
    }

    pub fn default_server_role(&self) -> &str {
        self.server_roles.first().map(|s| s.as_str()).unwrap_or("server")
    }
}

/// A decoded PDU: the core's Rust plain data, kept as such until the pipeline builds the Python frame, or
/// the Python object a protocol declared in Python decoded.
#[allow(clippy::large_enum_variant)] // one at a time, on the stack: no allocation per PDU to box it
pub enum DecodedPdu<'py> {
    Core(Decoded),
    Python(Bound<'py, PyAny>),
}

impl<'py> DecodedPdu<'py> {
    /// The PDU's type (a command's name).
    pub fn type_name(&self) -> PyResult<String> {
        match self {
            DecodedPdu::Core(d) => Ok(d.type_name.as_str().to_owned()),
            DecodedPdu::Python(d) => d.getattr(pyo3::intern!(d.py(), "type"))?.extract(),
        }
    }

    fn has_findings(&self) -> PyResult<bool> {
        match self {
            DecodedPdu::Core(d) => Ok(!d.findings.is_empty()),
            DecodedPdu::Python(d) => Ok(!d.getattr(pyo3::intern!(d.py(), "findings"))?.is_empty()?),
        }
    }

    /// Bytes of the PDU on the wire, as its decoder counted them.
    pub fn size(&self) -> PyResult<Value> {
        match self {
            DecodedPdu::Core(d) => Ok(d.size.into()),
            DecodedPdu::Python(d) => value_from_py(&d.getattr(pyo3::intern!(d.py(), "size"))?),
        }
    }

    /// The same PDU with `finding` before its decoder's findings (a Python ``Decoded`` is rebuilt with the
    /// ``model.Decoded`` and ``Finding`` classes the pipeline was given).
    pub fn with_finding_first(
        self,
        py: Python<'py>,
        finding: Finding,
        decoded_class: &Bound<'py, PyAny>,
        finding_class: &Bound<'py, PyAny>,
    ) -> PyResult<Self> {
        match self {
            DecodedPdu::Core(mut d) => {
                d.findings.insert(0, finding);
                Ok(DecodedPdu::Core(d))
            }
            DecodedPdu::Python(d) => {
                let first = finding_class.call1((finding.id.to_py(py), map_to_py(py, &finding.params)?))?;
                let findings = PyList::new(py, [first])?;
                for f in d.getattr(pyo3::intern!(py, "findings"))?.try_iter()? {
                    findings.append(f?)?;
                }
                let field = |name: &Bound<'py, PyString>| d.getattr(name);
                Ok(DecodedPdu::Python(decoded_class.call1((
                    field(pyo3::intern!(py, "type"))?,
                    field(pyo3::intern!(py, "command"))?,
                    field(pyo3::intern!(py, "size"))?,
                    findings,
                    field(pyo3::intern!(py, "body"))?,
                ))?))
            }
        }
    }

    /// The Python ``Decoded`` for a Python callable to read; the core's data is converted in place, so it is
    /// converted once even then.
    fn as_py(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let object = match self {
            DecodedPdu::Core(d) => crate::decoded_to_py(py, d)?,
            DecodedPdu::Python(d) => d.clone(),
        };
        *self = DecodedPdu::Python(object.clone());
        Ok(object)
    }
}

/// Decode one PDU (``missing`` bytes of it not at hand): the one place the pipeline reaches a decoder.
pub fn decode_pdu<'py>(
    py: Python<'py>,
    protocol: &Protocol,
    data: &[u8],
    missing: i64,
    options: &DecodeOptions,
) -> PyResult<DecodedPdu<'py>> {
    if let Some(decode) = &protocol.decode {
        return Ok(DecodedPdu::Python(decode.bind(py).call1((
            PyBytes::new(py, data),
            missing,
            options.options.bind(py),
        ))?));
    }
    match protocol.core {
        Some(core) => {
            let missing = usize::try_from(missing).unwrap_or(0);
            let decode = || core.decode(data, missing, options.max_decompressed, options.depth);
            // a large frame's decoding (decompression above all) lets other Python threads run
            Ok(DecodedPdu::Core(if data.len() < crate::RELEASE_GIL_FROM { decode() } else { py.detach(decode) }))
        }
        None => Err(pyo3::exceptions::PyValueError::new_err("no decoder")),
    }
}

/// Whether a decoded PDU proves the protocol on a connection off its ports (``--detect``); with its type,
/// what learning the roles needs. The one place this is decided.
pub fn confirms<'py>(py: Python<'py>, protocol: &Protocol, decoded: &mut DecodedPdu<'py>) -> PyResult<bool> {
    if let Some(f) = &protocol.confirms {
        return f.bind(py).call1((decoded.as_py(py)?,))?.is_truthy();
    }
    let has_findings = decoded.has_findings()?;
    Ok(match protocol.core {
        Some(core) => core.confirms(&decoded.type_name()?, has_findings),
        None => !has_findings,
    })
}

fn bad_length(v: &Bound<'_, PyAny>) -> PyResult<BadLength> {
    Ok(BadLength {
        kind: v.getattr("kind")?.extract()?,
        details: map_from_py(&v.getattr("details")?)?,
        params: map_from_py(&v.getattr("params")?)?,
    })
}

impl Framing for SpecFraming {
    fn pdu_length(&self, buf: &[u8], max_size: usize) -> PduLength {
        match (&self.pdu_length, &self.core) {
            (Some(f), _) => Python::attach(|py| {
                let got = f.bind(py).call1((PyBytes::new(py, buf), 0, buf.len(), max_size));
                match got {
                    Ok(v) => match v.extract::<i64>() {
                        Ok(n) if n > 0 => PduLength::Complete(n as usize),
                        Ok(_) => PduLength::NeedMore,
                        Err(_) => match bad_length(&v) {
                            Ok(bad) => PduLength::Bad(bad),
                            Err(e) => {
                                e.restore(py); // raised by the caller once the splitter returns
                                PduLength::NeedMore
                            }
                        },
                    },
                    Err(e) => {
                        e.restore(py);
                        PduLength::NeedMore
                    }
                }
            }),
            (None, Some(core)) => core.pdu_length(buf, max_size),
            (None, None) => PduLength::NeedMore,
        }
    }

    fn resync(&self, buf: &[u8], max_size: usize) -> (bool, usize) {
        match (&self.resync, &self.core) {
            (Some(f), _) => Python::attach(|py| {
                match f
                    .bind(py)
                    .call1((PyBytes::new(py, buf), 0, buf.len(), max_size))
                    .and_then(|v| v.extract::<(bool, usize)>())
                {
                    Ok(found) => found,
                    Err(e) => {
                        e.restore(py); // raised by the caller once the splitter returns
                        (false, buf.len())
                    }
                }
            }),
            (None, Some(core)) => core.resync(buf, max_size),
            (None, None) => (false, buf.len()),
        }
    }

    fn resync_until(&self, buf: &[u8], max_size: usize) -> (bool, usize, usize) {
        match (&self.resync, &self.core) {
            (None, Some(core)) => core.resync_until(buf, max_size),
            _ => {
                let (found, offset) = self.resync(buf, max_size);
                (found, offset, 0)
            }
        }
    }

    fn reads_oversized_heads(&self) -> bool {
        self.oversized_head.is_some() || self.core.as_ref().map(|c| c.reads_oversized_heads()).unwrap_or(false)
    }

    fn oversized_head(&self, buf: &[u8]) -> Head {
        match (&self.oversized_head, &self.core) {
            (Some(f), _) => Python::attach(|py| {
                let v = match f.bind(py).call1((PyBytes::new(py, buf), 0, buf.len())) {
                    Ok(v) => v,
                    Err(e) => {
                        e.restore(py); // raised by the caller once the splitter returns
                        return Head::Skip;
                    }
                };
                if v.is_none() {
                    Head::Skip
                } else if let Ok((head, length)) = v.extract::<(usize, usize)>() {
                    Head::Found { head, length }
                } else {
                    Head::NeedMore
                }
            }),
            (None, Some(core)) => core.oversized_head(buf),
            (None, None) => Head::Skip,
        }
    }

    fn min_pdu(&self) -> usize {
        self.min_pdu
    }

    fn foreign_kind(&self) -> &str {
        &self.foreign_kind
    }

    fn tls_name(&self) -> &str {
        self.core.as_ref().map(|c| c.tls_name()).unwrap_or("TLS handshake")
    }
}
