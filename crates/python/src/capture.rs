//! The reader as Python sees it: ``CaptureReader`` (a path opened here, or a Python file object read through
//! its ``read1`` / ``read``), iterated one ``CapturedPacket`` at a time by ``dissector/capture/files.py``; and
//! `read_batch`, which feeds a pipeline stage straight from the reader, many packets per Python call, the
//! reader's notes put in as CAPTURE_NOTE events where they are found.

use std::fs::File;
use std::path::PathBuf;

use pyo3::exceptions::{PyEOFError, PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use engine::capture::source::{FileSource, Foreign, Source, SourceError};
use engine::capture::{NoteValue, Reader, StartError, CHUNK_SIZE};
use engine::transport::net::{tcp_segment, Segment};

pyo3::create_exception!(
    dissector._core,
    CaptureError,
    PyException,
    "The input cannot be read as a capture at all (missing file, not a capture, header truncated)."
);

/// A Python binary file object: its ``read1`` when it has one (a pipe gives what is there), else ``read``.
struct PythonSource {
    stream: Py<PyAny>,
    read: Py<PyAny>,
    /// Where the stream was when the reader started, when it can seek.
    origin: Option<u64>,
}

impl Source for PythonSource {
    fn read_again(&mut self, offset: u64, max: usize, out: &mut Vec<u8>) -> Option<usize> {
        let origin = self.origin?;
        Python::attach(|py| {
            let stream = self.stream.bind(py);
            let here = stream.call_method0("tell").ok()?;
            stream.call_method1("seek", (origin + offset,)).ok()?;
            let data = stream.call_method1("read", (max,)).and_then(|d| d.extract::<Vec<u8>>());
            stream.call_method1("seek", (here,)).ok()?;
            let data = data.ok()?;
            out.extend_from_slice(&data);
            Some(data.len())
        })
    }

    fn read(&mut self, max: usize, out: &mut Vec<u8>) -> Result<usize, SourceError> {
        Python::attach(|py| {
            let chunk = self.read.bind(py).call1((max,)).map_err(foreign)?;
            if chunk.is_none() {
                return Ok(0);
            }
            let n = match chunk.cast::<PyBytes>() {
                Ok(bytes) => {
                    out.reserve_exact(bytes.as_bytes().len());
                    out.extend_from_slice(bytes.as_bytes());
                    bytes.as_bytes().len()
                }
                Err(_) => {
                    let bytes: Vec<u8> = chunk.extract().map_err(foreign)?;
                    out.reserve_exact(bytes.len());
                    out.extend_from_slice(&bytes);
                    bytes.len()
                }
            };
            Ok(n)
        })
    }
}

fn foreign(err: PyErr) -> SourceError {
    SourceError::Foreign(Box::new(err))
}

/// The Python exception a source raised, back from the reader.
fn python_error(error: Foreign) -> PyErr {
    match error.downcast::<PyErr>() {
        Ok(err) => *err,
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err("a source's error that is not Python's"),
    }
}

/// An I/O error as the Python exception ``open`` or ``read`` would have raised (``OSError(errno,
/// strerror)`` makes the subclass: FileNotFoundError, IsADirectoryError ...).
fn io_error_to_py(py: Python<'_>, error: &std::io::Error) -> PyErr {
    match error.raw_os_error() {
        Some(errno) => PyOSError::new_err((errno, strerror(py, error))),
        None => PyOSError::new_err(error.to_string()),
    }
}

/// The C library's text of an I/O error (Python's ``OSError.strerror``).
fn strerror(py: Python<'_>, error: &std::io::Error) -> String {
    let text = error.raw_os_error().map(|errno| {
        py.import("os").and_then(|os| os.call_method1("strerror", (errno,))).and_then(|s| s.extract::<String>())
    });
    match text {
        Some(Ok(text)) => text,
        _ => error.to_string(),
    }
}

/// How a read error ends the capture, in Python's words (``Type: message``); an exception that is not an
/// I/O, EOF or zlib error propagates, as it did from the Python reader.
fn error_text(error: SourceError) -> Result<String, Foreign> {
    Python::attach(|py| {
        let err = match error {
            SourceError::Gzip(text) => return Ok(text),
            SourceError::Io(error) => io_error_to_py(py, &error),
            SourceError::Foreign(err) => python_error(err),
        };
        python_error_text(py, err).map_err(|err| Box::new(err) as Foreign)
    })
}

fn python_error_text(py: Python<'_>, err: PyErr) -> PyResult<String> {
    let zlib_error = py.import("zlib")?.getattr("error")?;
    let value = err.value(py);
    if !(value.is_instance_of::<PyOSError>()
        || value.is_instance_of::<PyEOFError>()
        || value.is_instance(&zlib_error)?)
    {
        return Err(err);
    }
    let name = value.get_type().name()?.to_string();
    let text = value.str()?.to_string();
    Ok(if text.is_empty() { name } else { format!("{name}: {text}") })
}

fn start_error(py: Python<'_>, name: &str, error: StartError) -> PyErr {
    match error {
        StartError::Capture(text) => CaptureError::new_err(text),
        StartError::Source(SourceError::Io(error)) => {
            CaptureError::new_err(format!("{name}: cannot read: {}", strerror(py, &error)))
        }
        StartError::Source(SourceError::Foreign(err)) => python_error(err),
        StartError::Source(SourceError::Gzip(text)) => CaptureError::new_err(text),
    }
}

/// One capture file, read once. Iterating gives ``CapturedPacket``s (the class given); `read_batch` (the
/// pipeline stages' ``read_capture``) reads it without them.
#[pyclass(module = "dissector._core", name = "CaptureReader")]
pub struct PyCaptureReader {
    reader: Reader,
    packet_class: Py<PyAny>,
    /// Notes already given to a stage as events (`read_batch`).
    notes_told: usize,
    /// `read_batch` gave what comes after the last packet.
    ended: bool,
    finishing: bool, // every packet read: the pipeline's end is being told, a few connections per batch
}

/// The connections of a capture file (`PyCaptureReader::flow_index`), in the order first seen: key, packets,
/// bytes.
#[derive(Default)]
struct FlowIndex {
    places: std::collections::HashMap<i64, usize>,
    keys: Vec<i64>,
    packets: Vec<i64>,
    bytes: Vec<i64>,
}

impl FlowIndex {
    fn add(&mut self, key: i64, bytes: usize) {
        let at = *self.places.entry(key).or_insert_with(|| {
            self.keys.push(key);
            self.packets.push(0);
            self.bytes.push(0);
            self.keys.len() - 1
        });
        self.packets[at] += 1;
        self.bytes[at] += bytes as i64;
    }
}

fn int64_buffer(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// The connections a `pipeline` task reads (`flow_key`s), and what a file's first packet is numbered in the
/// whole input less one (its packets are numbered from 1 in the file).
pub struct Selection {
    pub flows: std::collections::HashSet<i64>,
    pub offset: i64,
}

/// A file's index (`flow_index`): its connections, the packets read, the first one's time, the error that
/// stopped the reading.
pub struct FileIndex {
    flows: FlowIndex,
    read: u64,
    first_time: Option<f64>,
    error: Option<String>,
}

impl FileIndex {
    #[allow(clippy::type_complexity)]
    pub fn into_py(
        self,
        py: Python<'_>,
    ) -> ((Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>), u64, Option<f64>, Option<String>) {
        let buffers = (
            PyBytes::new(py, &int64_buffer(&self.flows.keys)),
            PyBytes::new(py, &int64_buffer(&self.flows.packets)),
            PyBytes::new(py, &int64_buffer(&self.flows.bytes)),
        );
        (buffers, self.read, self.first_time, self.error)
    }
}

/// The rest of the file `reader` indexed (`flow_index`), each TCP segment on `ports` (any port when None),
/// numbered `offset` + its number in the file, given to `each` with its `flow_key` as it is indexed: one reading for the
/// `pipeline`'s index and its count (`count_indexed`).
pub fn index_segments(
    py: Python<'_>,
    reader: &mut PyCaptureReader,
    ports: Option<&std::collections::HashSet<u16>>,
    offset: i64,
    mut each: impl FnMut(&Segment<'_>, i64) -> PyResult<()>,
) -> PyResult<FileIndex> {
    let mut index = FileIndex { flows: FlowIndex::default(), read: 0, first_time: None, error: None };
    loop {
        let packet = match reader.reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            Err(raised) => {
                index.error = Some(python_error_text(py, python_error(raised.0))?);
                break;
            }
        };
        index.read += 1;
        index.first_time.get_or_insert(packet.timestamp);
        let Some(segment) = packet_segment(&reader.reader, &packet, offset) else { continue };
        let data_len = reader.reader.data(&packet).len();
        if ports.is_some_and(|p| !p.contains(&segment.src_port) && !p.contains(&segment.dst_port)) {
            continue;
        }
        let key = engine::transport::net::flow_key(&segment);
        index.flows.add(key, data_len);
        each(&segment, key)?;
    }
    Ok(index)
}

/// A packet's TCP segment (None: not TCP), the packet numbered `offset` + its number in the file.
fn packet_segment<'r>(reader: &'r Reader, packet: &engine::capture::Packet, offset: i64) -> Option<Segment<'r>> {
    let linktype = u32::try_from(packet.linktype).unwrap_or(u32::MAX); // -1: a short interface block, no link type
    let orig_len = usize::try_from(packet.orig_len).unwrap_or(usize::MAX);
    let index = i64::try_from(packet.index).unwrap_or(i64::MAX).saturating_add(offset);
    tcp_segment(index, packet.timestamp, linktype, reader.data(packet), orig_len)
}

