//! The contract tests of a hook (a library made with `export_hook!`, or a
//! webhook answering hook requests): each invocation point on a resource,
//! a whole stack and a change set, asked as the engine asks (an
//! IN_PROGRESS answer invoked again with its callbackContext, three
//! invocations at most), each answer checked against CloudFormation's
//! contract: SUCCESS without an errorCode, FAILED with an errorCode and a
//! message, the request's token echoed.

use std::time::Instant;

use cairn_sdk::{HookProgress, HookRequest};
use serde_json::{json, Map, Value};

use super::{Inputs, Status, Target, TestReport};
use crate::hooks::{
    HookAction, HookDefinition, HookHandler, HookInvocation, HookTarget, Judged, StackTarget,
    TargetOperation, MAX_INVOCATIONS,
};

/// The error codes a FAILED answer may carry (CloudFormation's).
const ERROR_CODES: &[&str] = &[
    "NonCompliant",
    "InternalFailure",
    "InvalidRequest",
    "AccessDenied",
    "NotFound",
    "Throttling",
    "InvalidTypeConfiguration",
    "HandlerInternalFailure",
    "UnsupportedTarget",
    "Unknown",
];

const STACK_ID: &str = "arn:aws:cloudformation:us-east-1:123456789012:stack/cairn-hook-test/1";

/// Runs the hook tests against `target`.
pub async fn run(target: &Target<'_>, inputs: &Inputs) -> Vec<TestReport> {
    let mut reports = Vec::new();
    let started = Instant::now();
    let declared = target
        .declared
        .iter()
        .filter(|s| s.type_name == target.type_name)
        .count();
    reports.push(report(
        target,
        "hook_declared_once",
        match declared {
            1 => Ok(format!("the library serves the hook {}", target.type_name)),
            n => Err(format!(
                "the hook {} is declared {n} times; export it once (export_hook!)",
                target.type_name
            )),
        },
        (None, None),
        started,
    ));
    let hook = HookDefinition {
        type_name: target.type_name.to_string(),
        handler: HookHandler::Registered {
            version: "00000001".into(),
        },
        configuration: Default::default(),
    };
    let properties = inputs.create.clone().unwrap_or_default();
    let previous = inputs.updates.first().cloned().unwrap_or_default();
    for (test, action) in [
        ("hook_pre_create_resource", HookAction::Create),
        ("hook_pre_update_resource", HookAction::Update),
        ("hook_pre_delete_resource", HookAction::Delete),
    ] {
        let t = HookTarget {
            stack_name: "cairn-hook-test",
            stack_id: STACK_ID,
            logical_id: "HookTest",
            type_name: "Cairn::Test::Resource",
            action,
            properties: &properties,
            previous: (action == HookAction::Update).then_some(&previous),
        };
        reports.push(ask(target, &hook, test, &Judged::Resource(&t)).await);
    }
    let template = json!({
        "Description": "the hook contract tests' template",
        "Resources": {"HookTest": {"Type": "Cairn::Test::Resource", "Properties": properties}},
    });
    let parameters = Map::new();
    let changes = json!([{"Type": "Resource", "ResourceChange": {"Action": "Add", "LogicalResourceId": "HookTest", "ResourceType": "Cairn::Test::Resource"}}]);
    for (test, operation) in [
        ("hook_pre_create_stack", TargetOperation::Stack),
        ("hook_pre_create_change_set", TargetOperation::ChangeSet),
    ] {
        let t = StackTarget {
            operation,
            stack_name: "cairn-hook-test",
            stack_id: STACK_ID,
            change_set_id: (operation == TargetOperation::ChangeSet).then_some(
                "arn:aws:cloudformation:us-east-1:123456789012:changeSet/cairn-hook-test/1",
            ),
            action: HookAction::Create,
            template: &template,
            parameters: &parameters,
            previous: None,
            changes: (operation == TargetOperation::ChangeSet).then_some(&changes),
        };
        reports.push(ask(target, &hook, test, &Judged::Stack(&t)).await);
    }
    reports
}

fn report(
    target: &Target<'_>,
    test: &str,
    outcome: Result<String, String>,
    (sent, received): (Option<Value>, Option<Value>),
    started: Instant,
) -> TestReport {
    let (status, message) = match outcome {
        Ok(m) => (Status::Passed, m),
        Err(m) => (Status::Failed, m),
    };
    TestReport {
        type_name: target.type_name.to_string(),
        test: test.to_string(),
        status,
        message,
        sent,
        received,
        millis: started.elapsed().as_millis() as u64,
    }
}

