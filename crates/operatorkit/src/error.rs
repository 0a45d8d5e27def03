//! Errors: what resources return, what a reconcile reports, and what a misconfigured controller
//! refuses to start with.
//!
//! Every error that reaches the controller has a *kind*: a short PascalCase word such as
//! `StackRollbackFailed` or `Conflict`. The kind becomes the reason of the Kubernetes Warning
//! event and a log field; the error's `Display` text becomes the event message. Operators give
//! their own error enums a kind by implementing [`ErrorKind`], after which `?` converts them into
//! a [`ResourceError`]. The Go library classified errors by matching their messages; a kind is
//! typed instead.
//!
//! Secrets: the event message is the error's `Display` text and nothing else. Error types must
//! never format credentials, tokens or key material (wrap them in a type whose `Debug` and
//! `Display` print `***`).

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

/// An error type that knows its kind: the reason of the Warning event it causes.
pub trait ErrorKind: StdError + Send + Sync + 'static {
    /// A short PascalCase word naming the failure, e.g. `StackCreateFailed`.
    fn kind(&self) -> Cow<'static, str>;

    /// Whether trying the same call again may succeed (the retry wrapper only retries these).
    /// Defaults to `true`, the conservative choice for network calls.
    fn is_retryable(&self) -> bool {
        true
    }
}

/// Kubernetes API errors are classified by their HTTP status: the kind is the apimachinery
/// reason (`Conflict`, `NotFound`, ...), and only conflicts, throttling, server errors and
/// transport failures are retryable.
impl ErrorKind for kube::Error {
    fn kind(&self) -> Cow<'static, str> {
        match self {
            kube::Error::Api(status) => Cow::Borrowed(match status.code {
                400 => "BadRequest",
                401 => "Unauthorized",
                403 => "Forbidden",
                404 => "NotFound",
                409 => "Conflict",
                410 => "Expired",
                422 => "Invalid",
                429 => "TooManyRequests",
                500 => "InternalError",
                503 => "ServiceUnavailable",
                504 => "Timeout",
                _ => "KubernetesApiError",
            }),
            _ => Cow::Borrowed("KubernetesClientError"),
        }
    }

    fn is_retryable(&self) -> bool {
        match self {
            kube::Error::Api(status) => matches!(status.code, 409 | 429) || status.code >= 500,
            kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => false,
            _ => true,
        }
    }
}

/// The error a resource returns: any error plus its kind and whether it is retryable.
///
/// Any [`ErrorKind`] converts into it with `?`; [`ResourceError::new`] wraps other errors with an
/// explicit kind.
pub struct ResourceError {
    kind: Cow<'static, str>,
    retryable: bool,
    source: Box<dyn StdError + Send + Sync + 'static>,
}

impl ResourceError {
    /// Wrap `source` under `kind` (PascalCase). Retryable by default.
    pub fn new(
        kind: impl Into<Cow<'static, str>>,
        source: impl Into<Box<dyn StdError + Send + Sync + 'static>>,
    ) -> Self {
        Self { kind: kind.into(), retryable: true, source: source.into() }
    }

    /// An error with a plain message.
    pub fn msg(kind: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Self::new(kind, message.into())
    }

    /// Mark the error as permanent: retrying the same call cannot help.
    pub fn permanent(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// The kind: the reason of the Warning event.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Whether the retry wrapper may try again.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The wrapped error.
    pub fn inner(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }
}

impl<E: ErrorKind> From<E> for ResourceError {
    fn from(e: E) -> Self {
        Self { kind: e.kind(), retryable: e.is_retryable(), source: Box::new(e) }
    }
}

impl fmt::Debug for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceError")
            .field("kind", &self.kind)
            .field("retryable", &self.retryable)
            .field("source", &self.source)
            .finish()
    }
}

impl fmt::Display for ResourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.source, f)
    }
}

impl StdError for ResourceError {
    // Transparent: the wrapped error's message is already ours, so report its cause next.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.source()
    }
}