/// Calls `each` with the TCP segments of the selection's connections in `reader`, numbered in the whole
/// input, and their connection's `flow_key`, until `each` says to stop (false) or the file ends; returns
/// whether it ended. Nothing else of the
/// file is told (its notes, how it ended: the `pipeline` reads those once, `flow_index`).
pub fn selected_segments(
    reader: &Bound<'_, PyAny>,
    selection: &Selection,
    mut each: impl FnMut(&Segment<'_>, i64) -> PyResult<bool>,
) -> PyResult<bool> {
    let reader = reader.cast::<PyCaptureReader>()?;
    let mut reader = reader.try_borrow_mut()?;
    while !reader.ended {
        let packet = match reader.reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            Err(raised) => {
                reader.ended = true;
                return Err(python_error(raised.0));
            }
        };
        let Some(segment) = packet_segment(&reader.reader, &packet, selection.offset) else { continue };
        let key = engine::transport::net::flow_key(&segment);
        if selection.flows.contains(&key) && !each(&segment, key)? {
            return Ok(false);
        }
    }
    reader.ended = true;
    Ok(true)
}

/// The packets of `selection`'s connections in `reader` into `stage` (`FileStage::before_packet` first), until
/// at least `at_least` items are made, packets of `max_bytes` are read or the file ends: what they complete, in
/// order; None once the file was read whole. The end of the input is the caller's (after its last file).
pub fn read_selected<'py, S: FileStage>(
    py: Python<'py>,
    stage: &mut S,
    reader: &Bound<'py, PyAny>,
    selection: &Selection,
    at_least: usize,
    max_bytes: usize,
) -> PyResult<Option<Bound<'py, PyList>>> {
    if reader.cast::<PyCaptureReader>()?.try_borrow()?.ended {
        return Ok(None);
    }
    let out = PyList::empty(py);
    let mut read = 0;
    let result = selected_segments(reader, selection, |segment, _| {
        read += segment.payload.len();
        stage.before_packet(segment.packet_index);
        stage.feed_held(py, segment)?;
        if stage.held() > 0 {
            stage.release_into(py, &out)?;
        }
        Ok(out.len() < at_least && read < max_bytes)
    });
    let ended = stage.end_batch(py, &out, true); // (a pipeline task's end of a file is not known here)
    result.and(ended)?;
    Ok(Some(out))
}

