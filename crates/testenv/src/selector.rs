//! Selectors (interface stub).
use std::collections::BTreeMap;
use serde_json::Value;
#[derive(Clone, Debug, Default)]
pub struct LabelSelector;
impl LabelSelector {
    pub fn parse(_s: &str) -> Result<Self, String> { Ok(LabelSelector) }
    pub fn everything() -> Self { LabelSelector }
    pub fn is_everything(&self) -> bool { true }
    pub fn matches(&self, _l: &BTreeMap<String, String>) -> bool { true }
    pub fn from_label_selector(_v: &Value) -> Result<Self, String> { Ok(LabelSelector) }
}
#[derive(Clone, Debug, Default)]
pub struct FieldSelector;
impl FieldSelector {
    pub fn parse(_s: &str) -> Result<Self, String> { Ok(FieldSelector) }
    pub fn everything() -> Self { FieldSelector }
    pub fn fields(&self) -> impl Iterator<Item = &str> { std::iter::empty() }
    pub fn matches(&self, _get: impl Fn(&str) -> Option<String>) -> bool { true }
    pub fn exact_name(&self) -> Option<&str> { None }
}
impl std::fmt::Display for LabelSelector { fn fmt(&self, _f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { Ok(()) } }
