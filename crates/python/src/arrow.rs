//! The pipeline's tables (the engine's `tables.rs`) handed to Python as Arrow record batches through the Arrow
//! C stream interface (`__arrow_c_stream__`, a PyCapsule): pyarrow — or any Arrow library — takes the
//! engine's buffers as they are, with no copy and no Python object per value.

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use engine::tables::{tables_of, RecordTables, TABLES};

/// One table's record batches, readable as an Arrow stream (`pyarrow.RecordBatchReader.from_stream`,
/// `pyarrow.table`) as many times as asked.
#[pyclass(module = "dissector._core", name = "RecordBatches", frozen)]
pub struct RecordBatches {
    name: &'static str,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

#[pymethods]
impl RecordBatches {
    /// The Arrow C stream of the batches (the PyCapsule interface); a requested schema is not honoured: the
    /// stream has the table's own.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(self.batches.clone().into_iter().map(Ok), self.schema.clone());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // the capsule owns the stream; an importer moves it out (its release then null: nothing freed twice)
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The table's name: frames, messages, problems, exchanges or events.
    #[getter]
    fn name(&self) -> &'static str {
        self.name
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// The tables' batches (frames, messages, problems, exchanges, events), the builders emptied.
pub fn take(tables: &mut RecordTables) -> PyResult<Vec<RecordBatches>> {
    named(tables.finish())
}

/// The tables' batches, each with its name.
fn named(batches: Result<[RecordBatch; TABLES.len()], arrow_schema::ArrowError>) -> PyResult<Vec<RecordBatches>> {
    let batches = batches.map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(batches
        .into_iter()
        .zip(TABLES)
        .map(|(batch, (name, _))| RecordBatches { name, schema: batch.schema(), batches: vec![batch] })
        .collect())
}

/// The tables of records made elsewhere (dicts of the contract, e.g. read back from `--json` lines), as
/// `AnalysedDissector.take_columns` gives those it makes; with no records, the tables' schemas.
#[pyfunction]
#[pyo3(signature = (records, with_json = false))]
pub fn record_tables(records: Vec<Bound<'_, PyAny>>, with_json: bool) -> PyResult<Vec<RecordBatches>> {
    let records: Vec<engine::value::Value> = records
        .iter()
        .map(|record| crate::convert::map_from_py(record).map(engine::value::Value::Map))
        .collect::<PyResult<_>>()?;
    named(tables_of(&records, with_json))
}

/// Parts of the pipeline's summary (`AnalysedDissector.take_summary`, JSON) merged into one, as JSON; each
/// latency with its percentiles read (nearest rank: exact while few values, else within the stated relative
/// error).
#[pyfunction]
pub fn merge_summaries(parts: Vec<String>) -> PyResult<String> {
    use engine::stats::summary::{Summary, EXACT_VALUES, RELATIVE_ERROR};

    let mut merged = Summary::default();
    for part in &parts {
        merged.merge(&Summary::from_json(part).map_err(|e| PyValueError::new_err(e.to_string()))?);
    }
    let latency: Vec<serde_json::Value> = merged
        .latency
        .iter()
        .map(|((protocol, request_type), sketch)| {
            serde_json::json!({
                "protocol": protocol, "request_type": request_type, "count": sketch.count,
                "p50": sketch.percentile(50.0), "p90": sketch.percentile(90.0), "p99": sketch.percentile(99.0),
                "max": sketch.max, "mean": sketch.mean(), "exact": sketch.exact(),
            })
        })
        .collect();
    let mut value = serde_json::to_value(&merged).map_err(|e| PyValueError::new_err(e.to_string()))?;
    value["latency"] = serde_json::Value::from(latency);
    value["latency_exact_values"] = serde_json::Value::from(EXACT_VALUES);
    value["latency_relative_error"] = serde_json::Value::from(RELATIVE_ERROR);
    Ok(value.to_string())
}
