//! The simulator's Lambda hook: a webhook that answers IN_PROGRESS twice
//! (its callbackContext counting the steps), then its verdict: a
//! `Sim::Thing` whose Value is "forbidden" is NonCompliant, anything else
//! SUCCESS. It remembers every callbackContext it answered per
//! `clientRequestToken`, so an engine that invokes it with one it never
//! gave (a made-up or another target's context) is a defect.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use crate::shared::{PostError, WebhookPoster};

/// The hook's URL in the simulator's templates.
pub const URL: &str = "http://sim.hook/judge";

#[derive(Default)]
pub struct SimHook {
    state: Mutex<HookState>,
}

#[derive(Default)]
struct HookState {
    /// The steps answered per token.
    answered: HashMap<String, Vec<u64>>,
    defects: Vec<String>,
}

impl SimHook {
    pub fn defects(&self) -> Vec<String> {
        self.state
            .lock()
            .map(|s| s.defects.clone())
            .unwrap_or_default()
    }

    fn answer(&self, request: &Value) -> Value {
        let token = request["clientRequestToken"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let step = request["requestContext"]["callbackContext"]["step"]
            .as_u64()
            .unwrap_or(0);
        let invocation = request["requestContext"]["invocation"]
            .as_u64()
            .unwrap_or(0);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let given = state.answered.get(&token).cloned().unwrap_or_default();
        if step > 0 && !given.contains(&step) {
            state.defects.push(format!(
                "hook request {token} came with callbackContext step {step}, which the hook never answered (it answered {given:?})"
            ));
        }
        if invocation != step + 1 {
            state.defects.push(format!(
                "hook request {token}'s invocation is {invocation}, after {step} IN_PROGRESS answers"
            ));
        }
        if step < 2 {
            state
                .answered
                .entry(token.clone())
                .or_default()
                .push(step + 1);
            return json!({
                "hookStatus": "IN_PROGRESS",
                "clientRequestToken": token,
                "callbackContext": {"step": step + 1},
                "callbackDelaySeconds": 0,
            });
        }
        let value = &request["requestData"]["targetModel"]["resourceProperties"]["Value"];
        if value == "forbidden" {
            json!({
                "hookStatus": "FAILED",
                "errorCode": "NonCompliant",
                "message": "a Sim::Thing's Value may not be forbidden",
                "clientRequestToken": token,
            })
        } else {
            json!({"hookStatus": "SUCCESS", "clientRequestToken": token})
        }
    }
}

#[async_trait::async_trait]
impl WebhookPoster for SimHook {
    async fn post(
        &self,
        url: &str,
        _secret: Option<&str>,
        body: Vec<u8>,
        _timeout: Duration,
    ) -> Result<Vec<u8>, PostError> {
        if url != URL {
            return Err(PostError(format!(
                "{url}: the simulator has no such webhook"
            )));
        }
        let request: Value = serde_json::from_slice(&body)
            .map_err(|e| PostError(format!("{url}: not JSON: {e}")))?;
        Ok(self.answer(&request).to_string().into_bytes())
    }
}
