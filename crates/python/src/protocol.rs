//! A protocol as the pipeline sees it: its declarations (read once from the Python ``ProtocolSpec``), its
//! framing and its decoder. A protocol implemented in the core (``ProtocolSpec.core``: Pulsar) frames and
//! decodes here; a protocol declared in Python only (a plug-in, the tests' toy) gives callables, which the
//! same generic code calls. A spec's callable, when given, takes the place of the core's.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::convert::{map_from_py, map_to_py, value_from_py, StrToPy};
use engine::model::{Decoded, Finding};
use engine::pipeline::{DecodeSettings, StreamProtocol};
use engine::protocols::{self, Protocol as EngineProtocol};
use engine::transport::splitter::{BadLength, Framing, Head, PduLength};
use engine::value::Value;

/// What a protocol declared in Python is decoded with, beyond the engine's settings: the options object its
/// callables take, and the classes a rebuilt ``Decoded`` is made of.
pub struct PythonDecoding {
    pub options: Py<PyAny>,
    pub decoded_class: Py<PyAny>,
    pub finding_class: Py<PyAny>,
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
    name_text: Arc<str>,
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
    python: PythonDecoding,
}

fn optional(spec: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Py<PyAny>>> {
    let v = spec.getattr(name)?;
    Ok(if v.is_none() { None } else { Some(v.unbind()) })
}

impl Protocol {
    /// Read a ``ProtocolSpec``.
    pub fn from_spec(py: Python<'_>, spec: &Bound<'_, PyAny>, python: PythonDecoding) -> PyResult<Protocol> {
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
        let name: String = spec.getattr("name")?.extract()?;
        Ok(Protocol {
            name: PyString::intern(py, &name).unbind(),
            name_text: Arc::from(name),
            client_role: spec.getattr("client_role")?.extract()?,
            server_roles: spec.getattr("server_roles")?.extract()?,
            ports,
            senders,
            framing,
            max_frame_size: spec.getattr("max_frame_size")?.extract()?,
            core,
            decode,
            confirms: optional(spec, "confirms")?,
            python,
        })
    }
}

/// A decoded PDU: the engine's plain data, kept as such until the binding builds the Python frame, or the
/// Python object a protocol declared in Python decoded.
#[allow(clippy::large_enum_variant)] // one at a time, on the stack: no allocation per PDU to box it
pub enum PyDecoded {
    Core(Decoded),
    Python(Py<PyAny>),
}

impl PyDecoded {
    /// The Python ``Decoded`` for a Python callable to read; the engine's data is converted in place, so it
    /// is converted once even then.
    fn as_py<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let object = match self {
            PyDecoded::Core(d) => crate::decoded_to_py(py, d)?,
            PyDecoded::Python(d) => d.bind(py).clone(),
        };
        *self = PyDecoded::Python(object.clone().unbind());
        Ok(object)
    }
}

/// The one place the stages reach a decoder, for the engine's protocols and those declared in Python alike.
impl StreamProtocol for Protocol {
    type Decoded = PyDecoded;
    type Error = PyErr;

    fn name(&self) -> &Arc<str> {
        &self.name_text
    }
    fn framing(&self) -> &dyn Framing {
        &self.framing
    }
    fn ports(&self) -> &[(u16, String)] {
        &self.ports
    }
    fn client_role(&self) -> &str {
        &self.client_role
    }
    fn server_roles(&self) -> &[String] {
        &self.server_roles
    }
    fn max_frame_size(&self) -> Option<usize> {
        self.max_frame_size
    }
    fn sender(&self, type_name: &str) -> Option<&str> {
        self.senders.get(type_name).map(String::as_str)
    }

    /// Decode one PDU (``missing`` bytes of it not at hand).
    fn decode(&self, data: &[u8], missing: i64, how: &DecodeSettings) -> PyResult<PyDecoded> {
        Python::attach(|py| {
            if let Some(decode) = &self.decode {
                let options = self.python.options.bind(py);
                return Ok(PyDecoded::Python(
                    decode.bind(py).call1((PyBytes::new(py, data), missing, options))?.unbind(),
                ));
            }
            match self.core {
                Some(core) => {
                    let missing = usize::try_from(missing).unwrap_or(0);
                    let decode = || core.decode(data, missing, how.caps, how.depth);
                    // a large frame's decoding (decompression above all) lets other Python threads run
                    Ok(PyDecoded::Core(if data.len() < crate::RELEASE_GIL_FROM { decode() } else { py.detach(decode) }))
                }
                None => Err(pyo3::exceptions::PyValueError::new_err("no decoder")),
            }
        })
    }

