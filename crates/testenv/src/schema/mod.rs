//! Structural schemas of CustomResourceDefinition versions: compile, prune, default, validate,
//! and the merge shape for server-side apply.
//!
//! A [`StructuralSchema`] is compiled once from a CRD version's `openAPIV3Schema` and then used
//! on every request, in kube-apiserver's order:
//!
//! 1. [`StructuralSchema::prune`] when decoding a body: undeclared fields are removed (KEP-2332;
//!    apiextensions `schema/pruning`) and reported, so the handler can reject them with
//!    `fieldValidation=Strict` or warn with `Warn`; non-nullable `null`s without default are
//!    dropped; `metadata` is coerced to `ObjectMeta` (`schema/objectmeta`).
//! 2. [`StructuralSchema::apply_defaults`] after pruning, and on every read from storage
//!    (KEP-575; `schema/defaulting`).
//! 3. [`StructuralSchema::validate`] before persisting: the OpenAPI v3 value validations
//!    (`k8s.io/kube-openapi/pkg/validation/validate` with apiextensions' conversion to field
//!    errors), the `apiVersion`/`kind`/`metadata` of embedded resources, and the uniqueness of
//!    `x-kubernetes-list-type: set|map` lists.
//!
//! [`StructuralSchema::compile`] itself reproduces the CRD validation of the schema (structural
//! invariants, unsupported keywords, list/map extensions, defaults), so its errors can be
//! returned as the 422 of a CRD create or update.
//!
//! [`FieldError`] is the crate's field error type (`k8s.io/apimachinery/pkg/util/validation/field`),
//! with the exact messages and `StatusCause` reasons kube-apiserver produces.
//!
//! # Deviations from kube-apiserver
//!
//! - `x-kubernetes-validations` (CEL) rules are compiled with the CRD and evaluated on create
//!   and update, transition rules (`oldSelf`) and ratcheting included, by the `cel-interpreter`
//!   crate rather than cel-go: no type checking at CRD creation, no cost budget, no
//!   `messageExpression` (see `cel.rs`).
//! - `pattern` is compiled with the `regex` crate, made to behave like Go's RE2 `regexp` where it
//!   matters (ASCII `\d`, `\w`, `\s`, `\b`); octal escapes and `\Q..\E` are rejected, repetition
//!   counts above 1000 accepted. Patterns are documented as ECMA-262 but neither implementation
//!   supports look-around or back-references.
//! - A few string formats are approximations of Go's parsers (`email`, `uri`); see
//!   the `format` module. Numeric formats (`int32`, `int64`, `float`, `double`) are not
//!   range-checked, as in kube-apiserver, which strips them from CRD schemas.
//! - Properties are validated in name order, so errors come in a stable order where upstream's
//!   order follows Go map iteration.
//! - The `ObjectMeta` validation of embedded resources' metadata (names, labels, annotations)
//!   and of the root metadata belongs to the metadata checks elsewhere; only its decoding is done
//!   here.
//! - `uniqueItems: true` is rejected at compile time, as kube-apiserver rejects it, so the
//!   validator's `uniqueItems` check never runs for real CRDs.
//! - Unknown fields inside malformed `metadata` are reported even when other metadata fields
//!   are malformed (upstream then stops reporting them).

mod cel;
mod compile;
mod default;
mod field_error;
mod format;
pub(crate) mod gofmt;
mod merge_shape;
mod node;
mod objectmeta;
mod prune;
mod validate;

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::Value;

use crate::shape::Shape;

pub use field_error::{FieldError, FieldErrorKind, FieldPath, aggregate_message};

use node::Node;

/// The path `compile` reports errors under; CRD handlers use [`StructuralSchema::compile_at`]
/// with the version's real path.
const DEFAULT_SCHEMA_PATH: &str = "openAPIV3Schema";

/// A compiled schema of one CRD version: cheap to clone (an `Arc` inside), regexes compiled once.
#[derive(Clone, Debug)]
pub struct StructuralSchema {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: Node,
    shape: Arc<Shape>,
}