impl PyCaptureReader {
    fn started(py: Python<'_>, source: Box<dyn Source>, name: &str, packet_class: Py<PyAny>) -> PyResult<Self> {
        let reader = Reader::start(source, name, error_text).map_err(|e| start_error(py, name, e))?;
        Ok(PyCaptureReader { reader, packet_class, notes_told: 0, ended: false, finishing: false })
    }
}

#[pymethods]
impl PyCaptureReader {
    /// A capture read from a binary file object (not closed here); `name` for messages.
    #[new]
    fn new(py: Python<'_>, stream: Bound<'_, PyAny>, name: &str, packet_class: Py<PyAny>) -> PyResult<Self> {
        let read = match stream.getattr("read1") {
            Ok(read1) => read1,
            Err(_) => stream.getattr("read")?,
        };
        let seekable = stream.call_method0("seekable").and_then(|s| s.is_truthy()).unwrap_or(false);
        let origin = if seekable { stream.call_method0("tell").and_then(|t| t.extract::<u64>()).ok() } else { None };
        let source = PythonSource { stream: stream.clone().unbind(), read: read.unbind(), origin };
        PyCaptureReader::started(py, Box::new(source), name, packet_class)
    }

    /// A capture file opened here (closed by `close`); an error opening it is the OSError ``open`` raises.
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf, name: &str, packet_class: Py<PyAny>) -> PyResult<Self> {
        let file = File::open(&path).map_err(|e| io_error_to_py(py, &e))?;
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(io_error_to_py(py, &std::io::Error::from_raw_os_error(21)));
            // EISDIR, as open() says
        }
        PyCaptureReader::started(py, Box::new(FileSource(file)), name, packet_class)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(packet) = self.reader.next_packet().map_err(|raised| python_error(raised.0))? else { return Ok(None) };
        let data = PyBytes::new(py, self.reader.data(&packet));
        let args = (packet.index, packet.timestamp, packet.linktype, data, packet.orig_len);
        Ok(Some(self.packet_class.bind(py).call1(args)?))
    }

    /// The TCP connections on `ports` (any port when None) in the rest of the file (the `pipeline`'s index of
    /// its input, `dissector/spark/tasks.py`): (their `flow_key`s, packets, bytes: little-endian int64
    /// buffers, in the order first seen; packets read, TCP or not; the time of the first packet read; the
    /// error that stopped the reading, or None: what came before it stands).
    #[allow(clippy::type_complexity)]
    fn flow_index<'py>(
        &mut self,
        py: Python<'py>,
        ports: Option<std::collections::HashSet<u16>>,
    ) -> PyResult<((Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>), u64, Option<f64>, Option<String>)>
    {
        let indexed = index_segments(py, self, ports.as_ref(), 0, |_, _| Ok(()))?;
        Ok(indexed.into_py(py))
    }

    /// Stop reading; a file opened here is closed.
    fn close(&mut self) {
        self.reader.close();
    }

    /// ``"pcap"`` or ``"pcapng"``.
    #[getter]
    fn format(&self) -> &'static str {
        self.reader.kind
    }

    #[getter]
    fn compressed(&self) -> bool {
        self.reader.compressed
    }

    /// Why the reading stopped early (``capture file truncated: ...`` / ``capture file corrupt: ...``), or None.
    #[getter]
    fn truncated(&self) -> Option<String> {
        self.reader.truncated.clone()
    }

    /// Packets read so far.
    #[getter]
    fn packets(&self) -> u64 {
        self.reader.packets
    }

    /// Classic pcap: the global header's link type, snap length and FCS length (None for pcapng).
    #[getter]
    fn linktype(&self) -> Option<i64> {
        self.reader.linktype
    }

    #[getter]
    fn snaplen(&self) -> Option<u32> {
        self.reader.snaplen
    }

    #[getter]
    fn fcs_len(&self) -> Option<u32> {
        self.reader.fcs_len
    }

    /// The notes so far, as (id, params) in the order found.
    #[getter]
    fn notes<'py>(&self, py: Python<'py>) -> PyResult<Vec<(&'static str, Bound<'py, PyDict>)>> {
        self.reader.notes.iter().map(|note| Ok((note.id, params_dict(py, &note.params)?))).collect()
    }
}

