//! The engine's stages (`engine::pipeline`) with Python on both ends: protocols that may be declared in
//! Python go in, and what comes out becomes the Python ``model.Event`` values and, when something asks for
//! one, ``model.Frame`` values. The stages themselves are the engine's; this adapter only converts.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use crate::convert::map_to_py;
use crate::protocol::{Protocol, PyDecoded};
use engine::model::Decoded;
use engine::pipeline::{self, PipelineSettings, StreamNote};
use engine::protocols::Depth;
use engine::transport::net::Segment;
use engine::FastMap;

pub use engine::pipeline::OtherTraffic;

/// What the pipeline makes, in capture order: Python events, and frames — as the engine's Rust data (turned
/// into a Python ``model.Frame`` only when something asks for one: the analysis reads the Rust data, and a
/// record can be written from it), or as the Python frame of a protocol declared in Python.
#[allow(clippy::large_enum_variant)] // held for one packet's items at most: boxing would allocate per frame
pub enum Made {
    /// A stream's note, as the engine's plain data (the analysis reads it so; a `model.Event` is made of it
    /// only where one comes out: `note_to_py`).
    Note(StreamNote),
    Frame(FramePlace, Decoded),
    PyFrame(Py<PyAny>),
}

/// Where a frame was: the fields of ``model.Frame`` but its decoded PDU, the texts as shared Python strings
/// and as the engine's shared text (`route`: protocol, src, dst, direction).
pub struct FramePlace {
    pub index: u64,
    pub protocol: Py<PyString>,
    pub conn: u64,
    pub src: Py<PyString>,
    pub dst: Py<PyString>,
    pub direction: Py<PyString>,
    pub time: f64,
    pub first_time: f64,
    pub packet: i64,
    pub first_packet: i64,
    pub offset: i64,
    /// The PDU's bytes, with ``Options.keep_frame_bytes``.
    pub data: Option<Py<PyBytes>>,
    pub route: [Arc<str>; 4],
}

impl FramePlace {
    /// The ``model.Frame`` (``frame_class``) of this place and a Python ``Decoded``.
    pub fn to_py<'py>(
        &self,
        py: Python<'py>,
        frame_class: &Py<PyAny>,
        pdu: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = PyTuple::new(
            py,
            [
                self.index.into_pyobject(py)?.into_any(),
                self.protocol.bind(py).clone().into_any(),
                self.conn.into_pyobject(py)?.into_any(),
                self.src.bind(py).clone().into_any(),
                self.dst.bind(py).clone().into_any(),
                self.direction.bind(py).clone().into_any(),
                self.time.into_pyobject(py)?.into_any(),
                self.first_time.into_pyobject(py)?.into_any(),
                self.packet.into_pyobject(py)?.into_any(),
                self.first_packet.into_pyobject(py)?.into_any(),
                self.offset.into_pyobject(py)?.into_any(),
                pdu,
                match &self.data {
                    Some(d) => d.bind(py).clone().into_any(),
                    None => py.None().into_bound(py),
                },
            ],
        )?;
        frame_class.bind(py).call1(args)
    }

    /// The ``model.Frame`` of a frame the engine decoded.
    pub fn frame_to_py<'py>(
        &self,
        py: Python<'py>,
        frame_class: &Py<PyAny>,
        pdu: &Decoded,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.to_py(py, frame_class, crate::decoded_to_py(py, pdu)?)
    }
}

/// A stream's note as a ``model.Event`` (``event_class``).
pub fn note_to_py<'py>(py: Python<'py>, event_class: &Py<PyAny>, note: &StreamNote) -> PyResult<Bound<'py, PyAny>> {
    let details = map_to_py(py, &note.details)?;
    let params = map_to_py(py, &note.params)?;
    let event = event_class.bind(py);
    match &note.at {
        Some(at) => event.call1((
            note.kind.as_str(),
            note.time,
            note.packet,
            note.conn,
            &*at.src,
            &*at.dst,
            &*at.direction,
            at.offset,
            at.length,
            details,
            params,
        )),
        None => event.call1((
            note.kind.as_str(),
            note.time,
            note.packet,
            note.conn,
            py.None(),
            py.None(),
            py.None(),
            py.None(),
            py.None(),
            details,
            params,
        )),
    }
}

