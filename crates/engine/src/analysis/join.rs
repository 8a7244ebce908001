//! The analysis joined to what the stages make, once for every front end: [`Join`] owns the [`Analyzer`],
//! adds a protocol's analysis the first time one of its frames comes, and hands what the analysis gives, in
//! its order, to a [`Flush`]: the input event passed on, the input frame's notes and findings, the events the
//! analysis makes.
//!
//! What a front end hands in is its own: a frame as it holds it (`F`: the engine's decoded frame, or a frame
//! of a protocol a front end decoded itself) and an event as it holds it (`E`), given back to its `Flush`
//! untouched beside the outputs. The analysis reads only the [`Frame`] view of it.

use std::mem::take;

use super::{Analyzer, Event, EventHead, Frame, Output, PairingOptions, ProtocolAnalysis};
use crate::model::Finding;
use crate::value::Map;

/// Where what the analysis gives goes, in its order. `F` and `E` are the front end's frame and event, as it
/// handed them in.
pub trait Flush<F: ?Sized, E: ?Sized> {
    type Error;
    /// The input event, passed on as it is.
    fn input(&mut self, event: &E) -> Result<(), Self::Error>;
    /// The input frame with its notes (record keys) and conversation findings; `answered`: the time and packet
    /// of the request it answers (in its notes as `answers`).
    fn annotated(
        &mut self,
        frame: &F,
        notes: Map,
        findings: Vec<Finding>,
        answered: Option<(f64, u64)>,
    ) -> Result<(), Self::Error>;
    /// An event the analysis made (an answer missing, a session's).
    fn event(&mut self, event: Event) -> Result<(), Self::Error>;
    /// The error of an output that came without its input (a frame's notes on a tick): a bug, not data.
    fn misplaced(&mut self, what: &'static str) -> Self::Error;
}

/// The analysis of one run: feed it each frame and event in capture order, the clock, and the end.
pub struct Join {
    analyzer: Analyzer,
    /// (kept between items so its room is reused)
    outputs: Vec<Output>,
}

/// The input whose outputs are being flushed.
enum Input<'a, F: ?Sized, E: ?Sized> {
    Frame(&'a F),
    Event(&'a E),
    Nothing,
}

impl Join {
    pub fn new(options: PairingOptions) -> Join {
        Join { analyzer: Analyzer::new(options), outputs: Vec::new() }
    }

    pub fn knows_protocol(&self, name: &str) -> bool {
        self.analyzer.knows_protocol(name)
    }

    /// One frame (`view`: what the analysis reads of `frame`); `first_sight` makes its protocol's analysis
    /// when it is the protocol's first frame.
    pub fn frame<F: ?Sized, E: ?Sized, S: Flush<F, E>>(
        &mut self,
        view: &Frame,
        first_sight: impl FnOnce() -> Result<ProtocolAnalysis, S::Error>,
        frame: &F,
        sink: &mut S,
    ) -> Result<(), S::Error> {
        if !self.analyzer.knows_protocol(view.protocol) {
            let analysis = first_sight()?;
            self.analyzer.add_protocol(view.protocol, analysis);
        }
        let mut outputs = take(&mut self.outputs);
        self.analyzer.frame(view, &mut outputs);
        self.flush(outputs, Input::Frame(frame), sink)
    }

    /// One event (a connection opened or closed, a gap, a capture's note): `head` is what the analysis reads
    /// of `event`.
    pub fn event<F: ?Sized, E: ?Sized, S: Flush<F, E>>(
        &mut self,
        head: EventHead,
        event: &E,
        sink: &mut S,
    ) -> Result<(), S::Error> {
        let mut outputs = take(&mut self.outputs);
        self.analyzer.event(head, &mut outputs);
        self.flush(outputs, Input::Event(event), sink)
    }

    /// The clock moved to `now`: the requests that waited past the timeout.
    pub fn tick<F: ?Sized, E: ?Sized, S: Flush<F, E>>(&mut self, now: f64, sink: &mut S) -> Result<(), S::Error> {
        let mut outputs = take(&mut self.outputs);
        self.analyzer.tick(now, &mut outputs);
        self.flush(outputs, Input::Nothing, sink)
    }

    /// The end of the input: what every connection still open leaves.
    pub fn finish<F: ?Sized, E: ?Sized, S: Flush<F, E>>(&mut self, sink: &mut S) -> Result<(), S::Error> {
        let mut outputs = take(&mut self.outputs);
        self.analyzer.finish(&mut outputs);
        self.flush(outputs, Input::Nothing, sink)
    }

    /// The outputs to `sink` in order; on an error the rest are dropped.
    fn flush<F: ?Sized, E: ?Sized, S: Flush<F, E>>(
        &mut self,
        mut outputs: Vec<Output>,
        input: Input<'_, F, E>,
        sink: &mut S,
    ) -> Result<(), S::Error> {
        let mut result = Ok(());
        for output in outputs.drain(..) {
            result = match (output, &input) {
                (Output::Input, Input::Event(event)) => sink.input(event),
                (Output::Input, _) => Err(sink.misplaced("no input to pass on")),
                (Output::Annotated { notes, findings, answered }, Input::Frame(frame)) => {
                    sink.annotated(frame, notes, findings, answered)
                }
                (Output::Annotated { .. }, _) => Err(sink.misplaced("a frame's notes without the frame")),
                (Output::Event(event), _) => sink.event(event),
            };
            if result.is_err() {
                break;
            }
        }
        outputs.clear();
        self.outputs = outputs;
        result
    }
}
