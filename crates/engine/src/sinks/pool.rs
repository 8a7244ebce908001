//! The threads the records are written on: rayon's global pool, which `records.rs` also splits a large batch's
//! messages over (one pool, one knob: `RAYON_NUM_THREADS`). A pool of the engine's own std threads was tried:
//! the same bytes, but on 20 unanswered SENDs of 64 MiB each `--json` peaked at 296 MB against 166 MB (memory
//! freed but kept by the allocator: 164 MB with `MIMALLOC_PURGE_DELAY=0`).

/// `job` run on the pool (records written there do not split a batch's messages over the other threads:
/// `records.rs: par_items`, which sees it is on the pool). True: rayon's pool starts with the first job.
pub fn spawn(job: impl FnOnce() + Send + 'static) -> bool {
    rayon::spawn(job);
    true
}
