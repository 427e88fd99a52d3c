//! Resource values for evaluation during execution: the recorded provider
//! results of this operation, and the exports and outputs of other stacks.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use serde_json::{Map, Value};

use crate::store::{Store, StoreError};
use crate::template::eval::{Lookup, Resolver};

/// Where another stack's output is kept beside the exports (an export
/// name has no `/`, so the two never meet).
fn stack_output_key(stack: &str, output: &str) -> String {
    format!("stack-output/{stack}/{output}")
}

/// Whether a template (as written, or as its macros left it) may read
/// other stacks' outputs: only then are they read when an operation
/// starts. Text, so that it is known before the template is parsed.
pub(super) fn reads_stack_outputs(body: &str, context: &crate::stack::TemplateContext) -> bool {
    const FUNCTION: &str = "GetStackOutput";
    body.contains(FUNCTION)
        || context
            .processed
            .as_ref()
            .is_some_and(|p| p.to_string().contains(FUNCTION))
}

/// What an operation may read of other stacks, read when it starts: the
/// exports (`Fn::ImportValue`) and, when `with_outputs` (the template
/// [`reads_stack_outputs`]), every live stack's outputs that have a value
/// (`Fn::GetStackOutput`, a weak reference read at create or update time).
pub(super) async fn shared_values(
    store: &dyn Store,
    with_outputs: bool,
) -> Result<HashMap<String, String>, StoreError> {
    let mut values = exported(store.exports().await?);
    if with_outputs {
        add_stack_outputs(store, &mut values).await?;
    }
    Ok(values)
}

/// The exports as the store lists them (name, value, exporting stack),
/// by name.
pub(super) fn exported(exports: Vec<(String, String, String)>) -> HashMap<String, String> {
    exports.into_iter().map(|(n, v, _)| (n, v)).collect()
}

/// Adds every live stack's outputs that have a value to `values` (see
/// [`shared_values`]).
pub(super) async fn add_stack_outputs(
    store: &dyn Store,
    values: &mut HashMap<String, String>,
) -> Result<(), StoreError> {
    for stack in store.list_stacks().await? {
        if stack.status == crate::stack::StackStatus::DeleteComplete {
            continue;
        }
        for o in stack.outputs {
            if let Some(v) = o.output_value {
                values.insert(stack_output_key(&stack.stack_name, &o.output_key), v);
            }
        }
    }
    Ok(())
}

/// A created resource as evaluation sees it: physical id and attributes.
type Known = HashMap<String, (String, Map<String, Value>)>;

/// What the engine knows of each resource: physical id and attributes.
#[derive(Default)]
pub struct Results {
    known: Mutex<Known>,
    exports: HashMap<String, String>,
    imported: Mutex<BTreeSet<String>>,
    /// Attribute values of resources whose provider marked them NoEcho:
    /// masked in everything shown (events' properties).
    secrets: Mutex<BTreeSet<String>>,
    /// In the static pass resources are pending even if known.
    static_pass: bool,
}

impl Results {
    pub fn new(exports: HashMap<String, String>) -> Self {
        Results {
            exports,
            ..Default::default()
        }
    }

    pub fn static_pass(exports: HashMap<String, String>) -> Self {
        Results {
            exports,
            static_pass: true,
            ..Default::default()
        }
    }

    pub fn record(&self, logical_id: &str, physical_id: &str, attributes: &Map<String, Value>) {
        if let Ok(mut k) = self.known.lock() {
            k.insert(
                logical_id.to_string(),
                (physical_id.to_string(), attributes.clone()),
            );
        }
    }

    /// Makes room for `n` more resources at once: grown one insert at a
    /// time, a 10,000-resource operation's map was copied a dozen times
    /// into freshly zeroed memory (a twentieth of a create's engine time).
    pub fn reserve(&self, n: usize) {
        if let Ok(mut k) = self.known.lock() {
            k.reserve(n);
        }
    }

    /// Records the physical id and attributes of every resource still part of
    /// the stack.
    pub fn record_live(&self, rows: &[crate::stack::ResourceRecord]) {
        self.reserve(rows.len());
        for r in rows.iter().filter(|r| crate::plan::is_live(r)) {
            if let Some(p) = &r.physical_id {
                self.record(&r.logical_id, p, &r.attributes);
            }
            self.note_secrets(r);
        }
    }

    /// Remembers the attribute values of a NoEcho resource so that they are
    /// masked wherever they show up.
    pub fn note_secrets(&self, r: &crate::stack::ResourceRecord) {
        if !r.no_echo {
            return;
        }
        if let Ok(mut s) = self.secrets.lock() {
            for v in r.attributes.values() {
                collect_scalars(v, &mut s);
            }
        }
    }

    /// `text` with every NoEcho attribute value replaced by `mask`, longest
    /// first so a secret containing another is masked whole.
    pub fn mask_secrets(&self, text: String, mask: &str) -> String {
        let Ok(secrets) = self.secrets.lock() else {
            return text;
        };
        if secrets.is_empty() {
            return text;
        }
        let mut by_length: Vec<&String> = secrets.iter().collect();
        by_length.sort_by_key(|s| std::cmp::Reverse(s.len()));
        by_length
            .into_iter()
            .fold(text, |t, secret| t.replace(secret.as_str(), mask))
    }

    pub fn forget(&self, logical_id: &str) {
        if let Ok(mut k) = self.known.lock() {
            k.remove(logical_id);
        }
    }

    /// Export names looked up so far.
    pub fn imported(&self) -> Vec<String> {
        self.imported
            .lock()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// The non-empty scalar values in `v`, as text.
fn collect_scalars(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) if !s.is_empty() => {
            out.insert(s.clone());
        }
        Value::Number(n) => {
            out.insert(n.to_string());
        }
        Value::Array(items) => items.iter().for_each(|i| collect_scalars(i, out)),
        Value::Object(m) => m.values().for_each(|i| collect_scalars(i, out)),
        _ => {}
    }
}

impl Resolver for Results {
    fn resource_ref(&self, logical_id: &str) -> Lookup {
        if self.static_pass {
            return Lookup::Pending;
        }
        match self
            .known
            .lock()
            .ok()
            .and_then(|k| k.get(logical_id).map(|(p, _)| p.clone()))
        {
            Some(p) => Lookup::Value(Value::String(p)),
            None => Lookup::Pending,
        }
    }

    fn resource_attribute(&self, logical_id: &str, attribute: &str) -> Lookup {
        if self.static_pass {
            return Lookup::Pending;
        }
        let known = match self.known.lock() {
            Ok(k) => k,
            Err(_) => return Lookup::Pending,
        };
        match known.get(logical_id) {
            None => Lookup::Pending,
            Some((_, attrs)) if attribute == crate::template::types::ALL_ATTRIBUTES => {
                Lookup::Value(Value::Object(attrs.clone()))
            }
            Some((_, attrs)) => match attrs.get(attribute) {
                Some(v) => Lookup::Value(v.clone()),
                None => Lookup::Absent,
            },
        }
    }

    fn stack_output(&self, stack: &str, output: &str) -> Lookup {
        match self.exports.get(&stack_output_key(stack, output)) {
            Some(v) => Lookup::Value(Value::String(v.clone())),
            None => Lookup::Absent,
        }
    }

    fn import_value(&self, export_name: &str) -> Lookup {
        if let Ok(mut i) = self.imported.lock() {
            i.insert(export_name.to_string());
        }
        match self.exports.get(export_name) {
            Some(v) => Lookup::Value(Value::String(v.clone())),
            None => Lookup::Absent,
        }
    }
}
