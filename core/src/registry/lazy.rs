//! A provider started on first need, and started again after a failure
//! once its backoff has passed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{RegisteredType, RegistryError};

/// Starts a provider: its registered types, or why it cannot start.
pub type Starter =
    Box<dyn Fn() -> Result<Vec<RegisteredType>, RegistryError> + Send + Sync + 'static>;

/// The first retry waits this long; each failure doubles it up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);

enum State {
    NotStarted,
    /// Its types, and those it also claims that another provider claimed
    /// first (type → that provider): only those are ambiguous.
    Started(
        BTreeMap<String, Arc<RegisteredType>>,
        BTreeMap<String, String>,
    ),
    Failed {
        cause: String,
        failures: u32,
        retry_at: Instant,
    },
}

/// One lazily started provider (a `[[providers]]` entry).
pub struct LazyProvider {
    name: String,
    /// The entry's `types`, when it lists them: then only a lookup of one
    /// of them starts it.
    declared: Option<Vec<String>>,
    start: Starter,
    state: Mutex<State>,
}

/// What `cairn providers` and `cairn serve`'s `/healthz` show of a lazy
/// provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderStatus {
    pub name: String,
    /// `not started`, `up` or `unavailable`.
    pub state: &'static str,
    /// Why it is unavailable.
    pub cause: Option<String>,
}