/// The Python classes the pipeline builds.
pub struct Classes {
    pub frame: Py<PyAny>,
    pub event: Py<PyAny>,
    pub decoded: Py<PyAny>,
    pub finding: Py<PyAny>,
}

/// The engine's shared texts as Python strings, each converted once. Keyed by the text's address, which the
/// map keeps alive (it holds the text) so that no other text can take it.
#[derive(Default)]
struct PyTexts {
    known: FastMap<usize, (Arc<str>, Py<PyString>)>,
}

const PY_TEXTS: usize = 4096; // texts kept at most (then converted afresh)

impl PyTexts {
    fn get(&mut self, py: Python<'_>, text: &Arc<str>) -> Py<PyString> {
        let address = Arc::as_ptr(text) as *const u8 as usize;
        if let Some((_, object)) = self.known.get(&address) {
            return object.clone_ref(py);
        }
        if self.known.len() >= PY_TEXTS {
            self.known.clear();
        }
        let object = PyString::new(py, text).unbind();
        self.known.insert(address, (Arc::clone(text), object.clone_ref(py)));
        object
    }
}

/// The engine's stages over protocols set up from Python, making Python values.
pub struct Pipeline {
    inner: pipeline::Pipeline<Protocol>,
    frames: PyFrames,
    made: Vec<pipeline::Made<PyDecoded>>,
}

/// What the stages make as Python values: the classes built, each protocol's name as a Python string, the
/// shared texts converted once.
pub struct PyFrames {
    classes: Classes,
    names: Vec<Py<PyString>>,
    texts: PyTexts,
}

impl PyFrames {
    pub fn new(py: Python<'_>, classes: Classes, protocols: &[Protocol]) -> PyFrames {
        let names = protocols.iter().map(|p| p.name.clone_ref(py)).collect();
        PyFrames { classes, names, texts: PyTexts::default() }
    }

    pub fn classes(&self) -> &Classes {
        &self.classes
    }

    /// Where `protocol`'s frame was (`place`), its texts as Python strings.
    pub fn place(&mut self, py: Python<'_>, protocol: &Protocol, place: &pipeline::Place) -> FramePlace {
        let name = Arc::clone(engine::pipeline::StreamProtocol::name(protocol));
        FramePlace {
            index: place.index,
            protocol: self.names[place.protocol].clone_ref(py),
            conn: place.conn,
            src: self.texts.get(py, &place.src),
            dst: self.texts.get(py, &place.dst),
            direction: self.texts.get(py, &place.direction),
            time: place.time,
            first_time: place.first_time,
            packet: place.packet,
            first_packet: place.first_packet,
            offset: place.offset,
            data: place.data.as_ref().map(|data| PyBytes::new(py, data).unbind()),
            route: [name, Arc::clone(&place.src), Arc::clone(&place.dst), Arc::clone(&place.direction)],
        }
    }
}

/// Keep batches whole, to be split where their records are written (`Depth::BatchesLater`); a brief decode
/// keeps them so anyway.
pub fn set_batches_later(stages: &mut pipeline::Pipeline<Protocol>, later: bool) {
    let decode = stages.decode_settings();
    decode.depth = match (decode.depth, later) {
        (Depth::Brief, _) => Depth::Brief,
        (_, true) => Depth::BatchesLater,
        (_, false) => Depth::Full,
    };
}

impl Pipeline {
    pub fn new(py: Python<'_>, settings: PipelineSettings, classes: Classes, protocols: Vec<Protocol>) -> Pipeline {
        let frames = PyFrames::new(py, classes, &protocols);
        Pipeline { inner: pipeline::Pipeline::new(settings, protocols), frames, made: Vec::new() }
    }

    /// The engine's stages and what makes their output Python values, apart (for a caller that drives the
    /// stages itself: `AnalysedDissector`, through the engine's composition).
    pub fn into_parts(self) -> (pipeline::Pipeline<Protocol>, PyFrames) {
        (self.inner, self.frames)
    }

