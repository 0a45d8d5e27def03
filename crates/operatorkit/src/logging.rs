//! An operator's log output: human-readable lines on standard output, filtered by `RUST_LOG`
//! (default `info`), coloured only when standard output is a terminal. A pod's log, a file or
//! a pipe gets plain text: colour codes there are noise to every reader and log shipper.

use std::io::IsTerminal;

use tracing_subscriber::fmt::MakeWriter;

/// Install the log subscriber for the process; an operator's binary calls it first thing.
pub fn init() {
    let ansi = colour(std::io::stdout().is_terminal());
    tracing_subscriber::fmt().with_env_filter(filter()).with_ansi(ansi).init();
}

/// Whether output to a stream that `terminal` says is (or is not) a terminal may carry colour
/// and other escape codes: only on a terminal, and never when `NO_COLOR` is set to anything
/// but the empty string (<https://no-color.org>). Every CLI of the project asks this.
pub fn colour(terminal: bool) -> bool {
    colour_with(terminal, std::env::var_os("NO_COLOR").as_deref())
}

fn colour_with(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

fn filter() -> tracing_subscriber::EnvFilter {
    tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into())
}

/// The subscriber [`init`] installs, writing to `writer`, with colours iff `terminal`.
pub fn subscriber<W>(writer: W, terminal: bool) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt().with_env_filter(filter()).with_ansi(terminal).with_writer(writer).finish()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::subscriber;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn logged(terminal: bool) -> String {
        let buffer = Buffer::default();
        let out = buffer.clone();
        tracing::subscriber::with_default(subscriber(move || out.clone(), terminal), || {
            tracing::info!(cluster = "a1b2c", "stack created");
        });
        let bytes = buffer.0.lock().map(|b| b.clone()).unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[test]
    fn no_color_set_to_anything_turns_colour_off_even_on_a_terminal() {
        use std::ffi::OsStr;
        assert!(super::colour_with(true, None));
        assert!(super::colour_with(true, Some(OsStr::new(""))), "an empty NO_COLOR is unset");
        assert!(!super::colour_with(true, Some(OsStr::new("1"))));
        assert!(!super::colour_with(false, None), "never on a pipe or a file");
    }

    #[test]
    fn logs_are_plain_text_unless_written_to_a_terminal() {
        let plain = logged(false);
        assert!(plain.contains("stack created") && plain.contains("cluster=\"a1b2c\""), "{plain}");
        assert!(!plain.contains('\x1b'), "colour codes in {plain:?}");
        assert!(logged(true).contains('\x1b'), "a terminal gets colours");
    }
}
