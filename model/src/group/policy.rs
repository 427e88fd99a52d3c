//! A group's `UpdatePolicy`: the RollingUpdate that decides how a new launch
//! configuration reaches existing members.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `UpdatePolicy.RollingUpdate` (`AutoScalingRollingUpdate` is accepted too,
/// CloudFormation's name for an AutoScalingGroup).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RollingUpdate {
    pub min_instances_in_service: u64,
    pub max_batch_size: u64,
    /// Milliseconds between batches (not after the last); with
    /// `wait_on_resource_signals`, how long a batch waits for its signals.
    pub pause_ms: u64,
    /// `WaitOnResourceSignals`: each batch's new members signal the group
    /// (SignalResource) before the batch goes on.
    #[serde(default)]
    pub wait_on_resource_signals: bool,
    /// `MinSuccessfulInstancesPercent` of a batch's signals (default 100).
    #[serde(default = "all_percent")]
    pub min_successful_instances_percent: u64,
}

fn all_percent() -> u64 {
    100
}

impl Default for RollingUpdate {
    /// Heat's defaults: `{MinInstancesInService: 0, MaxBatchSize: 1, PauseTime: PT0S}`.
    fn default() -> Self {
        RollingUpdate {
            min_instances_in_service: 0,
            max_batch_size: 1,
            pause_ms: 0,
            wait_on_resource_signals: false,
            min_successful_instances_percent: 100,
        }
    }
}

impl RollingUpdate {
    pub fn pause(&self) -> Duration {
        Duration::from_millis(self.pause_ms)
    }
}

/// The longest PauseTime (Heat's limit).
const MAX_PAUSE: Duration = Duration::from_secs(3600);

/// The RollingUpdate of an evaluated `UpdatePolicy`, if it has one.
/// `logical_id` names the group in errors.
pub fn rolling_update(
    update_policy: Option<&Value>,
    logical_id: &str,
) -> Result<Option<RollingUpdate>, super::GroupError> {
    rolling_update_text(update_policy, logical_id).map_err(super::GroupError::InvalidUpdatePolicy)
}

/// [`rolling_update`], its texts.
fn rolling_update_text(
    update_policy: Option<&Value>,
    logical_id: &str,
) -> Result<Option<RollingUpdate>, String> {
    let Some(policy) = update_policy else {
        return Ok(None);
    };
    let Some(policy) = policy.as_object() else {
        return Err(format!("UpdatePolicy of {logical_id} must be an object"));
    };
    let entry = policy
        .get("RollingUpdate")
        .or_else(|| policy.get("AutoScalingRollingUpdate"));
    let Some(entry) = entry else {
        return Ok(None);
    };
    let Some(entry) = entry.as_object() else {
        return Err(format!(
            "UpdatePolicy.RollingUpdate of {logical_id} must be an object"
        ));
    };
    let mut rolling = RollingUpdate::default();
    for (key, value) in entry {
        match key.as_str() {
            "MinInstancesInService" => {
                rolling.min_instances_in_service = count(value, ("RollingUpdate", key), logical_id, 0)?
            }
            "MaxBatchSize" => rolling.max_batch_size = count(value, ("RollingUpdate", key), logical_id, 1)?,
            "PauseTime" => {
                let text = value.as_str().ok_or_else(|| iso_only(logical_id))?;
                rolling.pause_ms = pause_time(text, logical_id)?.as_millis() as u64;
            }
            "WaitOnResourceSignals" => {
                rolling.wait_on_resource_signals = match value {
                    Value::Bool(b) => *b,
                    Value::String(s) if s.eq_ignore_ascii_case("true") => true,
                    Value::String(s) if s.eq_ignore_ascii_case("false") => false,
                    _ => {
                        return Err(format!(
                            "UpdatePolicy.RollingUpdate.WaitOnResourceSignals of {logical_id} must be true or false, not {value}"
                        ))
                    }
                }
            }
            "MinSuccessfulInstancesPercent" => {
                let p = count(value, ("RollingUpdate", key), logical_id, 0)?;
                if p > 100 {
                    return Err(format!(
                        "UpdatePolicy.RollingUpdate.MinSuccessfulInstancesPercent of {logical_id} must be from 0 to 100, not {p}"
                    ));
                }
                rolling.min_successful_instances_percent = p;
            }
            // Accepted: Cairn's groups have no scaling processes to suspend.
            "SuspendProcesses" => {}
            other => {
                return Err(format!(
                    "UpdatePolicy.RollingUpdate of {logical_id} has an unknown key {other}; use MinInstancesInService, MaxBatchSize, PauseTime, WaitOnResourceSignals, MinSuccessfulInstancesPercent or SuspendProcesses"
                ))
            }
        }
    }
    Ok(Some(rolling))
}

