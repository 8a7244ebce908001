//! The statistics for Python: `StatsCore` gathers records (dicts, or the analysis' frames and events through
//! the engine's `CountedStatistics` sink, `sinks/counted.rs`), `state()` reads its figures out as plain data;
//! `Latencies` is the same bounded latency sample for other Python code (`check`'s latency rule).

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::convert::{map_to_py, value_from_py, StrToPy, ValueToPy};
use crate::records::{py_error, FindingTexts};
use engine::records::RecordStyle;
use engine::sinks::counted::{lock, CountedStatistics};
use engine::stats::sample;
use engine::stats::{Actor, Counts, LatencyTable, Stats, COMMAND_KEYS, MESSAGE_KEYS, READ_KEYS};
use engine::value::{Map, Name, Text, Value};

/// (count, total, max, sample, cap): what `dissector/output/stats.py: latency_summary` makes figures of.
fn latencies_to_py<'py>(py: Python<'py>, lat: &sample::Latencies) -> PyResult<Bound<'py, PyTuple>> {
    (lat.sample.seen, lat.total, lat.max, PyList::new(py, &lat.sample.items)?, lat.sample.cap).into_pyobject(py)
}

fn counts_to_py<'py>(py: Python<'py>, counts: &Counts<String>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, n) in &counts.entries {
        dict.set_item(key, n)?;
    }
    Ok(dict)
}

fn latency_table_to_py<'py>(py: Python<'py>, table: &LatencyTable) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (kind, lat) in &table.entries {
        dict.set_item(kind, latencies_to_py(py, lat)?)?;
    }
    Ok(dict)
}

fn actor_to_py<'py>(py: Python<'py>, conn: i64, a: &Actor) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("conn", conn)?;
    d.set_item("info", map_to_py(py, &a.info)?)?;
    for (key, value) in [
        ("frames", a.frames),
        ("messages", a.messages),
        ("payload_bytes", a.payload_bytes),
        ("wire_bytes", a.wire_bytes),
        ("receipts", a.receipts),
        ("batches", a.batches),
        ("batched_messages", a.batched_messages),
        ("accepted", a.accepted),
        ("rejected", a.rejected),
        ("unanswered", a.unanswered()),
        ("compressed_wire", a.compressed_wire),
        ("compressed_plain", a.compressed_plain),
        ("acks", a.acks),
        ("permits", a.permits),
        ("redeliveries", a.redeliveries),
        ("distinct", a.distinct),
        ("acked", a.acked),
        ("discarded", a.discarded),
    ] {
        d.set_item(key, value)?;
    }
    match &a.send_latency {
        Some(lat) => d.set_item("send_latency", latencies_to_py(py, lat)?)?,
        None => d.set_item("send_latency", py.None())?,
    }
    match &a.send_error_latency {
        Some(lat) => d.set_item("send_error_latency", latencies_to_py(py, lat)?)?,
        None => d.set_item("send_error_latency", py.None())?,
    }
    d.set_item("compression", counts_to_py(py, &a.compression)?)?;
    d.set_item("errors", counts_to_py(py, &a.errors)?)?;
    // what compressed chunked messages wait for their last chunk (oldest first), for tests of the bound
    d.set_item("chunks_pending", a.pending_chunks().collect::<Vec<_>>())?;
    d.set_item("chunk_frames_pending", a.chunk_frames_pending)?;
    Ok(d)
}

fn pick(dict: &Bound<'_, PyDict>, keys: &'static [Name], map: &mut Map) -> PyResult<()> {
    let py = dict.py();
    for key in keys {
        if let Some(value) = dict.get_item(key.to_py(py))? {
            map.push((Text::Name(key), value_from_py(&value)?));
        }
    }
    Ok(())
}

fn read_record(dict: &Bound<'_, PyDict>) -> PyResult<Map> {
    let mut map = Map::with_capacity(16);
    pick(dict, &READ_KEYS[..READ_KEYS.len() - 2], &mut map)?; // the command and the messages: below
    if let Some(command) = dict.get_item(engine::name!("command").to_py(dict.py()))? {
        let mut picked = Map::new();
        if let Ok(command) = command.cast::<PyDict>() {
            pick(command, &COMMAND_KEYS, &mut picked)?;
        }
        map.push((Text::Name(engine::name!("command")), Value::Map(picked)));
    }
    if let Some(messages) = dict.get_item(engine::name!("messages").to_py(dict.py()))? {
        let mut picked = Vec::new();
        if let Ok(messages) = messages.cast::<PyList>() {
            for message in messages.iter() {
                let mut one = Map::new();
                if let Ok(message) = message.cast::<PyDict>() {
                    pick(message, &MESSAGE_KEYS, &mut one)?;
                }
                picked.push(Value::Map(one));
            }
        }
        map.push((Text::Name(engine::name!("messages")), Value::List(picked)));
    }
    Ok(map)
}

