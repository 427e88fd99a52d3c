//! Checking a handler's response against the request it answers. Every way
//! a response can be wrong becomes the resource's status reason, so each
//! message says exactly what was wrong.

use cairn_sdk::custom_resource::{
    CustomResourceRequest, CustomResourceResponse, ResponseStatus, MAX_RESPONSE_BYTES,
};
use serde_json::Value;

/// The response in `body`, if it is a valid answer to `req`; otherwise the
/// reason the resource fails with.
pub(crate) fn check(
    req: &CustomResourceRequest,
    body: &[u8],
) -> Result<CustomResourceResponse, String> {
    if body.len() > MAX_RESPONSE_BYTES {
        // CloudFormation's text.
        return Err("Response object is too long.".into());
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "Invalid response object: the body is not valid JSON ({e}); send the JSON object cfnresponse sends"
        )
    })?;
    let Value::Object(m) = v else {
        return Err("Invalid response object: the body is JSON but not an object".into());
    };
    let status = match m.get("Status") {
        Some(Value::String(s)) if s == "SUCCESS" => ResponseStatus::Success,
        Some(Value::String(s)) if s == "FAILED" => ResponseStatus::Failed,
        Some(other) => {
            return Err(format!(
                "Invalid response object: Status must be SUCCESS or FAILED, not {other}"
            ))
        }
        None => {
            return Err("Invalid response object: the required property Status is missing".into())
        }
    };
    for (field, expected) in [
        ("StackId", &req.stack_id),
        ("RequestId", &req.request_id),
        ("LogicalResourceId", &req.logical_resource_id),
    ] {
        match m.get(field) {
            Some(Value::String(s)) if s == expected => {}
            Some(Value::String(s)) => {
                return Err(format!(
                "Invalid response object: {field} [{s}] does not match the request's [{expected}]"
            ))
            }
            Some(_) => {
                return Err(format!(
                    "Invalid response object: Value of property {field} must be of type String"
                ))
            }
            None => {
                return Err(format!(
                    "Invalid response object: the required property {field} is missing"
                ))
            }
        }
    }
    let physical_resource_id = match m.get("PhysicalResourceId") {
        Some(Value::String(s)) if !s.is_empty() && s.len() <= 1024 => s.clone(),
        // A failed Create may name none; the caller uses the one it generated.
        None if status == ResponseStatus::Failed => String::new(),
        // CloudFormation's text.
        _ => return Err(
            "Invalid Response object: Value of property PhysicalResourceId must be of type String"
                .into(),
        ),
    };
    let reason = match m.get("Reason") {
        None | Some(Value::Null) if status == ResponseStatus::Success => None,
        Some(Value::String(s)) => Some(s.clone()),
        None => None,
        Some(other) => {
            return Err(format!(
            "Invalid response object: Value of property Reason must be of type String, not {other}"
        ))
        }
    };
    let no_echo = match m.get("NoEcho") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        // cfnresponse sends a boolean; a string "true" is read as such.
        Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => true,
        Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => false,
        Some(other) => {
            return Err(format!(
                "Invalid response object: Value of property NoEcho must be of type Boolean, not {other}"
            ))
        }
    };
    let data = match m.get("Data") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(d)) => d.clone(),
        Some(other) => {
            return Err(format!(
                "Invalid response object: Value of property Data must be an object, not {other}"
            ))
        }
    };
    // Cairn's extension: a typed error. An unknown code (CloudFormation's
    // registry has more) is an InternalFailure, as a FAILED without one.
    let error_code = match (status, m.get("ErrorCode")) {
        (ResponseStatus::Failed, Some(Value::String(code))) => {
            serde_json::from_value(Value::String(code.clone())).ok()
        }
        _ => None,
    };
    Ok(CustomResourceResponse {
        error_code,
        status,
        reason,
        physical_resource_id,
        stack_id: req.stack_id.clone(),
        request_id: req.request_id.clone(),
        logical_resource_id: req.logical_resource_id.clone(),
        no_echo,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_sdk::custom_resource::RequestType;
    use serde_json::json;

    fn req() -> CustomResourceRequest {
        CustomResourceRequest {
            request_type: RequestType::Create,
            service_token: "t".into(),
            response_url: "u".into(),
            stack_id: "stack-1".into(),
            request_id: "req-1".into(),
            resource_type: "Custom::W".into(),
            logical_resource_id: "W".into(),
            physical_resource_id: None,
            resource_properties: serde_json::Map::new(),
            old_resource_properties: None,
            desired_resource_tags: Default::default(),
            previous_resource_tags: Default::default(),
            system_tags: Default::default(),
            type_configuration: None,
        }
    }

    fn body(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn a_valid_response_is_read_whole() {
        let r = check(
            &req(),
            &body(
                json!({"Status": "SUCCESS", "PhysicalResourceId": "p-1", "StackId": "stack-1",
                         "RequestId": "req-1", "LogicalResourceId": "W", "NoEcho": true,
                         "Data": {"Arn": "a", "n.dotted": 1}}),
            ),
        )
        .unwrap();
        assert_eq!(r.status, ResponseStatus::Success);
        assert_eq!(r.physical_resource_id, "p-1");
        assert!(r.no_echo);
        assert_eq!(r.data["n.dotted"], json!(1));
    }

    #[test]
    fn each_defect_has_its_own_reason() {
        let base = json!({"Status": "SUCCESS", "PhysicalResourceId": "p", "StackId": "stack-1",
                          "RequestId": "req-1", "LogicalResourceId": "W"});
        let with = |k: &str, v: Value| {
            let mut b = base.clone();
            b[k] = v;
            check(&req(), &body(b)).unwrap_err()
        };
        assert_eq!(
            with("Status", json!("DONE")),
            "Invalid response object: Status must be SUCCESS or FAILED, not \"DONE\""
        );
        assert_eq!(
            with("RequestId", json!("other")),
            "Invalid response object: RequestId [other] does not match the request's [req-1]"
        );
        assert_eq!(
            with("StackId", json!("s2")),
            "Invalid response object: StackId [s2] does not match the request's [stack-1]"
        );
        assert_eq!(
            with("PhysicalResourceId", json!(5)),
            "Invalid Response object: Value of property PhysicalResourceId must be of type String"
        );
        assert_eq!(
            with("Data", json!([1])),
            "Invalid response object: Value of property Data must be an object, not [1]"
        );
        let long = format!("{{\"Reason\": \"{}\"}}", "x".repeat(5000));
        assert_eq!(
            check(&req(), long.as_bytes()).unwrap_err(),
            "Response object is too long."
        );
        assert!(check(&req(), b"{not json").unwrap_err().starts_with(
            "Invalid response object: the body is not valid JSON (key must be a string at line 1 column 2)"
        ));
        let mut missing = base.clone();
        missing.as_object_mut().unwrap().remove("Status");
        assert_eq!(
            check(&req(), &body(missing)).unwrap_err(),
            "Invalid response object: the required property Status is missing"
        );
    }

    #[test]
    fn a_failed_response_may_omit_the_physical_id() {
        let r = check(
            &req(),
            &body(
                json!({"Status": "FAILED", "Reason": "boom", "StackId": "stack-1",
                         "RequestId": "req-1", "LogicalResourceId": "W"}),
            ),
        )
        .unwrap();
        assert_eq!(r.status, ResponseStatus::Failed);
        assert_eq!(r.reason.as_deref(), Some("boom"));
        assert_eq!(r.physical_resource_id, "");
    }
}
