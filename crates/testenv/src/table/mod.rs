//! Table output (interface stub).
use serde_json::Value;
#[derive(Clone, Debug, PartialEq)]
pub struct Column { pub name: String, pub type_: String, pub format: String, pub description: String, pub priority: i32, pub json_path: Option<String> }
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject { None, Metadata, Object }
pub fn crd_columns(_c: &[Value]) -> Vec<Column> { vec![] }
pub fn builtin_columns(_g: &str, _k: &str) -> Option<Vec<Column>> { None }
pub fn row_cells(_c: &[Column], _g: &str, _k: &str, _o: &Value, _now: jiff::Timestamp) -> Vec<Value> { vec![] }
pub fn table(_c: &[Column], _rows: Vec<(Vec<Value>, Value)>, _rv: &str, _cont: Option<&str>, _rem: Option<i64>, _h: bool) -> Value { Value::Null }
pub fn partial_object_metadata(obj: &Value) -> Value { serde_json::json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata": obj.get("metadata").cloned().unwrap_or_default()}) }