    /// Whether a decoded PDU proves the protocol on a connection off its ports (``--detect``).
    fn confirms(&self, decoded: &mut PyDecoded) -> PyResult<bool> {
        Python::attach(|py| {
            if let Some(f) = &self.confirms {
                return f.bind(py).call1((decoded.as_py(py)?,))?.is_truthy();
            }
            let has_findings = match decoded {
                PyDecoded::Core(d) => !d.findings.is_empty(),
                PyDecoded::Python(d) => !d.bind(py).getattr(pyo3::intern!(py, "findings"))?.is_empty()?,
            };
            Ok(match self.core {
                Some(core) => core.confirms(&self.type_name(decoded)?, has_findings),
                None => !has_findings,
            })
        })
    }

    fn type_name(&self, decoded: &PyDecoded) -> PyResult<String> {
        match decoded {
            PyDecoded::Core(d) => Ok(d.type_name.as_str().to_owned()),
            PyDecoded::Python(d) => Python::attach(|py| d.bind(py).getattr(pyo3::intern!(py, "type"))?.extract()),
        }
    }

    fn size(&self, decoded: &PyDecoded) -> PyResult<Value> {
        match decoded {
            PyDecoded::Core(d) => Ok(d.size.into()),
            PyDecoded::Python(d) => Python::attach(|py| value_from_py(&d.bind(py).getattr(pyo3::intern!(py, "size"))?)),
        }
    }

    /// A Python ``Decoded`` is rebuilt with the ``model.Decoded`` and ``Finding`` classes.
    fn with_finding_first(&self, decoded: PyDecoded, finding: Finding) -> PyResult<PyDecoded> {
        let d = match decoded {
            PyDecoded::Core(mut d) => {
                d.findings.insert(0, finding);
                return Ok(PyDecoded::Core(d));
            }
            PyDecoded::Python(d) => d,
        };
        Python::attach(|py| rebuilt(py, d.bind(py), finding, &self.python))
    }

    /// A framing callable's error, restored by it (the splitter knows no Python).
    fn take_framing_error(&self) -> Option<PyErr> {
        if !self.framing.calls_python() {
            return None;
        }
        Python::attach(PyErr::take)
    }
}

/// A Python ``Decoded`` again, with `finding` first, made of the ``model.Decoded`` and ``Finding`` classes.
fn rebuilt<'py>(
    py: Python<'py>,
    d: &Bound<'py, PyAny>,
    finding: Finding,
    python: &PythonDecoding,
) -> PyResult<PyDecoded> {
    let first = python.finding_class.bind(py).call1((finding.id.to_py(py), map_to_py(py, &finding.params)?))?;
    let findings = PyList::new(py, [first])?;
    for f in d.getattr(pyo3::intern!(py, "findings"))?.try_iter()? {
        findings.append(f?)?;
    }
    let field = |name: &Bound<'py, PyString>| d.getattr(name);
    let args = (
        field(pyo3::intern!(py, "type"))?,
        field(pyo3::intern!(py, "command"))?,
        field(pyo3::intern!(py, "size"))?,
        findings,
        field(pyo3::intern!(py, "body"))?,
    );
    Ok(PyDecoded::Python(python.decoded_class.bind(py).call1(args)?.unbind()))
}

fn bad_length(v: &Bound<'_, PyAny>) -> PyResult<BadLength> {
    Ok(BadLength {
        kind: v.getattr("kind")?.extract()?,
        details: map_from_py(&v.getattr("details")?)?,
        params: map_from_py(&v.getattr("params")?)?,
    })
}

impl SpecFraming {
    fn calls_python(&self) -> bool {
        self.pdu_length.is_some() || self.resync.is_some() || self.oversized_head.is_some()
    }
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