/// Why one reconcile of one object failed. The controller turns it into a Warning event (reason
/// = [`ReconcileError::kind`], message = `Display`), a count in
/// `operatorkit_controller_errors_total`, an error log and a per-object backoff requeue.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// A resource failed.
    #[error("resource {resource}: {source}")]
    Resource {
        /// The resource's name.
        resource: String,
        /// What it returned.
        source: ResourceError,
    },
    /// The per-reconcile state of a resource set could not be built.
    #[error("resource set {set}: cannot initialise the reconcile state: {source}")]
    StateInit {
        /// The resource set's name.
        set: String,
        /// What the initialiser returned.
        source: ResourceError,
    },
    /// Adding or removing the finalizer failed for another reason than a stale cache.
    #[error("cannot {action} the finalizer {finalizer}: {source}")]
    Finalizer {
        /// `add` or `remove`.
        action: &'static str,
        /// The finalizer.
        finalizer: String,
        /// The API error.
        source: kube::Error,
    },
    /// This replica stopped being the leader; the reconcile stopped before its next write.
    #[error("leadership was lost; the reconcile stopped before its next write")]
    LeadershipLost,
    /// A sharded replica could not acknowledge a drain (remove the shard and drain labels) for
    /// another reason than a stale cache; the object stays with this shard until it can.
    #[error(
        "cannot hand the object over to another shard (removing the labels {shard_label} and {drain_label}): {source}"
    )]
    ShardHandover {
        /// The shard label.
        shard_label: String,
        /// The drain label.
        drain_label: String,
        /// The API error.
        source: kube::Error,
    },
}

impl ReconcileError {
    /// The kind: the reason of the Warning event and the `kind` log field.
    pub fn kind(&self) -> Cow<'_, str> {
        match self {
            ReconcileError::Resource { source, .. } | ReconcileError::StateInit { source, .. } => {
                Cow::Borrowed(source.kind())
            }
            ReconcileError::Finalizer { .. } => Cow::Borrowed("FinalizerUpdateFailed"),
            ReconcileError::LeadershipLost => Cow::Borrowed("LeadershipLost"),
            ReconcileError::ShardHandover { .. } => Cow::Borrowed("ShardHandoverFailed"),
        }
    }
}

/// Why a controller refuses to start.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BuildError {
    /// Two resource sets would both handle some version.
    #[error(
        "resource sets {first:?} ({first_requirement}) and {second:?} ({second_requirement}) overlap: both handle version {witness}; make their version requirements disjoint"
    )]
    OverlappingSets {
        /// The first set.
        first: String,
        /// Its requirement.
        first_requirement: String,
        /// The second set.
        second: String,
        /// Its requirement.
        second_requirement: String,
        /// A version both requirements match.
        witness: String,
    },
    /// Two resource sets have the same name.
    #[error("two resource sets are named {0:?}; names identify sets in logs and must be unique")]
    DuplicateSetName(String),
    /// No resource set was configured.
    #[error("a controller needs at least one resource set")]
    NoResourceSets,
    /// A resource set without resources.
    #[error("resource set {0:?} has no resources")]
    EmptyResourceSet(String),
    /// The controller name cannot form a finalizer `operatorkit.giantswarm.io/<name>`.
    #[error(
        "controller name {0:?} is invalid: use 1-63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit"
    )]
    InvalidName(String),
    /// The operator (component) name is missing or empty.
    #[error("the operator name (the Release component this controller follows) must not be empty")]
    MissingOperator,
    /// Legacy routing: no set handles the operator's own version.
    #[error("no resource set handles this operator's own version {0}")]
    NoSetForOwnVersion(String),
}

/// Why an object cannot be reconciled as written: the message names the object, the field and
/// the fix. Reported as a `Ready=False` condition and a Warning event; never retried quickly,
/// never deletes anything.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {message}")]
pub struct InvalidInput {
    /// `Kind namespace/name`.
    pub object: String,
    /// The condition reason (PascalCase).
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl ErrorKind for InvalidInput {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(self.reason)
    }
    fn is_retryable(&self) -> bool {
        false
    }
}

/// Turn field errors into one [`InvalidInput`].
pub fn field_errors<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    errors: Vec<apis::validation::FieldError>,
) -> InvalidInput {
    InvalidInput {
        object: crate::status::describe(obj),
        reason: "InvalidSpec",
        message: errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
    }
}
