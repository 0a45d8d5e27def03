//! Structural schemas (interface stub; replaced by the real module).
use std::sync::Arc;
use serde_json::Value;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use crate::shape::Shape;

#[derive(Clone, Debug)]
pub struct StructuralSchema;
impl StructuralSchema {
    pub fn compile(_props: &JSONSchemaProps) -> Result<Self, Vec<FieldError>> { Ok(StructuralSchema) }
    pub fn prune(&self, _obj: &mut Value) -> Vec<String> { vec![] }
    pub fn apply_defaults(&self, _obj: &mut Value) -> bool { false }
    pub fn validate(&self, _obj: &Value) -> Vec<FieldError> { vec![] }
    pub fn shape(&self) -> Arc<Shape> { Arc::new(Shape::Untyped) }
}
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError { pub kind: FieldErrorKind, pub field: String, pub detail: String, pub bad_value: Option<Value> }
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldErrorKind { Invalid, Required, Forbidden, NotSupported, TooLong, TooMany, Duplicate, TypeInvalid }
impl FieldError {
    pub fn reason(&self) -> &'static str { "FieldValueInvalid" }
    pub fn message(&self) -> String { format!("{}: {}", self.field, self.detail) }
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self { FieldError { kind: FieldErrorKind::Invalid, field: field.into(), detail: detail.into(), bad_value: Some(value) } }
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self { FieldError { kind: FieldErrorKind::Required, field: field.into(), detail: detail.into(), bad_value: None } }
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self { FieldError { kind: FieldErrorKind::Forbidden, field: field.into(), detail: detail.into(), bad_value: None } }
    pub fn not_supported(field: impl Into<String>, value: Value, allowed: &[&str]) -> Self { FieldError { kind: FieldErrorKind::NotSupported, field: field.into(), detail: allowed.join(","), bad_value: Some(value) } }
}
