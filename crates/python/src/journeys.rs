//! A protocol's message journeys for Python (`dissector/analysis/journeys.py: JourneyTracker`), reached by the
//! protocol's name through the engine's registry (`Protocol::journeys`, the generic `engine::journeys`): the
//! tracker reads each record's few scalars and calls a method per frame (no dict crosses); each journey
//! closed comes back through `on_close` as plain tuples, the shapes `Journey` keeps (SEND_FIELDS,
//! RECEIPT_FIELDS, DELIVERY_FIELDS, ACK_FIELDS), so its `summary()` reads them as it always did.

use engine::journeys::{AckFields, ClosedJourney, JourneySend, JourneyTracker, MessageFields, ReceiptInfo, SendFields};
use engine::protocols;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use pyo3::IntoPyObjectExt;

/// The open journeys of a capture, in the engine (the store of the protocol named). `on_close(seq, topic,
/// ledger, entry, send, receipt, deliveries, acks, deliveries_dropped, acks_dropped)` is called once per
/// journey closed (the oldest first; it must not call the store); `acked_entries(words, width)` makes the
/// object a batch-index ack's entries are (`in` tells whether it covers one).
#[pyclass(unsendable, module = "dissector._core")]
pub struct JourneyStore {
    store: Box<dyn JourneyTracker>,
    on_close: Py<PyAny>,
    acked_entries: Py<PyAny>,
}

/// A frame index or an id as the records hold it: an int in range, else nothing (the Python tracker skipped
/// what was not an int).
fn index_of(obj: &Bound<'_, PyAny>) -> Option<u64> {
    obj.extract::<u64>().ok().filter(|&i| i < 1 << 63)
}

fn indexes_of(list: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u64>> {
    let Some(list) = list.filter(|l| !l.is_none()) else { return Ok(Vec::new()) };
    list.try_iter()?.filter_map(|item| item.map(|i| index_of(&i)).transpose()).collect()
}

fn send_tuple<'py>(py: Python<'py>, send: &JourneySend) -> PyResult<Bound<'py, PyTuple>> {
    let fields = [
        send.index.into_bound_py_any(py)?,
        send.time.into_bound_py_any(py)?,
        send.conn.into_bound_py_any(py)?,
        send.producer.into_bound_py_any(py)?,
        send.producer_id.into_bound_py_any(py)?,
        send.sequence_id.into_bound_py_any(py)?,
        send.messages.into_bound_py_any(py)?,
        send.topic.into_bound_py_any(py)?,
    ];
    PyTuple::new(py, fields)
}

