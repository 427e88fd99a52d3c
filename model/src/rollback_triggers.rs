//! Rollback triggers (CloudFormation's `RollbackConfiguration`): what an
//! operation watches while it rolls forward and for a monitoring period
//! after its last resource, rolling the stack back when one reports ALARM.
//!
//! CloudFormation's triggers are CloudWatch alarms; a self-hosted platform
//! has health checks and Prometheus alerts instead, so Cairn's trigger
//! types are
//! - `Cairn::Http::HealthCheck`: `Arn` is an `http(s)://` URL; a GET that
//!   answers with a status that is not a success is ALARM;
//! - `Cairn::Prometheus::Alert`: `Arn` is an Alertmanager URL with the
//!   alert's name as its fragment (`http://alertmanager:9093#HighErrorRate`);
//!   the alert active in Alertmanager's API (v2) is ALARM.
//!
//! CloudFormation's rules kept: at most 5 triggers, a monitoring period of
//! 0–180 minutes, only ALARM rolls back, a trigger that cannot be read
//! fails the operation (CloudFormation's missing alarm), specifying the
//! triggers replaces the stored list and an empty list removes them all,
//! leaving them out keeps them.
//! Pure: parsing, checking and reading answers; the engine does the GETs.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// At most this many triggers (CloudFormation's limit).
pub const MAX_TRIGGERS: usize = 5;
/// The longest monitoring period, in minutes (CloudFormation's limit).
pub const MAX_MONITORING_MINUTES: u32 = 180;

/// The trigger type of an HTTP health check.
pub const HEALTH_CHECK: &str = "Cairn::Http::HealthCheck";
/// The trigger type of a Prometheus alert read from Alertmanager.
pub const PROMETHEUS_ALERT: &str = "Cairn::Prometheus::Alert";

/// `RollbackConfiguration` as CloudFormation's API and DescribeStacks
/// write it. As given to an operation, a field left out keeps the stack's
/// (see [`RollbackConfiguration::applied_to`]); as stored, both are set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct RollbackConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_triggers: Option<Vec<RollbackTrigger>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring_time_in_minutes: Option<u32>,
}

/// One trigger: `Arn` (what to read) and `Type` (how).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
pub struct RollbackTrigger {
    pub arn: String,
    #[serde(rename = "Type")]
    pub kind: String,
}

impl fmt::Display for RollbackTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}]", self.kind, self.arn)
    }
}

/// How a trigger is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// GET this URL; a status that is not a success is ALARM.
    Health { url: String },
    /// GET `query` (Alertmanager's active alerts of that name); `alert`
    /// among them is ALARM.
    Alert { query: String, alert: String },
}

/// What one look at a trigger found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Ok,
    /// In ALARM, and why (shown in the rollback's reason).
    Alarm(String),
}

/// Why a rollback configuration or one of its triggers cannot be taken
/// (CloudFormation's validation texts where it has them), or an answer
/// that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TriggerError {
    #[error("RollbackConfiguration is not valid: {0}; expected {{\"RollbackTriggers\": [{{\"Arn\": \"…\", \"Type\": \"{HEALTH_CHECK}\"}}], \"MonitoringTimeInMinutes\": 0}}")]
    Malformed(String),
    #[error("1 validation error detected: Value at 'rollbackConfiguration.rollbackTriggers' failed to satisfy constraint: Member must have length less than or equal to {MAX_TRIGGERS}")]
    TooMany,
    #[error("1 validation error detected: Value '{0}' at 'rollbackConfiguration.monitoringTimeInMinutes' failed to satisfy constraint: Member must have value less than or equal to {MAX_MONITORING_MINUTES}")]
    MonitoringTooLong(u32),
    #[error("Rollback trigger {0} is listed twice: list each trigger once")]
    ListedTwice(String),
    #[error("Rollback trigger {0}: the Arn of a {HEALTH_CHECK} trigger is the http:// or https:// URL of a health check")]
    HealthCheckArn(String),
    #[error("Rollback trigger {0}: the Arn of a {PROMETHEUS_ALERT} trigger is an Alertmanager URL with the alert's name as its fragment, such as http://alertmanager:9093#HighErrorRate")]
    AlertArn(String),
    #[error("Rollback trigger type {0} is not supported: Cairn reads {HEALTH_CHECK} (Arn: a health check's URL) and {PROMETHEUS_ALERT} (Arn: an Alertmanager URL#alert name) triggers, not CloudWatch alarms")]
    UnsupportedType(String),
    #[error("Alertmanager's answer is not a list of alerts: {0}")]
    UnreadableAnswer(String),
}

impl RollbackConfiguration {
    /// Reads the JSON (or YAML turned JSON) of `--rollback-configuration`
    /// and of the API: CloudFormation's field names.
    pub fn from_value(v: Value) -> Result<RollbackConfiguration, TriggerError> {
        serde_json::from_value(v).map_err(|e| TriggerError::Malformed(e.to_string()))
    }

