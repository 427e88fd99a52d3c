//! Live progress of one stack operation for a person at a terminal: one line
//! per event on stdout, and below them a spinner with the stack's status and
//! resource counts on stderr (only when stderr is a terminal).

use std::collections::HashMap;
use std::time::Duration;

use cairn_core::stack::{EventRecord, EventStatus, STACK_TYPE};
use indicatif::{ProgressBar, ProgressStyle};

pub struct Progress {
    bar: ProgressBar,
    stack_status: String,
    /// Latest status of each resource seen in this operation.
    resources: HashMap<String, EventStatus>,
    /// Of those, how many are in progress and how many failed: kept as
    /// events come, so an event costs the same at any stack size.
    active: usize,
    failed: usize,
    /// How many resources the operation concerns, when known.
    total: Option<usize>,
    /// The terminal's width, read once (each event would ask the kernel).
    width: Option<usize>,
}

/// The event as `cairn deploy` / `cairn events` print it: one line with
/// fixed columns when stdout is not a terminal (scripts read it), fitted to
/// the terminal's width when it is ([`fit_event`]).
pub fn event_line(e: &EventRecord) -> String {
    match terminal_width() {
        Some(width) if width < WIDE => fit_event(e, width),
        _ => wide_event(e),
    }
}

/// A terminal at least this wide gets the fixed-column line.
const WIDE: usize = 160;

/// The width of the terminal stdout is, if it is one.
fn terminal_width() -> Option<usize> {
    let term = console::Term::stdout();
    if !term.is_term() {
        return None;
    }
    term.size_checked().map(|(_, cols)| usize::from(cols))
}

/// The reason an event shows: a hook's event names the hook, its verdict
/// and failure mode before its reason.
fn reason_of(e: &EventRecord) -> Option<String> {
    match &e.hook {
        Some(h) => Some(h.summary()),
        None => e.status_reason.clone(),
    }
}

fn wide_event(e: &EventRecord) -> String {
    let reason = reason_of(e).map(|r| format!("  {r}")).unwrap_or_default();
    format!(
        "{}  {:<45} {:<30} {}{reason}",
        e.timestamp, e.status, e.logical_id, e.resource_type
    )
}