impl StructuralSchema {
    /// Compile a CRD version's `openAPIV3Schema`, or return every problem kube-apiserver would
    /// report for it (a non-structural schema, a non-compiling `pattern`, a missing `type`, an
    /// array without `items`, an invalid default, ...). Error fields are relative to
    /// `openAPIV3Schema` (`openAPIV3Schema.properties[spec].type`); use
    /// [`compile_at`](Self::compile_at) for paths within the CRD.
    pub fn compile(props: &JSONSchemaProps) -> Result<Self, Vec<FieldError>> {
        Self::compile_at(props, DEFAULT_SCHEMA_PATH)
    }

    /// [`compile`](Self::compile), reporting errors under `path`, e.g.
    /// `spec.versions[0].schema.openAPIV3Schema`, as kube-apiserver does in a CRD's 422.
    pub fn compile_at(props: &JSONSchemaProps, path: &str) -> Result<Self, Vec<FieldError>> {
        let root = compile::compile(props, &FieldPath::new(path))?;
        let shape = Arc::new(merge_shape::resource_shape(&root));
        Ok(StructuralSchema { inner: Arc::new(Inner { root, shape }) })
    }

    /// Prune `obj` (a whole custom resource) as kube-apiserver does when reading it from
    /// storage: remove fields the schema does not declare (unless under
    /// `x-kubernetes-preserve-unknown-fields`), drop non-nullable `null`s that have no default,
    /// and coerce the root `metadata` (and that of `x-kubernetes-embedded-resource` objects,
    /// whose `apiVersion`/`kind` are kept) to `ObjectMeta`'s fields. Malformed
    /// `apiVersion`/`kind`/metadata fields are dropped.
    ///
    /// Returns the removed unknown fields, schema-pruned ones sorted first (`spec.foo`,
    /// `spec.items[0].bar`), then metadata ones (`metadata.foo`), for
    /// `fieldValidation=Strict` (400 `unknown field "spec.foo"`) or `Warn` (a warning each).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        // Dropping malformed metadata fields never fails.
        prune::prune(&self.inner.root, obj, true).unwrap_or_default()
    }

    /// [`prune`](Self::prune) as kube-apiserver decodes a request body: a non-string
    /// `apiVersion`/`kind` or a `metadata` that does not decode as `ObjectMeta` (at the root
    /// or in an embedded resource) is an error instead of being dropped, e.g.
    /// `metadata: Invalid value: ...: json: cannot unmarshal string into Go struct field
    /// ObjectMeta.labels of type map[string]string`.
    pub fn prune_checked(&self, obj: &mut Value) -> Result<Vec<String>, FieldError> {
        prune::prune(&self.inner.root, obj, false)
    }

    /// Apply `default`s (KEP-575): defaults for missing properties, recursively into objects,
    /// list items and additionalProperties values; `nullable: true` keeps an explicit null; an
    /// explicit null on a non-nullable field with a default becomes the default; on a
    /// non-nullable field without default it is removed. Returns whether anything changed.
    pub fn apply_defaults(&self, obj: &mut Value) -> bool {
        default::apply_defaults(&self.inner.root, obj)
    }

    /// Validate a (pruned, defaulted) custom resource; every error carries the field path and
    /// a message in kube-apiserver's format. Empty when valid.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        validate::validate(&self.inner.root, obj)
    }

    /// [`StructuralSchema::validate`], then the `x-kubernetes-validations` (CEL) rules, with
    /// `old` the object an update replaces (`None` on create), as kube-apiserver runs them.
    pub fn validate_with_rules(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = self.validate(obj);
        if errors.is_empty() {
            errors.extend(cel::validate(&self.inner.root, obj, old));
        }
        errors
    }

    /// The merge shape for server-side apply / strategic merge (see [`crate::shape`]).
    pub fn shape(&self) -> Arc<Shape> {
        Arc::clone(&self.inner.shape)
    }
}

#[cfg(test)]
mod tests;
