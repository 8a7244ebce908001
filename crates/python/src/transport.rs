//! The transport stages as a Python class: ``Dissector`` (the pipeline ``dissector.pipeline`` wraps).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use crate::capture::{index_segments, read_batch, selected_segments, FileStage, PyCaptureReader, Selection};
use crate::pipeline::{Classes, Made, OtherTraffic, Pipeline};
use crate::protocol::{Protocol, PythonDecoding};
use engine::budget::MemoryBudget;
use engine::pipeline::{DecodeSettings, PipelineSettings};
use engine::transport::net::{tcp_segment as parse_segment, Ip, Segment};
use engine::transport::reassembly::Config;

/// Bytes of a ``bytes`` object without a copy, or of anything else with the buffer protocol.
fn with_bytes<R>(data: &Bound<'_, PyAny>, f: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(f(b.as_bytes()));
    }
    let copy = data.py().get_type::<PyBytes>().call1((data,))?;
    let b = copy.cast::<PyBytes>()?;
    Ok(f(b.as_bytes()))
}

fn ip(text: &str) -> PyResult<Ip> {
    Ip::parse(text).ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("not an IP address: {text:?}")))
}

fn reassembly_config(options: &Bound<'_, PyAny>, budget: &MemoryBudget) -> PyResult<Config> {
    Ok(Config {
        max_buffered: options.getattr("max_buffered_per_direction")?.extract()?,
        max_buffered_total: options.getattr("max_buffered_total")?.extract()?,
        ooo_wait_packets: options.getattr("ooo_wait_packets")?.extract()?,
        hole_timeout: options.getattr("hole_timeout")?.extract()?,
        close_wait_packets: options.getattr("close_wait_packets")?.extract()?,
        max_connections: options.getattr("max_connections")?.extract()?,
        budget: budget.clone(),
        ..Config::default()
    })
}

/// The pipeline for ``options`` (a ``dissector.options.Options``) and ``protocols`` (the ``ProtocolSpec``s to
/// look for, in order), building ``classes``; its out-of-order bytes reserved from ``budget``, the run's.
pub fn pipeline(
    py: Python<'_>,
    options: &Bound<'_, PyAny>,
    protocols: &Bound<'_, PyAny>,
    classes: Classes,
    budget: &MemoryBudget,
) -> PyResult<Pipeline> {
    let python = || PythonDecoding {
        options: options.clone().unbind(),
        decoded_class: classes.decoded.clone_ref(py),
        finding_class: classes.finding.clone_ref(py),
    };
    let protocols: Vec<Protocol> =
        protocols.try_iter()?.map(|p| Protocol::from_spec(py, &p?, python())).collect::<PyResult<_>>()?;
    if protocols.is_empty() {
        return Err(pyo3::exceptions::PyValueError::new_err("no protocol to look for"));
    }
    let settings = PipelineSettings {
        detect: options.getattr("detect")?.extract()?,
        detect_budget: options.getattr("detect_budget")?.extract()?,
        max_frame_size: options.getattr("max_frame_size")?.extract()?,
        keep_frame_bytes: options.getattr("keep_frame_bytes")?.extract()?,
        // an int: the first protocol's port; (protocol, role or None, port): another's
        extra_ports: options
            .getattr("ports")?
            .try_iter()?
            .map(|p| {
                let p = p?;
                match p.extract::<u16>() {
                    Ok(port) => Ok((port, None)),
                    Err(_) => {
                        let (name, role, port): (String, Option<String>, u16) = p.extract()?;
                        Ok((port, Some((name, role))))
                    }
                }
            })
            .collect::<PyResult<_>>()?,
        reassembly: reassembly_config(options, budget)?,
        decode: DecodeSettings {
            caps: engine::protocols::DecodeCaps {
                max_decompressed: options.getattr("max_decompressed")?.extract()?,
                max_batch_entries: options.getattr("max_batch_entries")?.extract()?,
                max_repeated_elements: options.getattr("max_repeated_elements")?.extract()?,
            },
            depth: engine::protocols::Depth::brief(options.getattr("summary")?.extract()?),
        },
    };
    Ok(Pipeline::new(py, settings, classes, protocols))
}

