//! Server-side Table output and metadata-only representations.
//!
//! `kubectl get` asks for `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints
//! whatever table the server returns; kube-rs' metadata watchers ask for
//! `as=PartialObjectMetadata`. This module builds those bodies the way kube-apiserver does:
//!
//! * **Custom resources** ([`crd_columns`]): apiextensions' `tableconvertor` puts `Name`
//!   (format `name`) first, then the version's `additionalPrinterColumns`; a version without
//!   columns gets `Age` (`.metadata.creationTimestamp`, type `date`). Cells are computed
//!   from the column's JSONPath ([`jsonpath`]) and typed per column: `integer` and
//!   `number` are JSON numbers, `boolean` a bool, `string` the printed value, `date` the
//!   humanised age (`5m`), anything missing or of the wrong type `null`. As upstream, only
//!   the **first** value a path selects is used (`results[0][0]` in `tableconvertor.go`);
//!   `priority` is carried through and kubectl shows columns above 0 only with `-o wide`.
//! * **Built-in kinds** ([`builtin_columns`]): the printers of
//!   `pkg/printers/internalversion/printers.go`, ported in the `printers` submodule. Kinds without a printer
//!   upstream (Role, ClusterRole, CustomResourceDefinition, ...) use the default
//!   convertor's `Name` + `Created At` ([`default_columns`]).
//! * **Table body** ([`table`]): `{"kind":"Table","apiVersion":"meta.k8s.io/v1",
//!   "metadata":{...},"columnDefinitions":[...],"rows":[{"cells":[...],"object":...}]}`.
//!   Each row's object is chosen by `includeObject` ([`IncludeObject`]): the
//!   `PartialObjectMetadata` by default, the full object, or `null`.
//!
//! Watch events: `handlers/response.go` converts every watch event object with
//! `TableOptions.NoHeaders` set after the first one, and the convertors then leave
//! `ColumnDefinitions` nil. `Table.columnDefinitions` has no `omitempty`, so those events
//! carry `"columnDefinitions": null`; [`table`] with `include_headers = false` does the same.

pub mod duration;
pub mod jsonpath;
mod printers;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use self::duration::{age_of, format_rfc3339, human_since, parse_timestamp};
use self::jsonpath::JsonPath;
use self::printers::{Builtin, CREATION_TIMESTAMP_DESCRIPTION};
use crate::schema::gofmt::{float_json as go_float_encoding, float_v as go_float_v, write_json_string};
use crate::selector::go_quote;

/// The API version of Table and PartialObjectMetadata bodies.
pub const META_API_VERSION: &str = "meta.k8s.io/v1";

/// Maximum JSON nesting printed into a `string` cell.
const MAX_PRINT_DEPTH: usize = 256;

/// One table column (`metav1.TableColumnDefinition`), plus the JSONPath of CRD columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Human-readable name, upper-cased by kubectl (`Name`, `Age`, `Ready`).
    pub name: String,
    /// OpenAPI type of the cells: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format; `name` marks the column holding the object name.
    pub format: String,
    /// Description shown by `kubectl explain`-like tools.
    pub description: String,
    /// 0 for default output; higher priorities appear only with `-o wide`.
    pub priority: i32,
    /// The JSONPath a CRD column is computed from; `None` for built-in and name columns.
    pub json_path: Option<String>,
}

impl Column {
    /// The column definition as it appears in `Table.columnDefinitions`.
    pub fn definition(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// What a table row carries besides its cells (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// `None`: `"object": null`.
    None,
    /// `Metadata` (the default): the object's `PartialObjectMetadata`.
    #[default]
    Metadata,
    /// `Object`: the full object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter; absent or empty means `Metadata`.
    ///
    /// The error text is kube-apiserver's (`handlers/response.go`, a 400 BadRequest).
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value.unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "Object" => Ok(IncludeObject::Object),
            "None" => Ok(IncludeObject::None),
            other => Err(format!("unrecognized includeObject value: {}", go_quote(other))),
        }
    }

    /// The row object for `obj` under this option.
    pub fn apply(self, obj: &Value) -> Value {
        match self {
            IncludeObject::None => Value::Null,
            IncludeObject::Metadata => partial_object_metadata(obj),
            IncludeObject::Object => obj.clone(),
        }
    }
}

