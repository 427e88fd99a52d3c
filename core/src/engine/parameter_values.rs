//! Parameter values that can only be checked against live resources: a
//! parameter of type `T::Id` (or `List<T::Id>`) must name existing physical
//! resources of type `T`. As in CloudFormation (seed 000 run 31), the check
//! runs inside the workflow, after the stack went IN_PROGRESS and before any
//! resource is touched, and its failure rolls the operation back. Only a
//! provider that says the resource does not exist refuses the value; one
//! that cannot tell (no drift check, a handler that does not know
//! `CheckDrift`, an error) lets it through with a warning event.

use cairn_sdk::{DriftRequest, DriftResult};
use serde_json::Map;

use super::{Op, Protocol};

impl Protocol<'_> {
    /// `Err(reason)` naming the first parameter whose value does not exist;
    /// `Ok(warnings)`: the values that could not be checked, and why.
    pub(super) async fn check_parameter_values(&self, op: &Op) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        for decl in &op.template.parameters {
            // HOT's custom constraints name OpenStack lookups (nova.flavor,
            // glance.image, …) that no Cairn provider answers.
            if let (false, Some(raw)) = (
                decl.custom_constraints.is_empty(),
                op.params.raw.get(&decl.name),
            ) {
                let shown = if decl.no_echo {
                    crate::template::parameters::MASK
                } else {
                    raw
                };
                warnings.push(format!(
                    "Parameter value {shown} for parameter name {} was not checked: Cairn has no custom constraint {}; it is used as given",
                    decl.name,
                    decl.custom_constraints.join(", ")
                ));
            }
            let Some(resource_type) = decl.ty.resource_type() else {
                continue;
            };
            // A type no provider serves cannot be checked (e.g. AWS types
            // without an AWS provider): accepted as the string it is.
            let Ok(registered) = self.provider_for(resource_type, None) else {
                continue;
            };
            let Some(raw) = op.params.raw.get(&decl.name) else {
                continue;
            };
            let values: Vec<&str> = if decl.ty.is_list() {
                raw.split(',').map(str::trim).collect()
            } else {
                vec![raw.as_str()]
            };
            for value in values.into_iter().filter(|v| !v.is_empty()) {
                let request_id = uuid::Uuid::new_v4().to_string();
                let req = DriftRequest {
                    context: self.context(op, &decl.name, resource_type, &request_id),
                    physical_resource_id: value.to_string(),
                    properties: Map::new(),
                };
                let what = format!("parameter {} check", decl.name);
                let unchecked = |why: String| {
                    format!(
                        "Parameter value {value} for parameter name {} was not checked: {why}; it is used as given",
                        decl.name
                    )
                };
                let exists = match self
                    .timed(&what, registered.provider.check_drift(&req))
                    .await
                {
                    Ok(DriftResult::Deleted) => false,
                    Ok(DriftResult::NotChecked) => {
                        warnings.push(unchecked(format!(
                            "provider {} cannot tell whether a {resource_type} exists",
                            registered.provider_name
                        )));
                        true
                    }
                    Ok(_) => true,
                    Err(e) if e.is_not_found() => false,
                    Err(e) => {
                        warnings.push(unchecked(format!(
                            "asking provider {} failed: {e}",
                            registered.provider_name
                        )));
                        true
                    }
                };
                if !exists {
                    return Err(format!(
                        "Parameter validation failed: parameter value for parameter name {} does not exist",
                        decl.name
                    ));
                }
            }
        }
        Ok(warnings)
    }
}