/// The statistics, counted in place, or through the engine's sink once the analysis started one
/// (`start_counting`: on a thread of its own, or in place): every read waits until everything handed over is
/// counted.
#[pyclass(unsendable, module = "dissector._core")]
pub struct StatsCore {
    stats: Arc<Mutex<Stats>>,
    counted: Option<CountedStatistics<FindingTexts>>,
}

impl StatsCore {
    /// The analysis' records counted through the engine's sink from now on (the first analysis' sink serves the
    /// next ones), made in `style` with `texts`; `budget` bytes of frames out at most, 0: counted in place.
    pub fn start_counting(&mut self, texts: FindingTexts, style: RecordStyle, budget: usize) {
        if self.counted.is_none() {
            self.counted = Some(CountedStatistics::sharing(texts, Arc::clone(&self.stats), style, budget));
        }
    }

    /// The sink the analysis' items go to (after `start_counting`).
    pub fn counted(&mut self) -> PyResult<&mut CountedStatistics<FindingTexts>> {
        self.counted.as_mut().ok_or_else(|| PyRuntimeError::new_err("the statistics' sink was not started"))
    }

    /// A record (an event's, a frame's), after everything before it.
    pub fn add_record(&mut self, record: Map) -> PyResult<()> {
        match &mut self.counted {
            Some(counted) => counted.add_record(record).map_err(py_error),
            None => {
                lock(&self.stats).add(&record);
                Ok(())
            }
        }
    }

    /// The statistics, everything handed over counted.
    fn settled(&mut self) -> PyResult<MutexGuard<'_, Stats>> {
        if let Some(counted) = &mut self.counted {
            counted.settle().map_err(py_error)?;
        }
        Ok(lock(&self.stats))
    }

    /// The frames whose records the sink counted, and their problems (everything handed over counted).
    pub fn fed(&mut self) -> PyResult<(u64, u64)> {
        match &mut self.counted {
            Some(counted) => counted.settle().map_err(py_error),
            None => Ok((0, 0)),
        }
    }
}