fn note_value<'py>(py: Python<'py>, value: &NoteValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        NoteValue::Int(n) => n.into_pyobject(py)?.into_any(),
        NoteValue::Text(text) => text.into_pyobject(py)?.into_any(),
        NoteValue::Nothing => py.None().into_bound(py),
    })
}

fn params_dict<'py>(py: Python<'py>, params: &[(&'static str, NoteValue)]) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in params {
        dict.set_item(key, note_value(py, value)?)?;
    }
    Ok(dict)
}

// ------------------------------------------------------------------------------------------ read_batch
/// A pipeline stage a capture file is read into (the core's ``Dissector`` and ``AnalysedDissector``): what a
/// packet completes is held, so that the reader's notes can go before it.
/// Connections closed at a time at the end of a capture (`fill_batch`).
const FINISH_STEP: usize = 64;

pub trait FileStage {
    /// One packet's TCP segment through the pipeline, what it completes held.
    fn feed_held(&mut self, py: Python<'_>, segment: &Segment) -> PyResult<()>;
    /// The end of the capture for the pipeline, what it leaves held.
    fn finish_held(&mut self, py: Python<'_>) -> PyResult<()>;
    /// The same for at most `most` connections: true once it is all done.
    fn finish_some_held(&mut self, py: Python<'_>, most: usize) -> PyResult<bool> {
        let _ = most;
        self.finish_held(py).map(|_| true)
    }
    fn held(&self) -> usize;
    /// The held items, made into their outputs, onto `out`.
    fn release_into(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()>;
    /// An event from outside the pipeline (a note of the reader) onto `out`.
    fn event_into(&mut self, py: Python<'_>, event: Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()>;
    /// The end of a batch: anything still buffered onto `out`.
    /// The end of a batch of packets (`last`: of the input, or a batch that failed).
    fn end_batch(&mut self, py: Python<'_>, out: &Bound<'_, PyList>, last: bool) -> PyResult<()>;
    fn last_time(&self) -> f64;
    fn last_packet(&self) -> i64;
    fn event_class(&self) -> &Py<PyAny>;
    /// Packet `p` (its number in the whole input) comes next (`read_selected`).
    fn before_packet(&mut self, _p: i64) {}
}

/// The reader's notes not yet told, as CAPTURE_NOTE events at the stage's time and packet.
fn tell_notes<S: FileStage>(
    py: Python<'_>,
    stage: &mut S,
    reader: &mut PyCaptureReader,
    out: &Bound<'_, PyList>,
) -> PyResult<()> {
    while reader.notes_told < reader.reader.notes.len() {
        let note = &reader.reader.notes[reader.notes_told];
        let details = PyDict::new(py);
        details.set_item("note", note.id)?;
        for (key, value) in &note.params {
            details.set_item(key, note_value(py, value)?)?;
        }
        let kwargs = PyDict::new(py);
        kwargs.set_item("details", details)?;
        let event = stage
            .event_class()
            .bind(py)
            .call(("CAPTURE_NOTE", stage.last_time(), stage.last_packet()), Some(&kwargs))?;
        reader.notes_told += 1;
        stage.event_into(py, event, out)?;
    }
    Ok(())
}

/// Read packets from `reader` into `stage` until its outputs hold at least `at_least` Python objects (frames,
/// events, notes; JSON lines gathered in one bytes object between two of them: the Python objects that live
/// through a batch are what costs, as the garbage collector's older generations), packets of `max_bytes` were
/// read (what the outputs hold grows with the bytes: SENDs of a thousand messages each make long lines) or the
/// capture ends; their outputs in capture order, the reader's notes as CAPTURE_NOTE events before
/// what the packet read after them completes, and after the last packet what the end of the capture makes
/// (the pipeline's end, the notes left, CAPTURE_TRUNCATED). None once all that was given.
pub fn read_batch<'py, S: FileStage>(
    py: Python<'py>,
    stage: &mut S,
    reader: &Bound<'py, PyAny>,
    at_least: usize,
    max_bytes: usize,
) -> PyResult<Option<Bound<'py, PyList>>> {
    let reader = reader.cast::<PyCaptureReader>()?;
    let mut reader = reader.try_borrow_mut()?;
    if reader.ended {
        return Ok(None);
    }
    let out = PyList::empty(py);
    let result = fill_batch(py, stage, &mut reader, (at_least, max_bytes), &out);
    let ended = stage.end_batch(py, &out, reader.ended || result.is_err());
    result.and(ended)?;
    Ok(Some(out))
}

fn fill_batch<S: FileStage>(
    py: Python<'_>,
    stage: &mut S,
    reader: &mut PyCaptureReader,
    (at_least, max_bytes): (usize, usize),
    out: &Bound<'_, PyList>,
) -> PyResult<()> {
    let mut read = 0;
    while !reader.finishing {
        if out.len() >= at_least || read >= max_bytes {
            return Ok(());
        }
        let packet = match reader.reader.next_packet() {
            Ok(Some(packet)) => packet,
            Ok(None) => break,
            Err(raised) => {
                reader.ended = true;
                return Err(python_error(raised.0));
            }
        };
        read += reader.reader.data(&packet).len();
        if let Some(segment) = packet_segment(&reader.reader, &packet, 0) {
            stage.feed_held(py, &segment)?;
        }
        if stage.held() > 0 {
            tell_notes(py, stage, reader, out)?;
            stage.release_into(py, out)?;
        }
    }
    // the end of the capture: the connections still open closed a few at a time, each batch about as large as
    // one of packets (tens of thousands open at the end would otherwise make all their records at once)
    reader.finishing = true;
    loop {
        let done = stage.finish_some_held(py, FINISH_STEP).inspect_err(|_| reader.ended = true)?;
        if stage.held() > 0 {
            tell_notes(py, stage, reader, out)?;
            stage.release_into(py, out)?;
        }
        if done {
            break;
        }
        if out.len() >= at_least {
            return Ok(());
        }
    }
    reader.ended = true;
    tell_notes(py, stage, reader, out)?;
    if let Some(what) = reader.reader.truncated.clone() {
        let params = PyDict::new(py);
        params.set_item("what", what)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("params", params)?;
        let event = stage
            .event_class()
            .bind(py)
            .call(("CAPTURE_TRUNCATED", stage.last_time(), stage.last_packet()), Some(&kwargs))?;
        stage.event_into(py, event, out)?;
    }
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCaptureReader>()?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add("CHUNK_SIZE", CHUNK_SIZE)?;
    m.add("MAX_RECORD_SIZE", engine::capture::MAX_RECORD_SIZE)?;
    m.add("SUPPORTED_LINKTYPES", engine::capture::SUPPORTED_LINKTYPES.to_vec())?;
    m.add(
        "LINKTYPE_NAMES",
        engine::capture::LINKTYPE_NAMES.iter().copied().collect::<std::collections::BTreeMap<i64, &str>>(),
    )?;
    Ok(())
}
