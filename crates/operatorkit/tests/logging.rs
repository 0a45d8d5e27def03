//! The log subscriber an operator installs survives spans opened, entered and looked up
//! concurrently on every runtime worker. tracing-subscriber 0.3.21 to 0.3.23 lose a span's
//! reference count in that race (tokio-rs/tracing#3514) and panic the worker's task, which in an
//! operator is a watcher or a reconcile that silently stops; the workspace holds the crate at a
//! version without the race, and this test fails if a bump brings it back.

use std::io::sink;

use tracing::{Instrument, Span, info_span};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_entered_and_looked_up_on_every_worker_never_panic_a_task() {
    tracing::subscriber::set_global_default(operatorkit::logging::subscriber(sink, false))
        .expect("the only subscriber of this test process");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        tasks.push(tokio::spawn(async {
            for _ in 0..5_000 {
                let _ = Span::current();
                tokio::task::yield_now().await;
            }
        }));
        tasks.push(tokio::spawn(async {
            for _ in 0..5_000 {
                let span = info_span!("reconcile");
                let _entered = span.enter();
                tokio::task::yield_now().await;
            }
        }));
        tasks.push(tokio::spawn(
            async {
                for _ in 0..5_000 {
                    tokio::task::yield_now().await;
                }
            }
            .instrument(info_span!("watch")),
        ));
    }
    let mut panicked = 0;
    for task in tasks {
        panicked += usize::from(task.await.is_err());
    }
    assert_eq!(panicked, 0, "tasks panicked inside the log subscriber");
}
