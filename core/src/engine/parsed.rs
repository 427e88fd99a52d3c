//! Templates parsed when an operation starts, handed to its load: a create
//! or an update reads each template's text once, not once to check it and
//! again to run it (a 10,000-resource template takes tens of milliseconds
//! to parse). A load keeps what it parsed too, for the stack's next
//! operation on this engine (an update's current template, a delete's).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::template::{Template, TemplateContext, TemplateError};

/// How many parsed templates are kept (an update keeps two: the template
/// it goes to and the one it may roll back to).
const KEPT: usize = 4;

/// How long one is kept after it was last used: an operation another
/// engine ran (a server that handed it off) leaves its templates behind,
/// and they go then.
const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// The parsed templates waiting for their operation's load.
#[derive(Default)]
pub(super) struct Parsed {
    kept: Mutex<Vec<Entry>>,
    /// How many kept templates a load took (for the tests that check the
    /// hand-over happens).
    handed: AtomicUsize,
}

struct Entry {
    kept_at: std::time::Instant,
    text: String,
    context: TemplateContext,
    template: Arc<Template>,
}

impl Parsed {
    /// Keeps `template`, parsed from `text` with `context`, for the next
    /// [`Parsed::parse`] of the same; the oldest kept goes when too many
    /// wait, and any kept longer than a minute (an operation that never
    /// ran here: it is parsed again if it does).
    pub(super) fn keep(&self, text: &str, context: &TemplateContext, template: Arc<Template>) {
        if let Ok(mut kept) = self.kept.lock() {
            kept.retain(|e| {
                e.kept_at.elapsed() < WAIT && !(e.text == text && e.context == *context)
            });
            // The least recently used goes.
            if kept.len() == KEPT {
                if let Some(oldest) = (0..kept.len()).min_by_key(|i| kept[*i].kept_at) {
                    kept.remove(oldest);
                }
            }
            kept.push(Entry {
                kept_at: std::time::Instant::now(),
                text: text.to_string(),
                context: context.clone(),
                template,
            });
        }
    }

    /// `text` with `context` parsed: the template kept for exactly these
    /// (shared: a template is never changed once parsed), else parsed now
    /// and kept. Parsing is deterministic, so the kept one is what a parse
    /// would give.
    pub(super) fn parse(
        &self,
        text: &str,
        context: &TemplateContext,
    ) -> Result<Arc<Template>, TemplateError> {
        let kept = self.kept.lock().ok().and_then(|mut kept| {
            kept.retain(|e| e.kept_at.elapsed() < WAIT);
            let e = kept
                .iter_mut()
                .find(|e| e.text == text && e.context == *context)?;
            e.kept_at = std::time::Instant::now();
            Some(e.template.clone())
        });
        match kept {
            Some(template) => {
                self.handed.fetch_add(1, Ordering::Relaxed);
                Ok(template)
            }
            None => {
                let template = Arc::new(Template::parse_with(text, context)?);
                self.keep(text, context, template.clone());
                Ok(template)
            }
        }
    }
}

#[cfg(test)]
impl Parsed {
    /// How many kept templates were taken so far.
    pub(super) fn handed_over(&self) -> usize {
        self.handed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_template_is_handed_over_for_its_text_and_context_only() {
        let parsed = Parsed::default();
        let text = "Resources:\n  A: {Type: Cairn::Test::Resource}\n";
        let template = Arc::new(Template::parse(text).expect("parses"));
        parsed.keep(text, &TemplateContext::default(), template.clone());
        let other_context = TemplateContext {
            parameters: [("P".to_string(), "v".to_string())].into(),
            ..Default::default()
        };
        // Another context or text is parsed anew.
        let fresh = parsed.parse(text, &other_context).expect("parses");
        assert!(!Arc::ptr_eq(&fresh, &template));
        // The same is the kept one, as often as it is asked for.
        for n in 1..=2 {
            let handed = parsed
                .parse(text, &TemplateContext::default())
                .expect("parses");
            assert!(Arc::ptr_eq(&handed, &template));
            assert_eq!(parsed.handed_over(), n);
        }
        // What was parsed anew is kept too.
        let again = parsed.parse(text, &other_context).expect("parses");
        assert!(Arc::ptr_eq(&again, &fresh));
        assert_eq!(again.resources.len(), 1);
        assert_eq!(parsed.handed_over(), 3);
    }

    #[test]
    fn no_more_than_four_wait() {
        let parsed = Parsed::default();
        let texts: Vec<String> = (0..5)
            .map(|i| format!("Resources:\n  R{i}: {{Type: Cairn::Test::Resource}}\n"))
            .collect();
        let kept: Vec<Arc<Template>> = texts
            .iter()
            .map(|t| {
                let template = Arc::new(Template::parse(t).expect("parses"));
                parsed.keep(t, &TemplateContext::default(), template.clone());
                template
            })
            .collect();
        for i in 1..5 {
            let t = parsed
                .parse(&texts[i], &TemplateContext::default())
                .expect("parses");
            assert!(Arc::ptr_eq(&t, &kept[i]));
        }
        let first = parsed
            .parse(&texts[0], &TemplateContext::default())
            .expect("parses");
        assert!(!Arc::ptr_eq(&first, &kept[0]), "the oldest went");
        // Parsed again, it is kept in place of the least recently used.
        let again = parsed
            .parse(&texts[0], &TemplateContext::default())
            .expect("parses");
        assert!(Arc::ptr_eq(&again, &first));
        let second = parsed
            .parse(&texts[1], &TemplateContext::default())
            .expect("parses");
        assert!(
            !Arc::ptr_eq(&second, &kept[1]),
            "the least recently used went"
        );
    }
}