#[pymethods]
impl StatsCore {
    #[new]
    #[pyo3(signature = (latency_samples, plot_samples, actor_memory, chunk_memory, actor_latency_samples=None,
                        memory_total=None, max_connections=None))]
    fn new(
        latency_samples: usize,
        plot_samples: usize,
        actor_memory: usize,
        chunk_memory: usize,
        actor_latency_samples: Option<usize>,
        memory_total: Option<usize>,
        max_connections: Option<usize>,
    ) -> StatsCore {
        let mut stats = Stats::new(latency_samples, plot_samples, actor_memory, chunk_memory);
        stats.actor_latency_samples = actor_latency_samples.unwrap_or(latency_samples);
        stats.memory_total = memory_total.unwrap_or(usize::MAX);
        stats.max_connections = max_connections.unwrap_or(usize::MAX);
        StatsCore { stats: Arc::new(Mutex::new(stats)), counted: None }
    }

    /// One record of the JSON contract (a dict).
    fn add(&mut self, record: &Bound<'_, PyAny>) -> PyResult<()> {
        self.add_record(read_record(record.cast::<PyDict>()?)?)
    }

    /// The figures as plain data (see `dissector/output/stats.py: StatsCollector.result`).
    fn state<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &*self.settled()?;
        let out = PyDict::new(py);
        out.set_item("frames", s.frames)?;
        out.set_item("first_time", s.first_time)?;
        out.set_item("last_time", s.last_time)?;
        out.set_item("types", counts_to_py(py, &s.types)?)?;
        let conns = PyList::empty(py);
        for c in s.conns.values() {
            let d = PyDict::new(py);
            d.set_item("conn", c.conn)?;
            d.set_item("client", c.client.to_py(py)?)?;
            d.set_item("broker", c.broker.to_py(py)?)?;
            d.set_item("first_time", c.first_time)?;
            d.set_item("last_time", c.last_time)?;
            for (i, side) in ["to_broker", "to_client", "unknown_direction"].iter().enumerate() {
                d.set_item(format!("frames_{side}"), c.frames[i])?;
            }
            for (i, side) in ["to_broker", "to_client", "unknown_direction"].iter().enumerate() {
                d.set_item(format!("bytes_{side}"), c.bytes[i])?;
            }
            d.set_item("problems", c.problems)?;
            for (key, value) in &c.extra {
                d.set_item(key.as_str(), value.to_py(py)?)?;
            }
            d.set_item("events", counts_to_py(py, &c.events)?)?;
            d.set_item("latency", latency_table_to_py(py, &c.latency)?)?;
            conns.append(d)?;
        }
        let clients = PyList::empty(py);
        for (client_id, c) in s.clients.iter() {
            let d = PyDict::new(py);
            d.set_item("client_id", client_id)?;
            d.set_item("group", c.group.as_ref().map(|g| g.to_py(py)).transpose()?)?;
            d.set_item("frames", c.frames)?;
            d.set_item("messages_sent", c.messages_sent)?;
            d.set_item("bytes_sent", c.bytes_sent)?;
            d.set_item("messages_received", c.messages_received)?;
            d.set_item("bytes_received", c.bytes_received)?;
            d.set_item("topics", c.topics.iter().collect::<Vec<_>>())?;
            d.set_item("errors", counts_to_py(py, &c.errors)?)?;
            clients.append(d)?;
        }
        out.set_item("clients", clients)?;
        out.set_item("clients_dropped", s.clients_dropped)?;
        out.set_item("connections_dropped", s.connections_dropped)?;
        out.set_item("connections", conns)?;
        let topics = PyDict::new(py);
        for (name, t) in &s.topics {
            let d = PyDict::new(py);
            d.set_item("messages_sent", t.messages_sent)?;
            d.set_item("bytes_sent", t.bytes_sent)?;
            d.set_item("messages_accepted", t.messages_accepted)?;
            d.set_item("messages_rejected", t.messages_rejected)?;
            d.set_item("messages_received", t.messages_received)?;
            d.set_item("bytes_received", t.bytes_received)?;
            d.set_item("producers", PyList::new(py, &t.producers)?)?;
            d.set_item("consumers", PyList::new(py, &t.consumers)?)?;
            topics.set_item(name, d)?;
        }
        out.set_item("topics", topics)?;
        let producers = PyList::empty(py);
        for ((conn, _), a) in s.producers.iter() {
            producers.append(actor_to_py(py, *conn, a)?)?;
        }
        out.set_item("producers", producers)?;
        let consumers = PyList::empty(py);
        for ((conn, _), a) in s.consumers.iter() {
            consumers.append(actor_to_py(py, *conn, a)?)?;
        }
        out.set_item("consumers", consumers)?;
        out.set_item("latency", latency_table_to_py(py, &s.latency)?)?;
        out.set_item("server_errors", counts_to_py(py, &s.server_errors)?)?;
        let expert = PyList::empty(py);
        for ((id, severity), n) in &s.expert.entries {
            expert.append(((id, severity), n))?;
        }
        out.set_item("expert", expert)?;
        out.set_item("events", counts_to_py(py, &s.events)?)?;
        Ok(out)
    }

    /// The first record's time: time 0 of the timeline and the plots.
    #[getter]
    fn origin(&mut self) -> PyResult<Option<f64>> {
        Ok(self.settled()?.origin)
    }

    /// (time, request type, ms, answered by an error) of the responses kept for plotting, in the sample's order.
    fn plot_points<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        PyList::new(py, &self.settled()?.plot.items)
    }

    /// Time bucket -> [messages to broker, bytes to broker, messages to client, bytes to client].
    fn throughput<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (slot, counts) in &self.settled()?.throughput {
            dict.set_item(slot, counts.to_vec())?;
        }
        Ok(dict)
    }

    #[getter]
    fn throughput_width(&mut self) -> PyResult<f64> {
        Ok(self.settled()?.throughput_width)
    }
}

/// A bounded latency sample for Python code (exact count, total and max; percentiles from the sample).
#[pyclass(unsendable, subclass, module = "dissector._core", name = "Latencies")]
pub struct PyLatencies {
    latencies: sample::Latencies,
}

#[pymethods]
impl PyLatencies {
    #[new]
    #[pyo3(signature = (cap=100_000))]
    fn new(cap: usize) -> PyLatencies {
        PyLatencies { latencies: sample::Latencies::new(cap) }
    }

    fn add(&mut self, value: f64) {
        self.latencies.add(value);
    }

    #[getter]
    fn count(&self) -> u64 {
        self.latencies.sample.seen
    }

    /// The sampled values, in the sample's order.
    #[getter]
    fn items(&self) -> Vec<f64> {
        self.latencies.sample.items.clone()
    }

    /// (count, total, max, sample, cap), as `StatsCore.state` gives them.
    fn figures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        latencies_to_py(py, &self.latencies)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<StatsCore>()?;
    m.add_class::<PyLatencies>()?;
    Ok(())
}
