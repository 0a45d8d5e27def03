//! Interoperability with the JSON that Go programs write.

use serde::{Deserialize, Deserializer};

/// Read `null` as the default value: Go's `encoding/json` writes nil slices and maps as `null`.
/// Use as `#[serde(default, deserialize_with = "apis::go::null_as_default")]`.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #[derive(serde::Deserialize)]
    struct Shape {
        #[serde(default, deserialize_with = "super::null_as_default")]
        items: Vec<String>,
    }

    #[test]
    fn null_absent_and_present_lists() {
        let null: Shape = serde_json::from_str(r#"{"items": null}"#).unwrap();
        assert!(null.items.is_empty());
        let absent: Shape = serde_json::from_str("{}").unwrap();
        assert!(absent.items.is_empty());
        let present: Shape = serde_json::from_str(r#"{"items": ["a"]}"#).unwrap();
        assert_eq!(present.items, ["a"]);
    }
}