    /// The ``model.Event`` class it builds.
    pub fn event_class(&self) -> &Py<PyAny> {
        &self.frames.classes.event
    }

    pub fn other(&self) -> &OtherTraffic {
        &self.inner.other
    }

    /// Frames only counted, not decoded (`pipeline`'s first pass).
    pub fn set_count_only(&mut self, count_only: bool) {
        self.inner.count_only = count_only;
    }

    pub fn last_time(&self) -> f64 {
        self.inner.last_time
    }

    pub fn last_packet(&self) -> i64 {
        self.inner.last_packet
    }

    /// (frames numbered so far, the id of the next connection): see `engine::pipeline::Pipeline::numbering`.
    pub fn numbering(&self) -> (u64, u64) {
        self.inner.numbering()
    }

    pub fn set_finish_base(&mut self, conn: u64, base: u64) {
        self.inner.set_finish_base(conn, base)
    }

    pub fn feed_segment(&mut self, py: Python<'_>, seg: &Segment, out: &mut Vec<Made>) -> PyResult<()> {
        let result = self.inner.feed_segment(seg, &mut self.made);
        self.convert(py, out)?;
        result
    }

    /// The clock moved to ``now``: apply the time-based expiries without waiting for the next packet.
    pub fn tick(&mut self, py: Python<'_>, now: f64, out: &mut Vec<Made>) -> PyResult<()> {
        let result = self.inner.tick(now, &mut self.made);
        self.convert(py, out)?;
        result
    }

    pub fn finish(&mut self, py: Python<'_>, out: &mut Vec<Made>) -> PyResult<()> {
        while !self.finish_some(py, out, usize::MAX)? {}
        Ok(())
    }

    /// ``finish`` for at most ``most`` connections: true once the end of the capture is all told.
    pub fn finish_some(&mut self, py: Python<'_>, out: &mut Vec<Made>, most: usize) -> PyResult<bool> {
        let result = self.inner.finish_some(&mut self.made, most);
        self.convert(py, out)?;
        result
    }

    /// What the stages made (before an error, if one stopped them), as Python values.
    fn convert(&mut self, py: Python<'_>, out: &mut Vec<Made>) -> PyResult<()> {
        let mut made = std::mem::take(&mut self.made);
        let mut result = Ok(());
        for item in made.drain(..) {
            if result.is_err() {
                continue;
            }
            let converted = match item {
                pipeline::Made::Note(note) => Ok(Made::Note(note)),
                pipeline::Made::Frame(place, pdu) => self.frame(py, place, pdu),
            };
            match converted {
                Ok(item) => out.push(item),
                Err(error) => result = Err(error),
            }
        }
        self.made = made;
        result
    }

    fn frame(&mut self, py: Python<'_>, place: pipeline::Place, pdu: PyDecoded) -> PyResult<Made> {
        let frame = self.frames.place(py, &self.inner.protocols()[place.protocol], &place);
        Ok(match pdu {
            PyDecoded::Core(decoded) => Made::Frame(frame, decoded),
            PyDecoded::Python(object) => {
                Made::PyFrame(frame.to_py(py, &self.frames.classes.frame, object.into_bound(py))?.unbind())
            }
        })
    }

    /// The Python objects of what the pipeline made, for callers that want only those.
    pub fn made_to_py<'py>(&self, py: Python<'py>, made: Vec<Made>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        self.made_into(py, made, &out)?;
        Ok(out)
    }

    /// The same, appended to `out`.
    pub fn made_into(
        &self,
        py: Python<'_>,
        made: impl IntoIterator<Item = Made>,
        out: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        for m in made {
            match m {
                Made::Note(note) => out.append(note_to_py(py, &self.frames.classes.event, &note)?)?,
                Made::PyFrame(object) => out.append(object)?,
                Made::Frame(place, pdu) => out.append(place.frame_to_py(py, &self.frames.classes.frame, &pdu)?)?,
            }
        }
        Ok(())
    }
}