/// One captured packet (the fields of a ``CapturedPacket``) through the pipeline: what it completes into `out`.
#[allow(clippy::too_many_arguments)]
pub fn feed_packet(
    py: Python<'_>,
    pipeline: &mut Pipeline,
    index: i64,
    timestamp: f64,
    linktype: u32,
    data: &Bound<'_, PyAny>,
    orig_len: usize,
    out: &mut Vec<Made>,
) -> PyResult<()> {
    with_segment(index, timestamp, linktype, data, orig_len, |seg| pipeline.feed_segment(py, seg, out))
}

/// `feed` of a captured packet's TCP segment (the fields of a ``CapturedPacket``), if it carries one.
pub fn with_segment(
    index: i64,
    timestamp: f64,
    linktype: u32,
    data: &Bound<'_, PyAny>,
    orig_len: usize,
    feed: impl FnOnce(&Segment) -> PyResult<()>,
) -> PyResult<()> {
    with_bytes(data, |bytes| match parse_segment(index, timestamp, linktype, bytes, orig_len) {
        Some(seg) => feed(&seg),
        None => Ok(()),
    })?
}

/// TCP off the protocols' ports: the busiest ``most`` server ports, as {port, connections, bytes}.
pub fn other_tcp_rows<'py>(py: Python<'py>, other: &OtherTraffic, most: usize) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (port, connections, bytes) in other.summary(most) {
        let row = PyDict::new(py);
        row.set_item("port", port)?;
        row.set_item("connections", connections)?;
        row.set_item("bytes", bytes)?;
        out.append(row)?;
    }
    Ok(out)
}

/// The pipeline: packets in, ``model.Frame`` and ``model.Event`` out, in capture order.
/// What a count (`count_selected`, `count_indexed`) found: a row per packet that completed frames or opened
/// connections (its number, the frames, the connections, its connection's `flow_key`), as int64 buffers.
#[derive(Default)]
struct CountedRows {
    packets: Vec<u8>,
    frames: Vec<u8>,
    opened: Vec<u8>,
    keys: Vec<u8>,
}

impl CountedRows {
    /// `segment` (of the connection `key`) through the counting pipeline (`set_count_only`), its row if it
    /// made one.
    fn count(
        &mut self,
        py: Python<'_>,
        inner: &mut Pipeline,
        held: &mut Vec<Made>,
        segment: &Segment<'_>,
        key: i64,
    ) -> PyResult<()> {
        let before = inner.numbering();
        inner.feed_segment(py, segment, held)?;
        held.clear();
        let after = inner.numbering();
        if after != before {
            self.packets.extend_from_slice(&segment.packet_index.to_le_bytes());
            self.frames.extend_from_slice(&((after.0 - before.0) as i64).to_le_bytes());
            self.opened.extend_from_slice(&((after.1 - before.1) as i64).to_le_bytes());
            self.keys.extend_from_slice(&key.to_le_bytes());
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn into_py(
        self,
        py: Python<'_>,
    ) -> (Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>, Bound<'_, PyBytes>) {
        let buffer = |bytes: &[u8]| PyBytes::new(py, bytes);
        (buffer(&self.packets), buffer(&self.frames), buffer(&self.opened), buffer(&self.keys))
    }
}

#[pyclass(unsendable, module = "dissector._core")]
pub struct Dissector {
    inner: Pipeline,
    held: Vec<Made>,
}

#[pymethods]
impl Dissector {
    /// ``options``: a ``dissector.options.Options``; ``protocols``: the ``ProtocolSpec``s to look for, in
    /// order; then the classes the pipeline builds (``Frame``, ``Event``, ``Decoded``, ``Finding``).
    #[new]
    fn new(
        py: Python<'_>,
        options: Bound<'_, PyAny>,
        protocols: Bound<'_, PyAny>,
        frame: Py<PyAny>,
        event: Py<PyAny>,
        decoded: Py<PyAny>,
        finding: Py<PyAny>,
    ) -> PyResult<Dissector> {
        let budget = MemoryBudget::new(options.getattr("memory_budget")?.extract()?);
        Ok(Dissector {
            inner: pipeline(py, &options, &protocols, Classes { frame, event, decoded, finding }, &budget)?,
            held: Vec::new(),
        })
    }

    /// One captured packet (the fields of a ``CapturedPacket``): the frames and events it completes.
    fn feed_packet<'py>(
        &mut self,
        py: Python<'py>,
        index: i64,
        timestamp: f64,
        linktype: u32,
        data: Bound<'py, PyAny>,
        orig_len: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        feed_packet(py, &mut self.inner, index, timestamp, linktype, &data, orig_len, &mut out)?;
        self.inner.made_to_py(py, out)
    }

    /// One captured packet, what it completes held until ``release`` (so a file reader's notes can go before
    /// it): returns how many items are held.
    fn hold_packet(
        &mut self,
        py: Python<'_>,
        index: i64,
        timestamp: f64,
        linktype: u32,
        data: Bound<'_, PyAny>,
        orig_len: usize,
    ) -> PyResult<usize> {
        feed_packet(py, &mut self.inner, index, timestamp, linktype, &data, orig_len, &mut self.held)?;
        Ok(self.held.len())
    }

    /// End of the capture, what it leaves held until ``release``: returns how many items are held.
    fn hold_finish(&mut self, py: Python<'_>) -> PyResult<usize> {
        self.inner.finish(py, &mut self.held)?;
        Ok(self.held.len())
    }

    /// The held items.
    fn release<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.inner.made_to_py(py, std::mem::take(&mut self.held))
    }