    /// The triggers (none when left out).
    pub fn triggers(&self) -> &[RollbackTrigger] {
        self.rollback_triggers.as_deref().unwrap_or_default()
    }

    /// The monitoring period in minutes (0 when left out).
    pub fn monitoring_minutes(&self) -> u32 {
        self.monitoring_time_in_minutes.unwrap_or(0)
    }

    /// Nothing to watch and no period to wait.
    pub fn is_empty(&self) -> bool {
        self.triggers().is_empty() && self.monitoring_minutes() == 0
    }

    /// The configuration an operation given `self` runs with, on a stack
    /// whose stored one is `stored`: each field given replaces the
    /// stored one (an empty trigger list removes them all), each left
    /// out keeps it.
    pub fn applied_to(&self, stored: Option<&RollbackConfiguration>) -> RollbackConfiguration {
        let stored = stored.cloned().unwrap_or_default();
        RollbackConfiguration {
            rollback_triggers: Some(
                self.rollback_triggers
                    .clone()
                    .unwrap_or_else(|| stored.triggers().to_vec()),
            ),
            monitoring_time_in_minutes: Some(
                self.monitoring_time_in_minutes
                    .unwrap_or(stored.monitoring_minutes()),
            ),
        }
    }

    /// CloudFormation's limits and Cairn's trigger types; the texts are
    /// CloudFormation's validation errors, with what to do for a type
    /// Cairn cannot read.
    pub fn check(&self) -> Result<(), TriggerError> {
        let triggers = self.triggers();
        if triggers.len() > MAX_TRIGGERS {
            return Err(TriggerError::TooMany);
        }
        if self.monitoring_minutes() > MAX_MONITORING_MINUTES {
            return Err(TriggerError::MonitoringTooLong(self.monitoring_minutes()));
        }
        for (i, t) in triggers.iter().enumerate() {
            if triggers[..i].iter().any(|u| u.arn == t.arn) {
                return Err(TriggerError::ListedTwice(t.arn.clone()));
            }
            t.probe()?;
        }
        Ok(())
    }
}

impl RollbackTrigger {
    /// How this trigger is read, or why it cannot be.
    pub fn probe(&self) -> Result<Probe, TriggerError> {
        let http = |url: &str| url.starts_with("http://") || url.starts_with("https://");
        match self.kind.as_str() {
            HEALTH_CHECK if http(&self.arn) => Ok(Probe::Health {
                url: self.arn.clone(),
            }),
            HEALTH_CHECK => Err(TriggerError::HealthCheckArn(self.to_string())),
            PROMETHEUS_ALERT => {
                let parts = self.arn.split_once('#').filter(|(base, alert)| {
                    http(base) && !alert.is_empty() && !alert.contains(['"', '\\'])
                });
                let Some((base, alert)) = parts else {
                    return Err(TriggerError::AlertArn(self.to_string()));
                };
                Ok(Probe::Alert {
                    query: alertmanager_query(base, alert),
                    alert: alert.to_string(),
                })
            }
            other => Err(TriggerError::UnsupportedType(other.to_string())),
        }
    }
}

/// Alertmanager's API v2 query for the active, unsilenced, uninhibited
/// alerts named `alert`.
fn alertmanager_query(base: &str, alert: &str) -> String {
    let filter = format!("alertname=\"{alert}\"");
    let mut encoded = String::new();
    for b in filter.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                encoded.push(b as char)
            }
            _ => encoded.push_str(&format!("%{b:02X}")),
        }
    }
    format!(
        "{}/api/v2/alerts?active=true&silenced=false&inhibited=false&filter={encoded}",
        base.trim_end_matches('/')
    )
}

/// A health check's answer: a success status is OK, any other is ALARM.
pub fn health_reading(status: u16) -> Reading {
    if (200..300).contains(&status) {
        Reading::Ok
    } else {
        Reading::Alarm(format!("the health check answered HTTP {status}"))
    }
}

