//! Progress on long work, on stderr so stdout stays the command's answer: a bar on a terminal,
//! plain lines when stderr is a file or a pipe (CI logs), nothing when the answer is JSON.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Bar,
    Lines,
    Off,
}

impl Mode {
    /// What this process's stderr calls for; `json`: the output is for a program.
    pub fn pick(json: bool) -> Mode {
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        if json {
            Mode::Off
        } else if std::io::stderr().is_terminal() && !dumb {
            Mode::Bar
        } else {
            Mode::Lines
        }
    }
}

pub struct Progress {
    mode: Mode,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    pub fn new(mode: Mode) -> Self {
        Progress {
            mode,
            bar: Mutex::new(None),
        }
    }

    fn bar(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        self.bar.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Steps of known count (a render's): `n` of `of` starts, named by `line`.
    pub fn step(&self, n: usize, of: usize, line: &str) {
        let line = &crate::failure::printable(line);
        match self.mode {
            Mode::Off => {}
            Mode::Lines => eprintln!("[{n}/{of}] {line}"),
            Mode::Bar => {
                let mut bar = self.bar();
                let b = bar.get_or_insert_with(|| {
                    let b = ProgressBar::with_draw_target(Some(of as u64), ProgressDrawTarget::stderr());
                    b.set_style(style("{elapsed:>4} [{bar:30}] {pos}/{len} {msg}"));
                    b.enable_steady_tick(std::time::Duration::from_millis(200));
                    b
                });
                b.set_position(n.saturating_sub(1) as u64);
                b.set_message(line.to_string());
            }
        }
    }

    /// The work is over: the bar goes, what it said stays in the lines printed after.
    pub fn finish(&self) {
        if let Some(b) = self.bar().take() {
            b.finish_and_clear();
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl hardshift_registry::progress::Progress for Progress {
    fn begin(&self, what: &str, total: u64, bytes: bool) {
        match self.mode {
            Mode::Off => {}
            Mode::Lines => eprintln!("{what}"),
            Mode::Bar => {
                let b = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
                b.set_style(style(if bytes {
                    "{elapsed:>4} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg}"
                } else {
                    "{elapsed:>4} [{bar:30}] {pos}/{len} {msg}"
                }));
                b.set_message(what.to_string());
                if let Some(old) = self.bar().replace(b) {
                    old.finish_and_clear();
                }
            }
        }
    }
    fn inc(&self, n: u64) {
        if let Some(b) = self.bar().as_ref() {
            b.inc(n);
        }
    }
    fn item(&self, line: &str) {
        match self.mode {
            Mode::Off => {}
            Mode::Lines => eprintln!("  {line}"),
            // Above the bar, which keeps drawing below.
            Mode::Bar => match self.bar().as_ref() {
                Some(b) => b.println(format!("  {line}")),
                None => eprintln!("  {line}"),
            },
        }
    }
    fn end(&self) {
        self.finish();
    }
}