/// The event in lines of at most `width` characters: the time of day,
/// status, logical id and type on the first (cut with `…` if they do not
/// fit), the reason wrapped below them, indented.
fn fit_event(e: &EventRecord, width: usize) -> String {
    let width = width.max(40);
    // `2026-11-23T09:26:51.143Z` → `09:26:51.143`: the date is the same
    // for a whole operation.
    let time = e
        .timestamp
        .split_once('T')
        .map(|(_, t)| t.trim_end_matches('Z'))
        .unwrap_or(&e.timestamp);
    let head = format!(
        "{time}  {:<22} {:<20} {}",
        e.status, e.logical_id, e.resource_type
    );
    let mut out = cut(head.trim_end(), width);
    let reason = reason_of(e);
    if let Some(reason) = reason.as_deref().filter(|r| !r.is_empty()) {
        let indent = "              ";
        let room = width - indent.len();
        let mut line = String::new();
        for word in reason.split_whitespace() {
            let word_len = word.chars().count();
            let line_len = line.chars().count();
            if line_len > 0 && line_len + 1 + word_len > room {
                out.push('\n');
                out.push_str(indent);
                out.push_str(&line);
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            // A word longer than a line is cut into pieces.
            let mut rest: Vec<char> = word.chars().collect();
            while rest.len() > room {
                let piece: String = rest.drain(..room).collect();
                if !line.trim().is_empty() {
                    out.push('\n');
                    out.push_str(indent);
                    out.push_str(line.trim_end());
                    line.clear();
                }
                out.push('\n');
                out.push_str(indent);
                out.push_str(&piece);
            }
            line.extend(rest);
        }
        if !line.trim().is_empty() {
            out.push('\n');
            out.push_str(indent);
            out.push_str(line.trim_end());
        }
    }
    out
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
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
            active: 0,
            failed: 0,
            total: None,
            width: terminal_width(),
        }
    }

    /// How many resources the operation concerns (shown as `done/total`).
    pub fn with_total(mut self, total: usize) -> Progress {
        self.total = Some(total);
        self
    }

    #[cfg(test)]
    pub fn event(&mut self, e: &EventRecord) {
        self.events(std::slice::from_ref(e));
    }

    /// Prints a batch of events (what one look at the state found) and
    /// updates the counts. The spinner is cleared and redrawn once per
    /// batch, not per line: a terminal showing 30,000 events would
    /// otherwise redraw it 30,000 times.
    pub fn events(&mut self, batch: &[EventRecord]) {
        if batch.is_empty() {
            return;
        }
        let mut text = String::new();
        for e in batch {
            let line = match self.width {
                Some(width) if width < WIDE => fit_event(e, width),
                _ => wide_event(e),
            };
            text.push_str(&line);
            text.push('\n');
            if e.resource_type == STACK_TYPE && e.logical_id == e.stack_name {
                self.stack_status = e.status.to_string();
            } else {
                let before = self.resources.insert(e.logical_id.clone(), e.status);
                self.tally(before, -1);
                self.tally(Some(e.status), 1);
            }
        }
        // Clears the spinner, prints, redraws it: lines never interleave.
        self.bar.suspend(|| {
            use std::io::Write as _;
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        });
        self.bar.set_message(self.summary());
    }

    /// Adds (`by` 1) or removes (-1) a status from the counts.
    fn tally(&mut self, status: Option<EventStatus>, by: isize) {
        let slot = match status {
            Some(s) if s.is_in_progress() => &mut self.active,
            Some(s) if s.is_failed() => &mut self.failed,
            _ => return,
        };
        *slot = slot.saturating_add_signed(by);
    }

    fn summary(&self) -> String {
        let (active, failed) = (self.active, self.failed);
        let done = self.resources.len() - active - failed;
        let total = self.total.unwrap_or(0).max(self.resources.len());
        let mut text = format!(
            "{}: {done}/{total} done, {active} in progress",
            self.stack_status
        );
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
            hook: None,
            event_id: "e".into(),
            stack_id: "id".into(),
            stack_name: "s".into(),
            logical_id: logical.into(),
            physical_id: String::new(),
            resource_type: ty.into(),
            timestamp: "t".into(),
            status: status.parse().unwrap(),
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
        assert_eq!(p.summary(), "CREATE_IN_PROGRESS: 1/2 done, 1 in progress");
        p.event(&ev("B", "CREATE_FAILED", "T"));
        p.event(&ev("s", "ROLLBACK_IN_PROGRESS", STACK_TYPE));
        assert_eq!(
            p.summary(),
            "ROLLBACK_IN_PROGRESS: 1/2 done, 0 in progress, 1 failed"
        );
        let mut p = Progress::new("s").with_total(5);
        p.bar = ProgressBar::hidden();
        p.event(&ev("A", "CREATE_COMPLETE", "T"));
        assert_eq!(p.summary(), ": 1/5 done, 0 in progress");
    }

    #[test]
    fn events_fit_a_narrow_terminal() {
        let mut e = ev(
            "WebServerGroup",
            "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS",
            "AWS::AutoScaling::AutoScalingGroup",
        );
        e.timestamp = "2026-11-23T09:26:51.143Z".into();
        e.status_reason = Some(format!(
            "Rolling update of Web failed in batch 2 of 2: Web-6: {} end",
            "x".repeat(150)
        ));
        let text = fit_event(&e, 100);
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "{line}");
        }
        assert!(text.starts_with(
            "09:26:51.143  UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS WebServerGroup"
        ));
        assert!(
            text.contains("\n              Rolling update of Web failed in batch 2 of 2: Web-6:")
        );
        assert!(text.ends_with(" end"), "{text}");
        let words: usize = text.lines().skip(1).map(|l| l.trim().len()).sum();
        assert!(words >= e.status_reason.as_deref().unwrap_or_default().len() - 10);
    }
}
