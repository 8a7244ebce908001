//! Raw capture bytes through the compiled core's whole Rust pipeline (core_fuzz::pipeline): a panic, a
//! record writer error or an output line that is not one line of valid, safely escaped JSON is a crash.
//! Half the mutations are structure-aware (core_fuzz::mutate), half libFuzzer's own.
#![no_main]

use core_fuzz::mutate::{mutate_structured, Rng};
use core_fuzz::pipeline::Pipeline;
use libfuzzer_sys::{fuzz_mutator, fuzz_target, fuzzer_mutate};

thread_local! {
    static PIPELINE: Pipeline = Pipeline::new();
    /// CORE_FUZZ_SHOW=1: say how many lines each input made (to see that inputs get through); =frames: also
    /// write the frames' JSON lines to stdout (to compare with `pulsar-dissect --json`).
    static SHOW: Option<String> = std::env::var("CORE_FUZZ_SHOW").ok();
}

fuzz_target!(|data: &[u8]| {
    PIPELINE.with(|pipeline| {
        SHOW.with(|show| {
            let mut frames = Vec::new();
            let want_frames = show.as_deref() == Some("frames");
            match pipeline.run_lines(data, want_frames.then_some(&mut frames)) {
                Ok(lines) if show.is_some() => {
                    eprintln!("{} bytes: {lines} lines", data.len());
                    std::io::Write::write_all(&mut std::io::stdout(), &frames).expect("stdout");
                }
                Ok(_) => {}
                Err(broken) => panic!("{}", broken.0),
            }
        })
    });
});

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    let mut rng = Rng::new(seed);
    if rng.below(2) == 0 && mutate_structured(&mut data[..size], &mut rng) {
        return size;
    }
    fuzzer_mutate(data, size, max_size)
});
