//! A hook served by a plugin library (`export_hook!`): every
//! `Cairn::Local::File` created or updated must have the `Mode` its
//! configuration's `RequiredMode` names (0600 when none). It takes one
//! IN_PROGRESS round before its verdict on a resource (its callbackContext
//! says the round was taken), so the engine's re-invocation is exercised
//! through the plugin ABI; whole stacks and change sets must have a
//! Description.

use cairn_sdk::hook::{Hook, HookProgress, HookRequest, HookTargetType};
use cairn_sdk::serde_json::{json, Value};

#[derive(Default)]
pub struct FileMode;

impl FileMode {
    fn judge(&self, req: &HookRequest) -> HookProgress {
        match req.target_type() {
            HookTargetType::Stack | HookTargetType::ChangeSet => {
                match req.template().contains_key("Description") {
                    true => HookProgress::success(),
                    false => HookProgress::non_compliant("every stack needs a Description"),
                }
            }
            HookTargetType::Resource => {
                if req.request_data.target_name != "Cairn::Local::File" {
                    return HookProgress::success();
                }
                if req.callback_context().get("looked") != Some(&Value::Bool(true)) {
                    return HookProgress::in_progress(json!({"looked": true}), 0);
                }
                let required = req
                    .hook_model
                    .get("RequiredMode")
                    .and_then(Value::as_str)
                    .unwrap_or("0600");
                let mode = req.resource_properties().get("Mode").cloned();
                match mode.as_ref().and_then(Value::as_str) {
                    Some(m) if m == required => HookProgress::success(),
                    _ => HookProgress::non_compliant(format!(
                        "Mode must be {required}, not {}",
                        mode.map(|m| m.to_string())
                            .unwrap_or_else(|| "unset".into())
                    )),
                }
            }
        }
    }
}

#[cairn_sdk::async_trait]
impl Hook for FileMode {
    async fn pre_create(&self, req: &HookRequest) -> HookProgress {
        self.judge(req)
    }

    async fn pre_update(&self, req: &HookRequest) -> HookProgress {
        self.judge(req)
    }
}

cairn_sdk::export_hook!("Org::Files::ModeHook", FileMode::default);