/// Alertmanager's answer to [`Probe::Alert`]'s query: ALARM when `alert`
/// is among the active alerts (the labels are read again, so a server
/// that ignores the filter is read right too). Not a list of alerts: the
/// trigger cannot be read.
pub fn alert_reading(body: &[u8], alert: &str) -> Result<Reading, TriggerError> {
    let alerts: Vec<Value> =
        serde_json::from_slice(body).map_err(|e| TriggerError::UnreadableAnswer(e.to_string()))?;
    let firing = alerts
        .iter()
        .filter(|a| a.pointer("/labels/alertname").and_then(Value::as_str) == Some(alert))
        .filter(|a| {
            a.pointer("/status/state")
                .and_then(Value::as_str)
                .is_none_or(|s| s == "active")
        })
        .count();
    Ok(if firing == 0 {
        Reading::Ok
    } else {
        Reading::Alarm(format!("alert {alert} is firing ({firing} active)"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn trigger(kind: &str, arn: &str) -> RollbackTrigger {
        RollbackTrigger {
            arn: arn.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn reads_cloudformation_field_names() {
        let c = RollbackConfiguration::from_value(json!({
            "RollbackTriggers": [{"Arn": "http://h/health", "Type": HEALTH_CHECK}],
            "MonitoringTimeInMinutes": 3
        }))
        .unwrap();
        assert_eq!(c.triggers(), [trigger(HEALTH_CHECK, "http://h/health")]);
        assert_eq!(c.monitoring_minutes(), 3);
        let e = RollbackConfiguration::from_value(json!({"Triggers": []})).unwrap_err();
        assert!(e
            .to_string()
            .starts_with("RollbackConfiguration is not valid: unknown field `Triggers`"));
    }

    #[test]
    fn limits_are_cloudformations() {
        let six = (0..6)
            .map(|i| trigger(HEALTH_CHECK, &format!("http://h/{i}")))
            .collect();
        let c = RollbackConfiguration {
            rollback_triggers: Some(six),
            monitoring_time_in_minutes: None,
        };
        assert_eq!(c.check(), Err(TriggerError::TooMany));
        assert_eq!(c.check().unwrap_err().to_string(), "1 validation error detected: Value at 'rollbackConfiguration.rollbackTriggers' failed to satisfy constraint: Member must have length less than or equal to 5");
        let c = RollbackConfiguration {
            rollback_triggers: None,
            monitoring_time_in_minutes: Some(181),
        };
        assert_eq!(c.check().unwrap_err().to_string(), "1 validation error detected: Value '181' at 'rollbackConfiguration.monitoringTimeInMinutes' failed to satisfy constraint: Member must have value less than or equal to 180");
        let c = RollbackConfiguration {
            rollback_triggers: Some(vec![trigger("AWS::CloudWatch::Alarm", "arn:aws:x")]),
            monitoring_time_in_minutes: Some(180),
        };
        assert_eq!(
            c.check(),
            Err(TriggerError::UnsupportedType(
                "AWS::CloudWatch::Alarm".into()
            ))
        );
        assert!(c
            .check()
            .unwrap_err()
            .to_string()
            .starts_with("Rollback trigger type AWS::CloudWatch::Alarm is not supported"));
    }

    #[test]
    fn a_left_out_field_keeps_the_stored_one_and_an_empty_list_clears() {
        let stored = RollbackConfiguration {
            rollback_triggers: Some(vec![trigger(HEALTH_CHECK, "http://h/")]),
            monitoring_time_in_minutes: Some(5),
        };
        let only_minutes = RollbackConfiguration {
            rollback_triggers: None,
            monitoring_time_in_minutes: Some(1),
        };
        let applied = only_minutes.applied_to(Some(&stored));
        assert_eq!(applied.triggers(), stored.triggers());
        assert_eq!(applied.monitoring_minutes(), 1);
        let cleared = RollbackConfiguration {
            rollback_triggers: Some(vec![]),
            monitoring_time_in_minutes: None,
        }
        .applied_to(Some(&stored));
        assert!(cleared.triggers().is_empty());
        assert_eq!(cleared.monitoring_minutes(), 5);
    }

    #[test]
    fn an_alert_trigger_queries_alertmanager_by_name() {
        let p = trigger(PROMETHEUS_ALERT, "http://am:9093/#High Errors")
            .probe()
            .unwrap();
        assert_eq!(
            p,
            Probe::Alert {
                query: "http://am:9093/api/v2/alerts?active=true&silenced=false&inhibited=false&filter=alertname%3D%22High%20Errors%22".into(),
                alert: "High Errors".into()
            }
        );
        for bad in ["http://am:9093", "http://am:9093#", "am:9093#X"] {
            assert!(trigger(PROMETHEUS_ALERT, bad).probe().is_err(), "{bad}");
        }
        assert!(trigger(HEALTH_CHECK, "ftp://x").probe().is_err());
    }

    #[test]
    fn readings() {
        assert_eq!(health_reading(204), Reading::Ok);
        assert_eq!(
            health_reading(503),
            Reading::Alarm("the health check answered HTTP 503".into())
        );
        let body = json!([
            {"labels": {"alertname": "Other"}, "status": {"state": "active"}},
            {"labels": {"alertname": "High"}, "status": {"state": "suppressed"}}
        ]);
        let bytes = serde_json::to_vec(&body).unwrap();
        assert_eq!(alert_reading(&bytes, "High").unwrap(), Reading::Ok);
        let body = json!([{"labels": {"alertname": "High"}, "status": {"state": "active"}}]);
        let bytes = serde_json::to_vec(&body).unwrap();
        assert_eq!(
            alert_reading(&bytes, "High").unwrap(),
            Reading::Alarm("alert High is firing (1 active)".into())
        );
        assert!(alert_reading(b"{}", "High").is_err());
    }
}
