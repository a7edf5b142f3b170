//! Progress bars and cancellation for long operations.
//!
//! Long library calls (graph build, PQ training, ground truth) take a [`Control`] argument instead
//! of reading globals: the CLI passes one that draws `indicatif` bars on stderr, tests and the
//! Python binding pass a silent one, and any caller can set the cancel flag from another thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How a long operation reports progress and learns that it should stop.
#[derive(Debug, Clone, Default)]
pub struct Control {
    show_progress: bool,
    cancel: Option<Arc<AtomicBool>>,
    watch: Option<Arc<Watch>>,
}

/// The phase a long operation is in and how far it is, readable from another thread (the
/// network service reports a merge's progress from it): the last bar [`Control::bar`] made.
#[derive(Debug, Default)]
pub struct Watch {
    current: std::sync::Mutex<Option<(String, ProgressBar)>>,
}

impl Watch {
    /// The current phase, its steps done and its length; `None` before the first phase.
    pub fn now(&self) -> Option<(String, u64, u64)> {
        let g = self.current.lock().ok()?;
        g.as_ref()
            .map(|(phase, bar)| (phase.clone(), bar.position(), bar.length().unwrap_or(0)))
    }
}

/// Returned by long operations that were cancelled through [`Control`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("operation cancelled")]
pub struct Cancelled;

impl Control {
    /// No progress output, never cancelled.
    pub fn silent() -> Self {
        Self::default()
    }

    /// Progress bars on stderr.
    pub fn with_progress() -> Self {
        Self {
            show_progress: true,
            cancel: None,
            watch: None,
        }
    }

    /// Attach a flag that, once set to `true`, makes the operation stop with [`Cancelled`].
    pub fn with_cancel_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// Report every phase to `watch` too.
    pub fn with_watch(mut self, watch: Arc<Watch>) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Whether progress bars are drawn.
    pub fn shows_progress(&self) -> bool {
        self.show_progress
    }

    /// A progress bar for one phase of `len` steps (hidden when progress is off).
    pub fn bar(&self, phase: &str, len: u64) -> ProgressBar {
        let bar = self.draw(phase, len);
        if let Some(w) = &self.watch {
            if let Ok(mut g) = w.current.lock() {
                *g = Some((phase.to_string(), bar.clone()));
            }
        }
        bar
    }

    fn draw(&self, phase: &str, len: u64) -> ProgressBar {
        if !self.show_progress {
            // Hidden, yet counting (a watch reads its position).
            return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{msg:>18} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(phase.to_string());
        bar
    }

    /// `Err(Cancelled)` once the cancel flag is set.
    pub fn check(&self) -> Result<(), Cancelled> {
        match &self.cancel {
            Some(flag) if flag.load(Ordering::Relaxed) => Err(Cancelled),
            _ => Ok(()),
        }
    }
}

/// `1.5 GiB`-style formatting of a byte count.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