/// One target asked as the engine asks it, until a verdict.
async fn ask(
    target: &Target<'_>,
    hook: &HookDefinition,
    test: &str,
    judged: &Judged<'_>,
) -> TestReport {
    let started = Instant::now();
    let token = uuid::Uuid::new_v4().to_string();
    let mut context: Option<Value> = None;
    let mut last = (None, None);
    for invocation in 1..=MAX_INVOCATIONS {
        let call = HookInvocation {
            token: &token,
            invocation,
            callback_context: context.as_ref(),
        };
        let sent = hook.webhook_request(judged, "123456789012", &call);
        let request: HookRequest = match serde_json::from_value(sent.clone()) {
            Ok(r) => r,
            Err(e) => {
                return report(
                    target,
                    test,
                    Err(format!("the kit's request cannot be read: {e}")),
                    (Some(sent), None),
                    started,
                )
            }
        };
        let answer =
            tokio::time::timeout(target.call_timeout, target.provider.hook(&request)).await;
        let answer = match answer {
            Err(_) => {
                return report(
                    target,
                    test,
                    Err(format!(
                        "the hook did not answer within {} seconds",
                        target.call_timeout.as_secs()
                    )),
                    (Some(sent), None),
                    started,
                )
            }
            Ok(Err(e)) => {
                let got = serde_json::to_value(&e).ok();
                return report(target, test, Err(format!("the hook's call failed: {e}; a hook answers a progress event (hookStatus SUCCESS, FAILED or IN_PROGRESS), FAILED with errorCode InternalFailure when it cannot judge")), (Some(sent), got), started);
            }
            Ok(Ok(a)) => a,
        };
        let received = serde_json::to_value(&answer).ok();
        last = (Some(sent), received);
        match check(&answer, &token, invocation) {
            Err(why) => return report(target, test, Err(why), last, started),
            Ok(Some(verdict)) => {
                return report(
                    target,
                    test,
                    Ok(format!("{verdict} after {invocation} invocation(s)")),
                    last,
                    started,
                )
            }
            Ok(None) => context = answer.callback_context.clone(),
        }
    }
    report(
        target,
        test,
        Err(format!(
            "the hook answered IN_PROGRESS {MAX_INVOCATIONS} times: its {MAX_INVOCATIONS}rd answer must be SUCCESS or FAILED"
        )),
        last,
        started,
    )
}

/// Whether `answer` keeps the contract: its verdict, `None` for a good
/// IN_PROGRESS, or what is wrong.
fn check(answer: &HookProgress, token: &str, invocation: u32) -> Result<Option<String>, String> {
    if let Some(echoed) = answer
        .client_request_token
        .as_deref()
        .filter(|t| *t != token)
    {
        return Err(format!(
            "the answer's clientRequestToken {echoed} is not the request's {token}"
        ));
    }
    match answer.hook_status.as_str() {
        "SUCCESS" => match &answer.error_code {
            None => Ok(Some("SUCCESS".into())),
            Some(code) => Err(format!("SUCCESS carries errorCode {code}: a success has none")),
        },
        "FAILED" => {
            let code = answer.error_code.as_deref().ok_or(
                "FAILED without an errorCode: a failure says NonCompliant (the target breaks the rule) or InternalFailure (the hook could not judge)",
            )?;
            if !ERROR_CODES.contains(&code) {
                return Err(format!(
                    "FAILED with errorCode {code}, which is not one of {}",
                    ERROR_CODES.join(", ")
                ));
            }
            match answer.message.as_deref().filter(|m| !m.is_empty()) {
                Some(m) => Ok(Some(format!("FAILED {code}: {m}"))),
                None => Err(format!("FAILED {code} without a message: a failure says why")),
            }
        }
        "IN_PROGRESS" if invocation < MAX_INVOCATIONS => match answer.callback_delay_seconds {
            Some(d) if !(0..=900).contains(&d) => Err(format!(
                "IN_PROGRESS with callbackDelaySeconds {d}: 0 to 900"
            )),
            _ => Ok(None),
        },
        "IN_PROGRESS" => Err(format!(
            "IN_PROGRESS at invocation {invocation}: the last invocation must answer SUCCESS or FAILED"
        )),
        other => Err(format!(
            "hookStatus {other:?}: SUCCESS, FAILED or IN_PROGRESS"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_against_cloudformations_contract() {
        let ok = HookProgress::success();
        assert_eq!(check(&ok, "t", 1), Ok(Some("SUCCESS".into())));
        let mut bad = HookProgress::success();
        bad.error_code = Some("NonCompliant".into());
        assert!(check(&bad, "t", 1).is_err());
        let mut no_code = HookProgress::non_compliant("x");
        no_code.error_code = None;
        assert!(check(&no_code, "t", 1)
            .unwrap_err()
            .starts_with("FAILED without an errorCode"));
        assert_eq!(
            check(&HookProgress::non_compliant("no"), "t", 1),
            Ok(Some("FAILED NonCompliant: no".into()))
        );
        let waiting = HookProgress::in_progress(json!({"n": 1}), 1);
        assert_eq!(check(&waiting, "t", 1), Ok(None));
        assert!(check(&waiting, "t", 3).is_err());
        let mut other = HookProgress::success();
        other.client_request_token = Some("u".into());
        assert!(check(&other, "t", 1)
            .unwrap_err()
            .contains("is not the request's t"));
    }
}
