//! Live progress of one stack operation for a person at a terminal: one line
//! per event on stdout, and below them a spinner with the stack's status and
//! resource counts on stderr (only when stderr is a terminal).

use std::collections::HashMap;
use std::time::Duration;

use cairn_core::stack::{EventRecord, STACK_TYPE};
use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: ProgressBar,
    stack_status: String,
    /// Latest status of each resource seen in this operation.
    resources: HashMap<String, String>,
}

/// The event as one line of `cairn deploy` / `cairn events` text output.
pub fn event_line(e: &EventRecord) -> String {
    let reason = e
        .status_reason
        .as_deref()
        .map(|r| format!("  {r}"))
        .unwrap_or_default();
    format!(
        "{}  {:<45} {:<30} {}{reason}",
        e.timestamp, e.status, e.logical_id, e.resource_type
    )
}

impl Progress {
    pub fn new(stack_name: &str) -> Progress {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(stack_name.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress {
            bar,
            stack_status: String::new(),
            resources: HashMap::new(),
        }
    }

    pub fn event(&mut self, e: &EventRecord) {
        let line = event_line(e);
        // Clears the spinner, prints, redraws it: lines never interleave.
        self.bar.suspend(|| println!("{line}"));
        if e.resource_type == STACK_TYPE && e.logical_id == e.stack_name {
            self.stack_status = e.status.clone();
        } else {
            self.resources
                .insert(e.logical_id.clone(), e.status.clone());
        }
        self.bar.set_message(self.summary());
    }

    fn summary(&self) -> String {
        let count = |f: fn(&str) -> bool| self.resources.values().filter(|s| f(s)).count();
        let active = count(|s| s.ends_with("_IN_PROGRESS"));
        let failed = count(|s| s.ends_with("_FAILED"));
        let done = self.resources.len() - active - failed;
        let mut text = format!("{}: {done} done, {active} in progress", self.stack_status);
        if failed > 0 {
            text.push_str(&format!(", {failed} failed"));
        }
        text
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(logical: &str, status: &str, ty: &str) -> EventRecord {
        EventRecord {
            event_id: "e".into(),
            stack_id: "id".into(),
            stack_name: "s".into(),
            logical_id: logical.into(),
            physical_id: String::new(),
            resource_type: ty.into(),
            timestamp: "t".into(),
            status: status.into(),
            status_reason: None,
            properties: None,
        }
    }

    #[test]
    fn counts_follow_each_resource_latest_status() {
        let mut p = Progress::new("s");
        p.bar = ProgressBar::hidden();
        p.event(&ev("s", "CREATE_IN_PROGRESS", STACK_TYPE));
        p.event(&ev("A", "CREATE_IN_PROGRESS", "T"));
        p.event(&ev("B", "CREATE_IN_PROGRESS", "T"));
        p.event(&ev("A", "CREATE_COMPLETE", "T"));
        assert_eq!(p.summary(), "CREATE_IN_PROGRESS: 1 done, 1 in progress");
        p.event(&ev("B", "CREATE_FAILED", "T"));
        p.event(&ev("s", "ROLLBACK_IN_PROGRESS", STACK_TYPE));
        assert_eq!(
            p.summary(),
            "ROLLBACK_IN_PROGRESS: 1 done, 0 in progress, 1 failed"
        );
    }
}
