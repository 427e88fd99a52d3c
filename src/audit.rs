//! `cairn audit`: the audit trail (every API call and console action that
//! changed something), newest first, from the state or, with
//! `--endpoint`, through CloudTrail's LookupEvents.

use std::sync::Arc;

use anyhow::Context;
use cairn_core::audit::AuditQuery;
use cairn_core::engine::Engine;
use serde_json::Value;

use crate::OutputFormat;

#[derive(clap::Args)]
pub struct AuditArgs {
    /// Only calls about this stack (its name or stack id).
    #[arg(long)]
    pub stack: Option<String>,
    /// Only calls at or after this time: RFC 3339 (`2026-11-27T10:00:00Z`)
    /// or an age (`90m`, `12h`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Only calls signed with this access key id.
    #[arg(long)]
    pub key: Option<String>,
    /// Only calls of this action (`DeleteStack`, …).
    #[arg(long)]
    pub event: Option<String>,
    /// At most this many records.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    #[arg(long, value_enum, default_value_t)]
    pub output: OutputFormat,
}

/// `--since` as Unix milliseconds, `now_ms` being now.
pub fn since_ms(text: &str, now_ms: i64) -> anyhow::Result<i64> {
    let age = |unit_ms: i64, n: &str| -> Option<i64> {
        n.parse::<i64>()
            .ok()
            .map(|n| now_ms - n.saturating_mul(unit_ms))
    };
    let relative = match text.char_indices().last() {
        Some((i, 'm')) => age(60_000, &text[..i]),
        Some((i, 'h')) => age(3_600_000, &text[..i]),
        Some((i, 'd')) => age(86_400_000, &text[..i]),
        _ => None,
    };
    if let Some(ms) = relative {
        return Ok(ms);
    }
    let t: jiff::Timestamp = text.parse().with_context(|| {
        format!(
            "--since {text}: give an RFC 3339 time (2026-11-27T10:00:00Z) or an age (90m, 12h, 7d)"
        )
    })?;
    Ok(t.as_millisecond())
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

impl AuditArgs {
    pub fn query(&self) -> anyhow::Result<AuditQuery> {
        Ok(AuditQuery {
            stack: self.stack.clone(),
            access_key: self.key.clone(),
            event_name: self.event.clone(),
            since_ms: self
                .since
                .as_deref()
                .map(|s| since_ms(s, now_ms()))
                .transpose()?,
            limit: self.limit.max(1),
            ..AuditQuery::default()
        })
    }
}

pub async fn run(engine: &Arc<Engine>, args: &AuditArgs) -> anyhow::Result<()> {
    let records = engine.store().audit_records(&args.query()?).await?;
    let bodies: Vec<Value> = records.iter().map(|r| r.body.clone()).collect();
    show(&bodies, args.output)
}

/// The records (CloudTrail's JSON), newest first: a table, or
/// `{"Records": [...]}` (CloudTrail's log file shape) with `--output json`.
pub fn show(records: &[Value], output: OutputFormat) -> anyhow::Result<()> {
    if output == OutputFormat::Json {
        return crate::stacks::print_json(&serde_json::json!({ "Records": records }));
    }
    if records.is_empty() {
        println!("no audit records match");
        return Ok(());
    }
    let text = |r: &Value, k: &str| r[k].as_str().unwrap_or("-").to_string();
    println!(
        "{:<20}  {:<24}  {:<16}  {:<15}  {:<24}  RESULT",
        "TIME", "ACTION", "WHO", "FROM", "STACK / TYPE"
    );
    for r in records {
        let who = r["userIdentity"]["userName"]
            .as_str()
            .or_else(|| r["userIdentity"]["type"].as_str())
            .unwrap_or("-");
        let touched = r["resources"][0]["ARN"]
            .as_str()
            .map(|arn| {
                arn.split_once(":stack/")
                    .and_then(|(_, rest)| rest.split('/').next())
                    .unwrap_or(arn)
            })
            .unwrap_or("-");
        let result = match r["errorCode"].as_str() {
            Some(code) => format!("{code}: {}", text(r, "errorMessage")),
            None => "ok".to_string(),
        };
        let via = if r["eventType"] == "AwsConsoleAction" {
            " (console)"
        } else {
            ""
        };
        println!(
            "{:<20}  {:<24}  {:<16}  {:<15}  {:<24}  {result}",
            text(r, "eventTime"),
            format!("{}{via}", text(r, "eventName")),
            who,
            text(r, "sourceIPAddress"),
            touched,
        );
    }
    Ok(())
}

/// Whether a record (CloudTrail's JSON) passes the filters LookupEvents
/// could not apply (it takes one attribute).
pub fn remote_matches(r: &Value, args: &AuditArgs) -> bool {
    let stack_ok = args.stack.as_ref().is_none_or(|s| {
        let arn = r["resources"][0]["ARN"].as_str().unwrap_or_default();
        arn == s
            || arn.contains(&format!(":stack/{s}/"))
            || r["requestParameters"]["stackName"] == **s
    });
    let key_ok = args
        .key
        .as_ref()
        .is_none_or(|k| r["userIdentity"]["accessKeyId"] == **k);
    let event_ok = args.event.as_ref().is_none_or(|e| r["eventName"] == **e);
    stack_ok && key_ok && event_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_an_age() {
        let now = 1_795_000_000_000;
        assert_eq!(since_ms("90m", now).unwrap(), now - 90 * 60_000);
        assert_eq!(since_ms("2h", now).unwrap(), now - 7_200_000);
        assert_eq!(since_ms("7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(
            since_ms("2026-11-27T10:00:00Z", now).unwrap(),
            1_795_773_600_000
        );
        assert!(since_ms("yesterday", now)
            .unwrap_err()
            .to_string()
            .contains("give an RFC 3339 time"));
    }
}