impl LazyProvider {
    pub fn new(name: &str, declared: Option<Vec<String>>, start: Starter) -> Self {
        LazyProvider {
            name: name.to_string(),
            declared,
            start,
            state: Mutex::new(State::NotStarted),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while starting leaves the state as it was; keep using it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether its entry lists `type_name`.
    pub(super) fn declares(&self, type_name: &str) -> bool {
        self.declared
            .as_ref()
            .is_some_and(|d| d.iter().any(|t| t == type_name))
    }

    /// Whether it may serve `type_name`: it lists it, or lists nothing and
    /// has not started (once started, its types are known).
    pub(super) fn may_serve(&self, type_name: &str) -> bool {
        match &self.declared {
            Some(_) => self.declares(type_name),
            None => match &*self.lock() {
                State::Started(types, conflicts) => {
                    types.contains_key(type_name) || conflicts.contains_key(type_name)
                }
                _ => true,
            },
        }
    }

    pub(super) fn started_type(&self, type_name: &str) -> Option<Arc<RegisteredType>> {
        match &*self.lock() {
            State::Started(types, _) => types.get(type_name).cloned(),
            _ => None,
        }
    }

    pub(super) fn started_types(&self) -> BTreeMap<String, Arc<RegisteredType>> {
        match &*self.lock() {
            State::Started(types, _) => types.clone(),
            _ => BTreeMap::new(),
        }
    }

    /// Whether it claims `type_name` that another provider claimed first:
    /// the error naming both.
    pub(super) fn conflict(&self, type_name: &str) -> Option<RegistryError> {
        match &*self.lock() {
            State::Started(_, conflicts) => conflicts
                .get(type_name)
                .map(|first| self.claimed_first(type_name, first)),
            _ => None,
        }
    }

    /// Its claim of `type_name`, which `first` claimed before it.
    fn claimed_first(&self, type_name: &str, first: &str) -> RegistryError {
        RegistryError::DuplicateType {
            type_name: type_name.to_string(),
            first: first.to_string(),
            second: self.name.clone(),
        }
    }

    /// Whether it has not been started yet (a lookup that must know every
    /// claim on a type starts it).
    pub(super) fn not_started(&self) -> bool {
        matches!(&*self.lock(), State::NotStarted)
    }

    pub(super) fn failure(&self) -> Option<String> {
        match &*self.lock() {
            State::Failed { cause, .. } => {
                Some(format!("provider {} cannot start: {cause}", self.name))
            }
            _ => None,
        }
    }

    pub(super) fn status(&self) -> ProviderStatus {
        let (state, cause) = match &*self.lock() {
            State::NotStarted => ("not started", None),
            State::Started(_, conflicts) if conflicts.is_empty() => ("up", None),
            State::Started(_, conflicts) => (
                "up, some types ambiguous",
                Some(
                    conflicts
                        .iter()
                        .map(|(t, first)| self.claimed_first(t, first).to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
            ),
            State::Failed { cause, .. } => ("unavailable", Some(cause.clone())),
        };
        ProviderStatus {
            name: self.name.clone(),
            state,
            cause,
        }
    }

    /// Starts it if it has not started and is not in backoff, then looks
    /// `type_name` up among its types.
    pub(super) fn start_for(
        &self,
        type_name: &str,
        taken: &BTreeMap<String, Arc<RegisteredType>>,
        all: &[LazyProvider],
    ) -> Option<Arc<RegisteredType>> {
        let mut state = self.lock();
        let due = match &*state {
            State::NotStarted => true,
            State::Started(types, _) => return types.get(type_name).cloned(),
            State::Failed { retry_at, .. } => Instant::now() >= *retry_at,
        };
        if !due {
            return None;
        }
        self.start_locked(&mut state, taken, all);
        match &*state {
            State::Started(types, _) => types.get(type_name).cloned(),
            _ => None,
        }
    }

    /// Starts it now unless it runs (a failed one is retried at once).
    pub(super) fn start_now(
        &self,
        taken: &BTreeMap<String, Arc<RegisteredType>>,
        all: &[LazyProvider],
    ) {
        let mut state = self.lock();
        if !matches!(&*state, State::Started(..)) {
            self.start_locked(&mut state, taken, all);
        }
    }

    fn start_locked(
        &self,
        state: &mut State,
        taken: &BTreeMap<String, Arc<RegisteredType>>,
        all: &[LazyProvider],
    ) {
        let previous_failures = match state {
            State::Failed { failures, .. } => *failures,
            _ => 0,
        };
        let started = (self.start)().map(|types| {
            let mut mine = BTreeMap::new();
            let mut conflicts = BTreeMap::new();
            for t in types {
                let name = t.schema.type_name.clone();
                // Another provider's claim wins over a late start's: the
                // type is ambiguous, the provider's other types are served.
                let other = match taken.get(&name) {
                    Some(t) => Some(t.provider_name.clone()),
                    None => all
                        .iter()
                        .filter(|l| !std::ptr::eq(*l, self))
                        .find(|l| l.declares(&name) || l.started_type_unlocked(&name))
                        .map(|l| l.name.clone()),
                };
                match other {
                    Some(first) => {
                        conflicts.insert(name, first);
                    }
                    None => {
                        mine.insert(name, Arc::new(t));
                    }
                }
            }
            (mine, conflicts)
        });
        *state = match started {
            Ok((types, conflicts)) => {
                tracing::info!(provider = %self.name, types = types.len(), "provider started");
                for (t, first) in &conflicts {
                    tracing::warn!(provider = %self.name, type_name = %t, %first, "the provider claims a type another provider serves; that type is ambiguous");
                }
                State::Started(types, conflicts)
            }
            Err(e) => {
                let failures = previous_failures.saturating_add(1);
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1u32 << failures.saturating_sub(1).min(6))
                    .min(MAX_BACKOFF);
                let cause = match e {
                    RegistryError::Provider { message, .. } => message,
                    other => other.to_string(),
                };
                tracing::warn!(provider = %self.name, %cause, retry_in = ?backoff, "provider cannot start; its types are unavailable");
                State::Failed {
                    cause,
                    failures,
                    retry_at: Instant::now() + backoff,
                }
            }
        };
    }

    /// Whether it has started and serves `type_name`; does not wait for a
    /// start in progress (that provider's own check covers the pair).
    fn started_type_unlocked(&self, type_name: &str) -> bool {
        match self.state.try_lock() {
            Ok(state) => matches!(&*state, State::Started(t, _) if t.contains_key(type_name)),
            Err(_) => false,
        }
    }
}