fn name_column() -> Column {
    printers::name_column()
}

/// Columns for a custom resource version from its `additionalPrinterColumns`
/// (`CustomResourceColumnDefinition` JSON objects).
///
/// `Name` comes first. Without columns the version gets the default `Age` column. A
/// column whose JSONPath does not parse ends the list there: upstream's convertor returns
/// the columns built so far alongside the error and the handler serves with them.
pub fn crd_columns(additional_printer_columns: &[Value]) -> Vec<Column> {
    let mut columns = vec![name_column()];
    if additional_printer_columns.is_empty() {
        columns.push(Column {
            name: "Age".to_owned(),
            type_: "date".to_owned(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: Some(".metadata.creationTimestamp".to_owned()),
        });
        return columns;
    }
    for def in additional_printer_columns {
        let text = |key: &str| def.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
        let json_path = text("jsonPath");
        if let Err(err) = JsonPath::parse(&json_path) {
            tracing::debug!(%err, "invalid printer column, serving the columns before it");
            break;
        }
        let description = match text("description") {
            d if d.is_empty() => {
                format!("Custom resource definition column (in JSONPath format): {json_path}")
            }
            d => d,
        };
        let priority = def.get("priority").and_then(Value::as_i64).and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
        columns.push(Column {
            name: text("name"),
            type_: text("type"),
            format: text("format"),
            description,
            priority,
            json_path: Some(json_path),
        });
    }
    columns
}

/// Columns of a built-in kind's printer; `None` when this server has no table rendering
/// for the kind, in which case callers fall back to [`default_columns`].
pub fn builtin_columns(group: &str, kind: &str) -> Option<Vec<Column>> {
    match printers::builtin(group, kind)? {
        Builtin::Printer(p) => Some((p.columns)()),
        Builtin::Default => Some(default_columns()),
    }
}

/// The default table convertor's columns (`rest.NewDefaultTableConvertor`): `Name` and
/// `Created At`, the latter holding the RFC 3339 creation time rather than an age.
pub fn default_columns() -> Vec<Column> {
    vec![
        name_column(),
        Column {
            name: "Created At".to_owned(),
            type_: "date".to_owned(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: None,
        },
    ]
}

/// The cells of one row, matching `columns`.
///
/// Columns from [`crd_columns`] are evaluated from their JSONPath; the columns of a
/// built-in printer are computed by that printer; anything else is filled by name
/// (`Name`, `Created At`, `Age`), and unknown columns get `null`.
pub fn row_cells(columns: &[Column], group: &str, kind: &str, obj: &Value, now: Timestamp) -> Vec<Value> {
    let has_json_paths = columns.iter().any(|c| c.json_path.is_some());
    if let (false, Some(Builtin::Printer(p))) = (has_json_paths, printers::builtin(group, kind)) {
        let cells = (p.cells)(obj, now);
        if cells.len() == columns.len() {
            return cells;
        }
    }
    columns.iter().map(|c| generic_cell(c, obj, now)).collect()
}

fn generic_cell(column: &Column, obj: &Value, now: Timestamp) -> Value {
    let creation = obj.get("metadata").and_then(|m| m.get("creationTimestamp")).and_then(Value::as_str);
    match (&column.json_path, column.name.as_str()) {
        (Some(path), _) => json_path_cell(column, path, obj, now),
        (None, "Name") => Value::String(
            obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("").to_owned(),
        ),
        // Go formats the zero time when the timestamp is missing.
        (None, "Created At") => Value::String(
            creation.and_then(parse_timestamp).map_or_else(|| "0001-01-01T00:00:00Z".to_owned(), format_rfc3339),
        ),
        (None, "Age") => Value::String(age_of(creation, now)),
        (None, _) => Value::Null,
    }
}

/// A CRD column cell: the first value the path selects, typed as `cellForJSONValue` does.
fn json_path_cell(column: &Column, path: &str, obj: &Value, now: Timestamp) -> Value {
    let Ok(path) = JsonPath::parse(path) else {
        return Value::Null;
    };
    let value = match path.find(obj) {
        Ok(found) => match found.first() {
            Some(v) => *v,
            None => return Value::Null,
        },
        Err(_) => return Value::Null,
    };
    match column.type_.as_str() {
        // String columns print whatever was found, including JSON for objects.
        "string" => go_print(value).map_or(Value::Null, Value::String),
        "integer" => match value {
            Value::Number(n) => match n.as_i64() {
                Some(i) => json!(i),
                // Go converts float64 to int64 by truncation.
                None => n.as_f64().map_or(Value::Null, |f| json!(f as i64)),
            },
            _ => Value::Null,
        },
        "number" => match value {
            Value::Number(n) => n.as_f64().map_or(Value::Null, go_float_json),
            _ => Value::Null,
        },
        "boolean" => match value {
            Value::Bool(b) => Value::Bool(*b),
            _ => Value::Null,
        },
        "date" => match value {
            // metav1.Time decodes "" and "null" as the zero time.
            Value::String(s) if s.is_empty() || s == "null" => Value::String("<unknown>".to_owned()),
            Value::String(s) => {
                Value::String(parse_timestamp(s).map_or_else(|| "<invalid>".to_owned(), |ts| human_since(ts, now)))
            }
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// A float64 cell as Go's encoder writes it: integral values without a fraction.
fn go_float_json(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 { json!(f as i64) } else { json!(f) }
}

/// `JSONPath.PrintResults` of one value: objects and arrays as compact JSON, scalars as
/// `fmt.Fprint` prints them, and a JSON null as text/template's `<no value>`.
fn go_print(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("<no value>".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => i.to_string(),
            None => n.as_f64().map_or_else(|| n.to_string(), go_float_v),
        }),
        Value::Array(_) | Value::Object(_) => {
            let mut out = String::new();
            go_json(value, &mut out, 0).then_some(out)
        }
    }
}

/// `encoding/json.Marshal` of a decoded JSON value: sorted keys, HTML-safe escaping and
/// Go's float formatting. Returns `false` when the value is nested too deeply.
fn go_json(value: &Value, out: &mut String, depth: usize) -> bool {
    if depth > MAX_PRINT_DEPTH {
        return false;
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&go_float_encoding(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if !go_json(item, out, depth + 1) {
                    return false;
                }
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go sorts map keys; the map may preserve insertion order.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(key, out);
                out.push(':');
                if !go_json(item, out, depth + 1) {
                    return false;
                }
            }
            out.push('}');
        }
    }
    true
}

/// A `meta.k8s.io/v1` Table.
///
/// `rows` pairs each row's cells with its object, already shaped by
/// [`IncludeObject::apply`]. The list metadata carries `resourceVersion` (when non-empty),
/// `continue` (when non-empty) and `remainingItemCount` (when known), as `ListMeta` does.
/// With `include_headers = false` (watch events after the first) `columnDefinitions` is
/// `null`, as kube-apiserver sends it.
pub fn table(
    columns: &[Column],
    rows: Vec<(Vec<Value>, Value)>,
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
    include_headers: bool,
) -> Value {
    let column_definitions =
        if include_headers { Value::Array(columns.iter().map(Column::definition).collect()) } else { Value::Null };
    let rows: Vec<Value> = rows.into_iter().map(|(cells, object)| json!({"cells": cells, "object": object})).collect();
    json!({
        "kind": "Table",
        "apiVersion": META_API_VERSION,
        "metadata": list_metadata(resource_version, continue_token, remaining),
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

/// `metav1.ListMeta` with its `omitempty` fields left out when empty.
fn list_metadata(resource_version: &str, continue_token: Option<&str>, remaining: Option<i64>) -> Value {
    let mut metadata = Map::new();
    if !resource_version.is_empty() {
        metadata.insert("resourceVersion".to_owned(), json!(resource_version));
    }
    if let Some(token) = continue_token.filter(|t| !t.is_empty()) {
        metadata.insert("continue".to_owned(), json!(token));
    }
    if let Some(count) = remaining {
        metadata.insert("remainingItemCount".to_owned(), json!(count));
    }
    Value::Object(metadata)
}

/// The `PartialObjectMetadata` of an object: its whole `metadata` (as
/// `meta.AsPartialObjectMetadata` copies every ObjectMeta field) under
/// `meta.k8s.io/v1`.
pub fn partial_object_metadata(obj: &Value) -> Value {
    let metadata = obj.get("metadata").filter(|m| m.is_object()).cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": META_API_VERSION,
        "metadata": metadata,
    })
}

/// A `PartialObjectMetadataList` (`as=PartialObjectMetadataList`), keeping the list's
/// `resourceVersion`, `continue` and `remainingItemCount` like [`table`] does.
pub fn partial_object_metadata_list(
    items: &[Value],
    resource_version: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": META_API_VERSION,
        "metadata": list_metadata(resource_version, continue_token, remaining),
        "items": items.iter().map(partial_object_metadata).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::printers::NAME_DESCRIPTION;
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().unwrap()
    }

    fn crd_column(name: &str, type_: &str, path: &str) -> Value {
        json!({"name": name, "type": type_, "jsonPath": path})
    }

    fn foo() -> Value {
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Foo",
            "metadata": {"name": "a", "namespace": "ns", "creationTimestamp": "2024-05-01T11:55:00Z",
                         "resourceVersion": "7", "labels": {"x": "y"}},
            "spec": {"replicas": 3, "ratio": 0.5, "big": 2.0, "enabled": true, "tags": ["t1", "t2"],
                     "nested": {"b": "<x>", "a": 1}, "nothing": null, "when": "2024-05-01T10:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        })
    }

    #[test]
    fn test_crd_without_columns_gets_name_and_age() {
        let cols = crd_columns(&[]);
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "Age"]);
        assert_eq!(cols[0].format, "name");
        assert_eq!(cols[1].type_, "date");
        assert_eq!(cols[1].json_path.as_deref(), Some(".metadata.creationTimestamp"));
        assert_eq!(row_cells(&cols, "example.com", "Foo", &foo(), now()), [json!("a"), json!("5m")]);
    }

    #[test]
    fn test_crd_columns_keep_type_format_priority_and_description() {
        let cols = crd_columns(&[
            json!({"name": "Replicas", "type": "integer", "format": "int32", "priority": 1,
                   "jsonPath": ".spec.replicas", "description": "desired"}),
            crd_column("Ready", "string", r#".status.conditions[?(@.type=="Ready")].status"#),
        ]);
        assert_eq!(cols.len(), 3);
        assert_eq!(cols[1].format, "int32");
        assert_eq!(cols[1].priority, 1);
        assert_eq!(cols[1].description, "desired");
        assert_eq!(
            cols[2].description,
            r#"Custom resource definition column (in JSONPath format): .status.conditions[?(@.type=="Ready")].status"#
        );
        assert_eq!(row_cells(&cols, "example.com", "Foo", &foo(), now()), [json!("a"), json!(3), json!("True")]);
    }

    #[test]
    fn test_crd_columns_stop_at_first_unparsable_path() {
        let cols = crd_columns(&[
            crd_column("A", "string", ".spec.replicas"),
            crd_column("B", "string", ".spec[oops"),
            crd_column("C", "string", ".spec.replicas"),
        ]);
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "A"]);
    }

    #[test]
    fn test_crd_cells_are_typed_per_column() {
        let cols = crd_columns(&[
            crd_column("I", "integer", ".spec.replicas"),
            crd_column("IF", "integer", ".spec.ratio"),
            crd_column("N", "number", ".spec.replicas"),
            crd_column("NF", "number", ".spec.ratio"),
            crd_column("B", "boolean", ".spec.enabled"),
            crd_column("S", "string", ".spec.replicas"),
            crd_column("SF", "string", ".spec.ratio"),
            crd_column("SB", "string", ".spec.enabled"),
            crd_column("D", "date", ".spec.when"),
        ]);
        let cells = row_cells(&cols, "example.com", "Foo", &foo(), now());
        assert_eq!(
            cells[1..],
            [
                json!(3),
                json!(0),
                json!(3),
                json!(0.5),
                json!(true),
                json!("3"),
                json!("0.5"),
                json!("true"),
                json!("120m")
            ]
        );
    }

    #[test]
    fn test_crd_cells_with_wrong_type_or_missing_value_are_null() {
        let cols = crd_columns(&[
            crd_column("I", "integer", ".spec.enabled"),
            crd_column("B", "boolean", ".spec.replicas"),
            crd_column("D", "date", ".spec.replicas"),
            crd_column("M", "string", ".spec.missing"),
            crd_column("E", "string", ".spec.tags[9]"),
            crd_column("U", "unknown", ".spec.replicas"),
            crd_column("N", "integer", ".spec.nothing"),
        ]);
        let cells = row_cells(&cols, "example.com", "Foo", &foo(), now());
        assert!(cells[1..].iter().all(Value::is_null), "{cells:?}");
    }

    #[test]
    fn test_string_column_prints_null_as_no_value() {
        let cols = crd_columns(&[crd_column("S", "string", ".spec.nothing")]);
        assert_eq!(row_cells(&cols, "example.com", "Foo", &foo(), now())[1], json!("<no value>"));
    }

    #[test]
    fn test_string_column_prints_objects_and_arrays_as_go_json() {
        let cols = crd_columns(&[crd_column("O", "string", ".spec.nested"), crd_column("A", "string", ".spec.tags")]);
        let cells = row_cells(&cols, "example.com", "Foo", &foo(), now());
        assert_eq!(cells[1], json!(r#"{"a":1,"b":"\u003cx\u003e"}"#));
        assert_eq!(cells[2], json!(r#"["t1","t2"]"#));
    }

    #[test]
    fn test_multiple_results_use_only_the_first_like_upstream() {
        let cols = crd_columns(&[crd_column("T", "string", ".spec.tags[*]")]);
        assert_eq!(row_cells(&cols, "example.com", "Foo", &foo(), now())[1], json!("t1"));
    }

    #[test]
    fn test_date_column_edge_cases() {
        let cols = crd_columns(&[crd_column("D", "date", ".spec.when")]);
        let mut obj = foo();
        obj["spec"]["when"] = json!("");
        assert_eq!(row_cells(&cols, "", "Foo", &obj, now())[1], json!("<unknown>"));
        obj["spec"]["when"] = json!("yesterday");
        assert_eq!(row_cells(&cols, "", "Foo", &obj, now())[1], json!("<invalid>"));
        obj["spec"]["when"] = json!("2024-05-01T12:00:05Z");
        assert_eq!(row_cells(&cols, "", "Foo", &obj, now())[1], json!("<invalid>"));
    }

    #[test]
    fn test_go_float_formatting() {
        assert_eq!(go_float_v(0.5), "0.5");
        assert_eq!(go_float_v(123456.0), "123456");
        assert_eq!(go_float_v(1234567.5), "1.2345675e+06");
        assert_eq!(go_float_v(0.00001), "1e-05");
        assert_eq!(go_float_v(0.0), "0");
        assert_eq!(go_float_encoding(1e21), "1e+21");
        assert_eq!(go_float_encoding(1e-7), "1e-7");
        assert_eq!(go_float_encoding(2.5), "2.5");
    }

    #[test]
    fn test_builtin_columns_and_cells_for_configmap() {
        let cols = builtin_columns("", "ConfigMap").unwrap();
        let cm = json!({"metadata": {"name": "c", "creationTimestamp": "2024-05-01T11:00:00Z"}, "data": {"k": "v"}});
        assert_eq!(row_cells(&cols, "", "ConfigMap", &cm, now()), [json!("c"), json!(1), json!("60m")]);
    }

    #[test]
    fn test_default_convertor_prints_created_at_timestamp() {
        let cols = builtin_columns("rbac.authorization.k8s.io", "ClusterRole").unwrap();
        let names: Vec<&str> = cols.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Name", "Created At"]);
        assert_eq!(cols[1].type_, "date");
        let role = json!({"metadata": {"name": "view", "creationTimestamp": "2024-05-01T11:00:00Z"}});
        assert_eq!(
            row_cells(&cols, "rbac.authorization.k8s.io", "ClusterRole", &role, now()),
            [json!("view"), json!("2024-05-01T11:00:00Z")]
        );
        assert_eq!(
            row_cells(&cols, "rbac.authorization.k8s.io", "ClusterRole", &json!({}), now()),
            [json!(""), json!("0001-01-01T00:00:00Z")]
        );
    }

    #[test]
    fn test_unknown_builtin_has_no_columns_and_default_columns_work_for_it() {
        assert!(builtin_columns("example.com", "Foo").is_none());
        let cols = default_columns();
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2024-05-01T11:00:00Z"}});
        assert_eq!(row_cells(&cols, "example.com", "Foo", &obj, now())[0], json!("x"));
    }

    #[test]
    fn test_crd_columns_win_over_builtin_printer_of_same_kind() {
        let cols = crd_columns(&[crd_column("R", "integer", ".spec.replicas")]);
        let obj = json!({"metadata": {"name": "p"}, "spec": {"replicas": 2}});
        assert_eq!(row_cells(&cols, "", "Pod", &obj, now()), [json!("p"), json!(2)]);
    }

    #[test]
    fn test_include_object_parse() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("")), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("Metadata")), Ok(IncludeObject::Metadata));
        assert_eq!(IncludeObject::parse(Some("Object")), Ok(IncludeObject::Object));
        assert_eq!(IncludeObject::parse(Some("None")), Ok(IncludeObject::None));
        assert_eq!(IncludeObject::parse(Some("all")), Err(r#"unrecognized includeObject value: "all""#.to_owned()));
    }

    #[test]
    fn test_include_object_apply() {
        let obj = foo();
        assert_eq!(IncludeObject::None.apply(&obj), Value::Null);
        assert_eq!(IncludeObject::Object.apply(&obj), obj);
        let partial = IncludeObject::Metadata.apply(&obj);
        assert_eq!(partial["kind"], "PartialObjectMetadata");
        assert_eq!(partial["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(partial["metadata"], obj["metadata"]);
        assert!(partial.get("spec").is_none());
    }

    #[test]
    fn test_partial_object_metadata_without_metadata() {
        assert_eq!(
            partial_object_metadata(&json!({"kind": "X"})),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {}})
        );
    }

    #[test]
    fn test_table_body_shape() {
        let cols = crd_columns(&[]);
        let obj = foo();
        let cells = row_cells(&cols, "example.com", "Foo", &obj, now());
        let t = table(&cols, vec![(cells, IncludeObject::Metadata.apply(&obj))], "42", Some("tok"), Some(3), true);
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3}));
        assert_eq!(
            t["columnDefinitions"][0],
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESCRIPTION, "priority": 0})
        );
        assert_eq!(t["columnDefinitions"][1]["name"], "Age");
        assert_eq!(t["rows"][0]["cells"], json!(["a", "5m"]));
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "ns");
    }

    #[test]
    fn test_table_without_headers_and_empty_metadata() {
        let t = table(&crd_columns(&[]), vec![(vec![json!("a")], Value::Null)], "", Some(""), None, false);
        assert_eq!(t["columnDefinitions"], Value::Null);
        assert!(t.as_object().unwrap().contains_key("columnDefinitions"));
        assert_eq!(t["metadata"], json!({}));
        assert_eq!(t["rows"][0], json!({"cells": ["a"], "object": null}));
        let empty = table(&[], Vec::new(), "1", None, None, true);
        assert_eq!(empty["rows"], json!([]));
        assert_eq!(empty["columnDefinitions"], json!([]));
    }

    #[test]
    fn test_partial_object_metadata_list_keeps_list_metadata() {
        let list = partial_object_metadata_list(&[foo()], "9", Some("next"), None);
        assert_eq!(list["kind"], "PartialObjectMetadataList");
        assert_eq!(list["metadata"], json!({"resourceVersion": "9", "continue": "next"}));
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
        assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");
    }
}