/// `UpdatePolicy.BatchCreate` (HOT's ResourceGroup `batch_create`, which
/// the front end lowers to it): a new group's members are made
/// `max_batch_size` at a time, `pause_ms` between batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchCreate {
    pub max_batch_size: u64,
    pub pause_ms: u64,
}

/// The BatchCreate of an evaluated `UpdatePolicy`, if it has one.
pub fn batch_create(
    update_policy: Option<&Value>,
    logical_id: &str,
) -> Result<Option<BatchCreate>, super::GroupError> {
    batch_create_text(update_policy, logical_id).map_err(super::GroupError::InvalidUpdatePolicy)
}

fn batch_create_text(
    update_policy: Option<&Value>,
    logical_id: &str,
) -> Result<Option<BatchCreate>, String> {
    let Some(entry) = update_policy.and_then(|p| p.get("BatchCreate")) else {
        return Ok(None);
    };
    let Some(entry) = entry.as_object() else {
        return Err(format!(
            "UpdatePolicy.BatchCreate of {logical_id} must be an object"
        ));
    };
    let mut batch = BatchCreate {
        max_batch_size: 1,
        pause_ms: 0,
    };
    for (key, value) in entry {
        match key.as_str() {
            "MaxBatchSize" => batch.max_batch_size = count(value, ("BatchCreate", key), logical_id, 1)?,
            "PauseTime" => {
                let text = value.as_str().ok_or_else(|| iso_only(logical_id))?;
                batch.pause_ms = pause_time(text, logical_id)?.as_millis() as u64;
            }
            other => {
                return Err(format!(
                    "UpdatePolicy.BatchCreate of {logical_id} has an unknown key {other}; use MaxBatchSize or PauseTime"
                ))
            }
        }
    }
    Ok(Some(batch))
}

/// A non-negative integer given as a number or a string ("1", as in the seed).
/// `(section, key)`: where it is, for the message.
fn count(
    value: &Value,
    (section, key): (&str, &str),
    logical_id: &str,
    min: u64,
) -> Result<u64, String> {
    let n = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    match n {
        Some(n) if n >= min => Ok(n),
        _ => Err(format!(
            "UpdatePolicy.{section}.{key} of {logical_id} must be an integer of at least {min}, not {value}"
        )),
    }
}

fn iso_only(logical_id: &str) -> String {
    format!("PauseTime of {logical_id}: Only ISO 8601 duration format of the form PT#H#M#S is supported.")
}

