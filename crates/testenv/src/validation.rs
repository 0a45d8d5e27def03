//! Name and metadata validation (interface stub).
use serde_json::Value;
use crate::schema::FieldError;
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule { Dns1123Subdomain, Dns1123Label, Dns1035Label, PathSegment }
pub fn validate_object_meta(_meta: &Value, _namespaced: bool, _rule: NameRule) -> Vec<FieldError> { vec![] }
pub fn validate_finalizers_on_update(_old: &[String], _new: &[String], _deleting: bool) -> Option<FieldError> { None }
pub fn is_dns1123_subdomain(_s: &str) -> Vec<String> { vec![] }
