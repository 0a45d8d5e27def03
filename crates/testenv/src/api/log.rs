//! `pods/log`: which container a log request names (`LogLocation` in
//! `pkg/registry/core/pod/strategy.go`). Simulated containers write nothing, so the server
//! answers an empty log once the container is valid.

use serde_json::Value;

use crate::error::ApiError;

fn names(list: Option<&Value>) -> Vec<&str> {
    list.and_then(Value::as_array)
        .map(|l| l.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default()
}

/// The container a log request reads: `container`, or the only container of the pod.
pub fn pod_log_container(pod: &Value, name: &str, container: Option<&str>) -> Result<String, ApiError> {
    let spec = pod.get("spec");
    let containers = names(spec.and_then(|s| s.get("containers")));
    let init = names(spec.and_then(|s| s.get("initContainers")));
    let ephemeral = names(spec.and_then(|s| s.get("ephemeralContainers")));
    match container.filter(|c| !c.is_empty()) {
        None if containers.len() == 1 => Ok(containers[0].to_string()),
        None => {
            let mut message =
                format!("a container name must be specified for pod {name}, choose one of: [{}]", containers.join(" "));
            if !init.is_empty() {
                message.push_str(&format!(" or one of the init containers: [{}]", init.join(" ")));
            }
            if !ephemeral.is_empty() {
                message.push_str(&format!(" or one of the ephemeral containers: [{}]", ephemeral.join(" ")));
            }
            Err(ApiError::bad_request(message))
        }
        Some(c) if containers.contains(&c) || init.contains(&c) || ephemeral.contains(&c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!("container {c} is not valid for pod {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_container_must_be_named_when_there_are_several() {
        let one = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(pod_log_container(&one, "p", None).unwrap(), "a");
        let two = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}], "initContainers": [{"name": "i"}]}});
        let e = pod_log_container(&two, "p", None).unwrap_err();
        assert_eq!(e.code, 400);
        assert_eq!(
            e.message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        assert_eq!(pod_log_container(&two, "p", Some("i")).unwrap(), "i");
        assert_eq!(pod_log_container(&two, "p", Some("x")).unwrap_err().message, "container x is not valid for pod p");
    }
}
