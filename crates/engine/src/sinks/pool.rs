//! A pool of threads (std threads, started once, one per core or `RAYON_NUM_THREADS`) that runs the jobs handed to it, oldest first.
//! Records written there do not split a batch's messages over the other threads (`records.rs: par_items`):
//! the other threads are busy with other frames.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The jobs' queue, whose receiving end every thread of the pool shares; None if no thread could be started.
fn queue() -> Option<&'static Mutex<Sender<Job>>> {
    static QUEUE: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    QUEUE
        .get_or_init(|| {
            // as many as rayon's pool, which splits a record's list elsewhere (`RAYON_NUM_THREADS`: the one knob)
            let threads = std::env::var("RAYON_NUM_THREADS")
                .ok()
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let (sender, receiver) = mpsc::channel::<Job>();
            let receiver = Arc::new(Mutex::new(receiver));
            let mut started = 0;
            for number in 0..threads {
                let receiver = Arc::clone(&receiver);
                let thread = std::thread::Builder::new()
                    .name(format!("pulsar-dissect writer {number}"))
                    .spawn(move || work(&receiver));
                started += usize::from(thread.is_ok());
            }
            (started > 0).then(|| Mutex::new(sender))
        })
        .as_ref()
}

fn work(receiver: &Mutex<Receiver<Job>>) {
    crate::records::on_writer_thread();
    loop {
        // (the lock is held only while waiting for the next job, not while running it)
        let job = match receiver.lock() {
            Ok(receiver) => receiver.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match job {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// `job` run on the pool; false if the pool could not be started (the job is dropped, not run).
pub fn spawn(job: impl FnOnce() + Send + 'static) -> bool {
    let Some(queue) = queue() else { return false };
    let sender = queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    sender.send(Box::new(job)).is_ok()
}