    /// Packets of a ``CaptureReader`` (the core's) until at least ``at_least`` items are made, packets of
    /// ``max_bytes`` are read or the capture ends: the frames and events, the reader's notes where they were found (``capture.files``); None once
    /// the capture was read whole.
    fn read_capture<'py>(
        &mut self,
        py: Python<'py>,
        reader: Bound<'py, PyAny>,
        at_least: usize,
        max_bytes: usize,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        read_batch(py, self, &reader, at_least, max_bytes)
    }

    /// One TCP segment (the fields of a ``netlayers.TcpSegment``).
    #[allow(clippy::too_many_arguments)]
    fn feed_segment<'py>(
        &mut self,
        py: Python<'py>,
        packet_index: i64,
        timestamp: f64,
        src_ip: &str,
        src_port: u16,
        dst_ip: &str,
        dst_port: u16,
        seq: u32,
        ack: u32,
        flags: u16,
        window: u16,
        payload: Bound<'py, PyAny>,
        missing_tail: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        let (src, dst) = (ip(src_ip)?, ip(dst_ip)?);
        with_bytes(&payload, |payload| {
            let seg = Segment {
                packet_index,
                timestamp,
                src,
                src_port,
                dst,
                dst_port,
                seq,
                ack,
                flags,
                window,
                payload,
                missing_tail,
            };
            self.inner.feed_segment(py, &seg, &mut out)
        })??;
        self.inner.made_to_py(py, out)
    }

    /// The clock moved to ``now``: the time-based expiries, without waiting for the next packet.
    fn tick<'py>(&mut self, py: Python<'py>, now: f64) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.inner.tick(py, now, &mut out)?;
        self.inner.made_to_py(py, out)
    }

    /// End of the capture: every connection closed, what the streams left over.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let mut out = Vec::new();
        self.inner.finish(py, &mut out)?;
        self.inner.made_to_py(py, out)
    }

    /// The packets of `flows` (`flow_key`s) in a file of a larger input (`reader`, a ``CaptureReader``; its
    /// packets numbered from `offset` + 1), for their numbers only: the packets that complete frames or open
    /// connections, as little-endian int64 buffers (packet numbers, frames, connections opened, the packet's
    /// connection's `flow_key`: a count of several partitions' connections at once is shared out by it).
    #[allow(clippy::type_complexity)]
    fn count_selected<'py>(
        &mut self,
        py: Python<'py>,
        reader: Bound<'py, PyAny>,
        flows: std::collections::HashSet<i64>,
        offset: i64,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let selection = Selection { flows, offset };
        let mut rows = CountedRows::default();
        let (inner, held) = (&mut self.inner, &mut self.held);
        inner.set_count_only(true);
        let counted = selected_segments(&reader, &selection, |segment, key| {
            rows.count(py, inner, held, segment, key)?;
            Ok(true)
        });
        inner.set_count_only(false);
        counted?;
        Ok(rows.into_py(py))
    }

    /// A file of a larger input (`reader`) read once for its index and its numbers (the `pipeline`'s prepass:
    /// `dissector/spark/prepass.py`): `CaptureReader.flow_index(ports)`'s index, every connection it indexes
    /// counted as `count_selected` counts them (its packets numbered from `offset` + 1).
    #[allow(clippy::type_complexity)]
    fn count_indexed<'py>(
        &mut self,
        py: Python<'py>,
        reader: Bound<'py, PyAny>,
        ports: Option<std::collections::HashSet<u16>>,
        offset: i64,
    ) -> PyResult<(
        ((Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>), u64, Option<f64>, Option<String>),
        (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>),
    )> {
        let reader = reader.cast::<PyCaptureReader>()?;
        let mut reader = reader.try_borrow_mut()?;
        let mut rows = CountedRows::default();
        let (inner, held) = (&mut self.inner, &mut self.held);
        inner.set_count_only(true);
        let indexed = index_segments(py, &mut reader, ports.as_ref(), offset, |segment, key| {
            rows.count(py, inner, held, segment, key)
        });
        inner.set_count_only(false);
        Ok((indexed?.into_py(py), rows.into_py(py)))
    }

    /// End of the capture, for its numbers only: the frames it completes on each connection, in the order
    /// they come, as (conn, frames).
    fn count_finish(&mut self, py: Python<'_>) -> PyResult<Vec<(u64, u64)>> {
        self.inner.finish(py, &mut self.held)?;
        let mut counts: Vec<(u64, u64)> = Vec::new();
        for made in self.held.drain(..) {
            let conn = match &made {
                Made::Frame(place, _) => place.conn,
                Made::PyFrame(frame) => frame.bind(py).getattr("conn")?.extract()?,
                Made::Note(_) => continue,
            };
            match counts.last_mut() {
                Some((last, n)) if *last == conn => *n += 1,
                _ => counts.push((conn, 1)),
            }
        }
        Ok(counts)
    }

    /// (frames numbered so far, the id of the next connection): a distributed run sets them through `plan_numbering`.
    #[getter]
    fn numbering(&self) -> (u64, u64) {
        self.inner.numbering()
    }

    /// Number the frames the end of the capture leaves on connection `conn` from `base` + 1.
    fn set_finish_base(&mut self, conn: u64, base: u64) {
        self.inner.set_finish_base(conn, base);
    }

    #[getter]
    fn last_time(&self) -> f64 {
        self.inner.last_time()
    }

    #[getter]
    fn last_packet(&self) -> i64 {
        self.inner.last_packet()
    }

    /// TCP off the protocols' ports: the busiest ``most`` server ports, as {port, connections, bytes}.
    fn other_tcp<'py>(&self, py: Python<'py>, most: usize) -> PyResult<Bound<'py, PyList>> {
        other_tcp_rows(py, self.inner.other(), most)
    }
}