/// An ISO 8601 duration of hours, minutes and seconds (`PT30S`, `PT1M30S`),
/// at most one hour.
pub(crate) fn pause_time(text: &str, logical_id: &str) -> Result<Duration, String> {
    let span: jiff::Span = text.parse().map_err(|_| iso_only(logical_id))?;
    if !text.starts_with("PT")
        || span.get_years() != 0
        || span.get_months() != 0
        || span.get_weeks() != 0
        || span.get_days() != 0
        || span.is_negative()
    {
        return Err(iso_only(logical_id));
    }
    let seconds = span
        .total(jiff::Unit::Second)
        .map_err(|_| iso_only(logical_id))?;
    let pause = Duration::from_secs_f64(seconds.max(0.0));
    if pause > MAX_PAUSE {
        return Err(format!(
            "PauseTime of {logical_id}: Maximum PauseTime is 1 hour."
        ));
    }
    Ok(pause)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_a_batch_create_and_names_it_in_errors() {
        let p = json!({"BatchCreate": {"MaxBatchSize": "2", "PauseTime": "PT1S"}});
        assert_eq!(
            batch_create(Some(&p), "G").unwrap(),
            Some(BatchCreate {
                max_batch_size: 2,
                pause_ms: 1000
            })
        );
        let bad = json!({"BatchCreate": {"MaxBatchSize": 0}});
        assert_eq!(
            batch_create(Some(&bad), "G").unwrap_err().to_string(),
            "UpdatePolicy.BatchCreate.MaxBatchSize of G must be an integer of at least 1, not 0"
        );
        assert_eq!(batch_create(Some(&json!({})), "G").unwrap(), None);
    }

    #[test]
    fn reads_the_seeds_policy_with_string_numbers() {
        let p = json!({"RollingUpdate": {"MinInstancesInService": "1", "MaxBatchSize": "5", "PauseTime": "PT30S"}});
        assert_eq!(
            rolling_update(Some(&p), "G").unwrap(),
            Some(RollingUpdate {
                min_instances_in_service: 1,
                max_batch_size: 5,
                pause_ms: 30_000,
                ..RollingUpdate::default()
            })
        );
        let p = json!({"AutoScalingRollingUpdate": {"WaitOnResourceSignals": "true", "MinSuccessfulInstancesPercent": 50, "PauseTime": "PT5M", "SuspendProcesses": ["HealthCheck"]}});
        let r = rolling_update(Some(&p), "G").unwrap().unwrap();
        assert!(r.wait_on_resource_signals);
        assert_eq!(
            (r.min_successful_instances_percent, r.pause_ms),
            (50, 300_000)
        );
        let p = json!({"RollingUpdate": {"MinSuccessfulInstancesPercent": 101}});
        assert!(rolling_update(Some(&p), "G")
            .unwrap_err()
            .to_string()
            .contains("from 0 to 100"));
        let p = json!({"AutoScalingRollingUpdate": {"MaxBatchSize": 2}});
        assert_eq!(
            rolling_update(Some(&p), "G")
                .unwrap()
                .unwrap()
                .max_batch_size,
            2
        );
        assert_eq!(
            rolling_update(Some(&json!({"RollingUpdate": {}})), "G").unwrap(),
            Some(RollingUpdate::default())
        );
        assert_eq!(rolling_update(None, "G").unwrap(), None);
    }

    #[test]
    fn pause_time_is_iso_8601_time_and_at_most_an_hour() {
        assert_eq!(pause_time("PT1M30S", "G").unwrap(), Duration::from_secs(90));
        assert_eq!(pause_time("PT1H", "G").unwrap(), Duration::from_secs(3600));
        assert_eq!(
            pause_time("PT0.5S", "G").unwrap(),
            Duration::from_millis(500)
        );
        let iso =
            "PauseTime of G: Only ISO 8601 duration format of the form PT#H#M#S is supported.";
        assert_eq!(pause_time("ABCD1234", "G").unwrap_err(), iso);
        assert_eq!(pause_time("P1YT1H", "G").unwrap_err(), iso);
        assert_eq!(pause_time("30", "G").unwrap_err(), iso);
        assert_eq!(
            pause_time("PT61M", "G").unwrap_err(),
            "PauseTime of G: Maximum PauseTime is 1 hour."
        );
    }

    #[test]
    fn bad_counts_are_named() {
        let p = json!({"RollingUpdate": {"MaxBatchSize": "0"}});
        assert_eq!(
            rolling_update(Some(&p), "G").unwrap_err(),
            super::super::GroupError::InvalidUpdatePolicy(
                "UpdatePolicy.RollingUpdate.MaxBatchSize of G must be an integer of at least 1, not \"0\"".into()
            )
        );
    }
}