/// The journey as `on_close` takes it.
fn closed_args<'py>(
    py: Python<'py>,
    acked_entries: &Py<PyAny>,
    journey: &ClosedJourney,
) -> PyResult<Bound<'py, PyTuple>> {
    let head = &journey.head;
    let send = head.send.as_ref().map(|s| send_tuple(py, s)).transpose()?;
    let receipt = journey.receipt.map(|r| (r.index, r.time, r.conn));
    let topic = head.topic.into_bound_py_any(py)?; // a delivery's topic is its journey's
    let deliveries = journey
        .deliveries
        .iter()
        .map(|d| {
            let fields = [
                d.index.into_bound_py_any(py)?,
                d.time.into_bound_py_any(py)?,
                d.conn.into_bound_py_any(py)?,
                topic.clone(),
                d.consumer.into_bound_py_any(py)?,
                d.consumer_id.into_bound_py_any(py)?,
                d.subscription.into_bound_py_any(py)?,
                d.redelivery_count.into_bound_py_any(py)?,
            ];
            PyTuple::new(py, fields)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let acks = journey
        .acks
        .iter()
        .map(|a| {
            let batches = match &a.batches {
                Some(set) => acked_entries.bind(py).call1((PyTuple::new(py, set.words.iter())?, set.width))?,
                None => py.None().into_bound(py),
            };
            let fields = [
                a.index.into_bound_py_any(py)?,
                a.time.into_bound_py_any(py)?,
                a.conn.into_bound_py_any(py)?,
                a.ack_type.into_bound_py_any(py)?,
                a.delivery.into_bound_py_any(py)?,
                batches,
                a.discarded.into_bound_py_any(py)?,
            ];
            PyTuple::new(py, fields)
        })
        .collect::<PyResult<Vec<_>>>()?;
    // a journey without deliveries (or acks) has None there, as the Python tracker left it
    let listed = |items: Vec<Bound<'py, PyTuple>>| -> PyResult<Bound<'py, PyAny>> {
        if items.is_empty() {
            Ok(py.None().into_bound(py))
        } else {
            Ok(PyList::new(py, items)?.into_any())
        }
    };
    let args = [
        journey.seq.into_bound_py_any(py)?,
        topic,
        head.ledger.into_bound_py_any(py)?,
        head.entry.into_bound_py_any(py)?,
        send.into_bound_py_any(py)?,
        receipt.into_bound_py_any(py)?,
        listed(deliveries)?,
        listed(acks)?,
        journey.deliveries_dropped.into_bound_py_any(py)?,
        journey.acks_dropped.into_bound_py_any(py)?,
    ];
    PyTuple::new(py, args)
}

impl JourneyStore {
    /// Hands each journey closed to `on_close` (after the store freed it).
    fn hand_back(&mut self, py: Python<'_>) -> PyResult<()> {
        loop {
            let mut args = None;
            let acked_entries = &self.acked_entries;
            if !self.store.next_closed(&mut |journey| args = Some(closed_args(py, acked_entries, journey))) {
                return Ok(());
            }
            if let Some(args) = args {
                self.on_close.bind(py).call1(args?)?;
            }
        }
    }
}

#[pymethods]
impl JourneyStore {
    /// The store of `protocol`'s journeys (its name in the registry), with these caps (journeys open;
    /// deliveries and acks kept over all of them).
    #[new]
    fn new(
        protocol: &str,
        on_close: Py<PyAny>,
        acked_entries: Py<PyAny>,
        max_open: usize,
        max_milestones: usize,
    ) -> PyResult<Self> {
        let store = protocols::by_name(protocol)
            .ok_or_else(|| PyValueError::new_err(format!("no protocol {protocol:?} in the engine")))?
            .journeys(max_open, max_milestones)
            .ok_or_else(|| PyValueError::new_err(format!("protocol {protocol:?} keeps no message journeys")))?;
        Ok(JourneyStore { store, on_close, acked_entries })
    }

    /// A SEND (its info waits for the receipt that answers it).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (index, time, conn, producer, producer_id, sequence_id, messages, topic))]
    fn send(
        &mut self,
        index: u64,
        time: f64,
        conn: u32,
        producer: Option<&str>,
        producer_id: Option<u64>,
        sequence_id: Option<u64>,
        messages: i32,
        topic: Option<&str>,
    ) {
        self.store.send(SendFields { index, time, conn, producer, producer_id, sequence_id, messages, topic });
    }

    /// A SEND_RECEIPT: (seq of its journey, whether the SEND it answers joined it), or None without a message
    /// id (ledger None).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (answers, ledger, entry, topic, index, time, conn))]
    fn receipt(
        &mut self,
        py: Python<'_>,
        answers: &Bound<'_, PyAny>,
        ledger: Option<u64>,
        entry: Option<u64>,
        topic: Option<&str>,
        index: u64,
        time: f64,
        conn: u32,
    ) -> PyResult<Option<(u64, bool)>> {
        let ids = ledger.zip(entry);
        let done = self.store.receipt(index_of(answers), ids, topic, ReceiptInfo { index, time, conn });
        self.hand_back(py)?;
        Ok(done.map(|r| (r.seq, r.send_joined)))
    }

    /// A MESSAGE: the seq of its journey.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ledger, entry, topic, index, time, conn, consumer, consumer_id, subscription,
                        redelivery_count, batch_size))]
    fn message(
        &mut self,
        py: Python<'_>,
        ledger: u64,
        entry: u64,
        topic: Option<&str>,
        index: u64,
        time: f64,
        conn: u32,
        consumer: Option<&str>,
        consumer_id: Option<u64>,
        subscription: Option<&str>,
        redelivery_count: u32,
        batch_size: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let seq = self.store.message(MessageFields {
            ledger,
            entry,
            topic,
            index,
            time,
            conn,
            consumer,
            consumer_id,
            subscription,
            redelivery_count,
            batch_size: index_of(batch_size),
        });
        self.hand_back(py)?;
        Ok(seq)
    }

    /// An ACK: the seqs of the journeys it joined (one per delivery it acknowledges or discards).
    /// `ack_sets`: (ledger, entry, ack_set words as unsigned 64-bit) of its batch-index acks.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (index, time, conn, ack_type, ack_sets, acks, discards, discarded))]
    fn ack(
        &mut self,
        index: u64,
        time: f64,
        conn: u32,
        ack_type: Option<&str>,
        ack_sets: Option<Vec<(u64, u64, Vec<u64>)>>,
        acks: Option<&Bound<'_, PyAny>>,
        discards: Option<&Bound<'_, PyAny>>,
        discarded: Option<&str>,
    ) -> PyResult<Vec<u64>> {
        let fields = AckFields {
            index,
            time,
            conn,
            ack_type,
            ack_sets: ack_sets.unwrap_or_default(),
            acks: indexes_of(acks)?,
            discards: indexes_of(discards)?,
            discarded,
        };
        Ok(self.store.ack(&fields))
    }

    /// The seqs of the open journeys a REDELIVER_UNACKNOWLEDGED_MESSAGES names ((ledger, entry) on `topic`)
    /// or hands back (`redelivers`: MESSAGE frames).
    fn redelivered(
        &self,
        topic: Option<&str>,
        ids: Vec<(u64, u64)>,
        redelivers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<u64>> {
        Ok(self.store.redelivered(topic, &ids, &indexes_of(redelivers)?))
    }

    /// (topic, ledger, entry, send) of the open journey `seq` (what decides whether a journey is followed).
    #[allow(clippy::type_complexity)]
    fn peek<'py>(
        &self,
        py: Python<'py>,
        seq: u64,
    ) -> PyResult<Option<(Bound<'py, PyAny>, u64, u64, Bound<'py, PyAny>)>> {
        let Some(head) = self.store.head(seq) else { return Ok(None) };
        let send = head.send.as_ref().map(|s| send_tuple(py, s)).transpose()?.into_bound_py_any(py)?;
        Ok(Some((head.topic.into_bound_py_any(py)?, head.ledger, head.entry, send)))
    }

    /// Closes every open journey, oldest first.
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        while self.store.close_next() {
            self.hand_back(py)?;
        }
        Ok(())
    }

    /// Journeys closed because too many were open.
    #[getter]
    fn closed_early(&self) -> u64 {
        self.store.counts().closed_early
    }

    /// Deliveries and acks kept by the open journeys.
    #[getter]
    fn milestones(&self) -> usize {
        self.store.counts().milestones
    }

    /// Deliveries and acks of closed journeys counted, not kept.
    #[getter]
    fn milestones_dropped(&self) -> u64 {
        self.store.counts().milestones_dropped
    }

    /// Journeys open now.
    fn __len__(&self) -> usize {
        self.store.counts().open
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<JourneyStore>()
}