impl FileStage for Dissector {
    fn feed_held(&mut self, py: Python<'_>, segment: &Segment) -> PyResult<()> {
        self.inner.feed_segment(py, segment, &mut self.held)
    }

    fn finish_held(&mut self, py: Python<'_>) -> PyResult<()> {
        self.inner.finish(py, &mut self.held)
    }

    fn finish_some_held(&mut self, py: Python<'_>, most: usize) -> PyResult<bool> {
        self.inner.finish_some(py, &mut self.held, most)
    }

    fn held(&self) -> usize {
        self.held.len()
    }

    fn release_into(&mut self, py: Python<'_>, out: &Bound<'_, PyList>) -> PyResult<()> {
        self.inner.made_into(py, self.held.drain(..), out)
    }

    fn event_into(&mut self, _py: Python<'_>, event: Bound<'_, PyAny>, out: &Bound<'_, PyList>) -> PyResult<()> {
        out.append(event)
    }

    fn end_batch(&mut self, _py: Python<'_>, _out: &Bound<'_, PyList>, _last: bool) -> PyResult<()> {
        Ok(())
    }

    fn last_time(&self) -> f64 {
        self.inner.last_time()
    }

    fn last_packet(&self) -> i64 {
        self.inner.last_packet()
    }

    fn event_class(&self) -> &Py<PyAny> {
        self.inner.event_class()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Dissector>()?;
    Ok(())
}
