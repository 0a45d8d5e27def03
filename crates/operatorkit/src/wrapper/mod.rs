//! Composable layers around any resource: [`Retry`] and [`Metered`] (operatorkit's
//! `retryresource` and `metricsresource`).
//!
//! Both wrap a [`Resource`](crate::Resource) (around `ensure_created` / `ensure_deleted`) or a
//! [`Crud`](crate::crud::Crud) (around each step, so a CRUD resource is retried and measured per
//! step, as in Go). Names pass through. The usual composition puts metrics outside retries, so
//! the histogram observes the retried call:
//!
//! ```
//! # use operatorkit::wrapper::{Metered, Retry};
//! # fn wrap<R>(resource: R, metrics: &operatorkit::Metrics) -> Metered<Retry<R>> {
//! Metered::new(Retry::new(resource), metrics)
//! # }
//! ```

mod metered;
mod retry;

pub use metered::Metered;
pub use retry::Retry;
