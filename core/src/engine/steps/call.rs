//! A call's request id: minted for a new call, or taken up again from
//! the record a crash, a timeout or a cancellation left, and what asking
//! again about a recorded create learned. Private to the choreography:
//! nothing else in the engine mints, resumes or re-asks a call.

use cairn_sdk::{CreateResult, ErrorKind, ProviderError};
use serde_json::Map;

use crate::engine::Attempt;
use crate::stack::{CallKind, PendingCall};

/// A new call of `kind` with its own request id. It is recorded before it
/// is sent: from then on a crash resumes it ([`begin_or_resume`]) instead
/// of sending another.
pub(super) fn begin(kind: CallKind) -> PendingCall {
    PendingCall {
        action: kind,
        request_id: uuid::Uuid::new_v4().to_string(),
        since_ms: None,
        hook: None,
    }
}

/// The call of `kind` a crash, a timeout or a cancellation left recorded
/// on a resource, if any.
pub(super) fn recorded(pending: Option<&PendingCall>, kind: CallKind) -> Option<&PendingCall> {
    pending.filter(|p| p.action == kind)
}

/// The recorded call of `kind` taken up again (same request id; the
/// provider learns its outcome rather than being sent it twice), else a
/// new one.
pub(super) fn begin_or_resume(
    pending: Option<&PendingCall>,
    kind: CallKind,
) -> (PendingCall, Attempt) {
    match recorded(pending, kind) {
        Some(p) => (p.clone(), Attempt::Again),
        None => (begin(kind), Attempt::First),
    }
}

/// A created resource now waits for its signals: the create's request id
/// stays (a crash resumes the wait, not the create), with the wait's start
/// so a resumed wait keeps its deadline.
pub(super) fn wait_for_signals(created: Option<&PendingCall>, since_ms: i64) -> PendingCall {
    PendingCall {
        action: CallKind::Signals,
        request_id: created.map(|p| p.request_id.clone()).unwrap_or_default(),
        since_ms: Some(since_ms),
        hook: None,
    }
}

/// What asking again about a recorded create learned.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Learned {
    /// It made this physical resource (or failed leaving it): delete it.
    Made(CreateResult),
    /// The provider answered that the create failed and made nothing.
    Nothing,
    /// No answer: whether something exists cannot be told. The record stays.
    Unknown(String),
}

/// The one rule for a re-asked create: an answer is the provider's word
/// (success, or a failure that names what it left behind, or one of the
/// kinds only a provider that looked at the request gives); anything else
/// (timeout, throttling, an internal failure: a provider that cannot
/// start, a dead plugin host, a handler that never answered) is unknown.
pub(super) fn learned(result: Result<CreateResult, ProviderError>) -> Learned {
    match result {
        Ok(made) => Learned::Made(made),
        Err(e) => match e.physical_resource_id {
            Some(id) => Learned::Made(CreateResult {
                physical_resource_id: id,
                attributes: Map::new(),
                no_echo: false,
            }),
            None => match e.kind {
                ErrorKind::InvalidRequest
                | ErrorKind::AlreadyExists
                | ErrorKind::NotUpdatable
                | ErrorKind::NotFound => Learned::Nothing,
                ErrorKind::Timeout | ErrorKind::Throttling | ErrorKind::InternalFailure => {
                    Learned::Unknown(e.message)
                }
            },
        },
    }
}

/// The reason a resource keeps its record when its create's outcome is
/// unknown (the same words for every kind of resource).
pub(super) fn cannot_tell(request_id: &str, why: &str) -> String {
    format!(
        "Cannot tell whether the create that did not finish made a resource: asking the provider again (request {request_id}) failed: {why}. Delete again when the provider answers."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(kind: ErrorKind) -> Result<CreateResult, ProviderError> {
        Err(ProviderError::new(kind, "no"))
    }

    #[test]
    fn a_recorded_call_is_resumed_with_its_request_id_and_a_new_one_is_minted() {
        let stored: PendingCall =
            serde_json::from_str(r#"{"action":"DELETE","request_id":"r-1"}"#).unwrap();
        assert_eq!(stored.action, CallKind::Delete);
        let (again, attempt) = begin_or_resume(Some(&stored), CallKind::Delete);
        assert_eq!(
            (again.request_id.as_str(), attempt),
            ("r-1", Attempt::Again)
        );
        // A call of another kind is not this one: a new request.
        let (fresh, attempt) = begin_or_resume(Some(&stored), CallKind::Create);
        assert_eq!((fresh.action, attempt), (CallKind::Create, Attempt::First));
        assert_ne!(fresh.request_id, "r-1");
        assert_ne!(begin(CallKind::Create).request_id, fresh.request_id);
        // Stored with the words Cairn has always written.
        for (kind, word) in [
            (CallKind::Create, "CREATE"),
            (CallKind::Update, "UPDATE"),
            (CallKind::Delete, "DELETE"),
            (CallKind::RollbackUpdate, "ROLLBACK_UPDATE"),
            (CallKind::Signals, "SIGNALS"),
        ] {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::Value::from(word)
            );
        }
        let waiting = wait_for_signals(Some(&stored), 7);
        assert_eq!(
            serde_json::to_string(&waiting).unwrap(),
            r#"{"action":"SIGNALS","request_id":"r-1","since_ms":7}"#
        );
    }

    #[test]
    fn only_a_providers_answer_lets_a_record_go() {
        assert_eq!(learned(err(ErrorKind::InvalidRequest)), Learned::Nothing);
        assert_eq!(learned(err(ErrorKind::NotFound)), Learned::Nothing);
        for kind in [
            ErrorKind::Timeout,
            ErrorKind::InternalFailure,
            ErrorKind::Throttling,
        ] {
            assert_eq!(learned(err(kind)), Learned::Unknown("no".into()));
        }
        let left = Err(ProviderError::internal("stopped waiting").leaving("gen-1"));
        assert!(matches!(learned(left), Learned::Made(c) if c.physical_resource_id == "gen-1"));
    }
}
