//! Server-side apply (interface stub).
use serde_json::Value;
use crate::shape::Shape;
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ManagedFieldsEntry { pub manager: String }
#[derive(Debug)]
pub struct Manager<'a> { pub name: &'a str, pub api_version: &'a str, pub subresource: Option<&'a str>, pub time: &'a str }
#[derive(Debug)]
pub struct Conflicts(pub Vec<Conflict>);
#[derive(Debug)]
pub struct Conflict { pub manager: String, pub api_version: String, pub field: String }
impl Conflicts { pub fn message(&self) -> String { String::new() } pub fn causes(&self) -> Vec<(String, String)> { vec![] } }
pub fn record_update(_old: Option<&Value>, _new: &Value, managed: Vec<ManagedFieldsEntry>, _m: &Manager, _s: &Shape) -> Vec<ManagedFieldsEntry> { managed }
pub fn apply(_c: Option<&Value>, applied: &Value, managed: Vec<ManagedFieldsEntry>, _m: &Manager, _f: bool, _s: &Shape) -> Result<(Value, Vec<ManagedFieldsEntry>), Conflicts> { Ok((applied.clone(), managed)) }
pub fn validate_manager(_n: &str) -> Result<(), String> { Ok(()) }
pub fn parse_entries(_v: &Value) -> Result<Vec<ManagedFieldsEntry>, String> { Ok(vec![]) }
