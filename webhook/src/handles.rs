//! Wait condition handles, the part that lives with the callback
//! listener: the intake of a signal PUT to a handle's URL, kept in the
//! store before it is acknowledged. (A handle's URL is signed by the
//! listener: `Callbacks` answers the engine's `HandleUrls` in `callback`.)
//! The engine waits for the kept signals (`engine::signals`); nothing here
//! knows the engine or the listener.

use cairn_model::signal::{Signal, WAIT_CONDITION_HANDLE};
use cairn_model::stack::{now, ResourceStatus, SignalRecord};
use cairn_store::{Store, StoreError};

/// Why a signal was refused.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Store(#[from] StoreError),
}

/// Keeps a signal PUT to a wait condition handle's URL, once the handle is
/// known to exist.
pub async fn accept_handle_signal(
    store: &dyn Store,
    stack_id: &str,
    logical_id: &str,
    body: &[u8],
) -> Result<(), SignalError> {
    let gone = || {
        SignalError::NotFound(format!(
            "the wait condition handle {logical_id} of stack {stack_id} does not exist (its stack or the handle was deleted)"
        ))
    };
    let stack = store.find_stack(stack_id).await?.ok_or_else(gone)?;
    if stack.status == cairn_model::stack::StackStatus::DeleteComplete {
        return Err(gone());
    }
    let rows = store.resources(&stack.stack_id).await?;
    let live = rows.iter().any(|r| {
        r.logical_id == logical_id
            && r.resource_type == WAIT_CONDITION_HANDLE
            && !matches!(
                r.status,
                ResourceStatus::DeleteComplete | ResourceStatus::DeleteInProgress
            )
    });
    if !live {
        return Err(gone());
    }
    // A signal without an id is numbered after those kept (Heat's rule);
    // when others arrive at the same moment, each takes the next free
    // number instead of replacing another's.
    let mut numbered = false;
    for _ in 0..MAX_NUMBERING_ATTEMPTS {
        let kept = store.signals(&stack.stack_id, logical_id).await?.len();
        let signal = Signal::parse(body, || {
            numbered = true;
            (kept + 1).to_string()
        })
        .map_err(|e| SignalError::Invalid(e.to_string()))?;
        let record = SignalRecord {
            stack_id: stack.stack_id.clone(),
            logical_id: logical_id.to_string(),
            unique_id: signal.unique_id,
            status: signal.status,
            reason: signal.reason,
            data: signal.data,
            received_at: now(),
        };
        if !numbered {
            // An id the sender chose replaces a signal with the same one.
            store.put_signal(&record).await?;
            return Ok(());
        }
        if store.add_signal(&record).await? {
            return Ok(());
        }
    }
    Err(SignalError::Invalid(format!(
        "the signal could not be numbered: {MAX_NUMBERING_ATTEMPTS} others arrived at the same moment; send it again, or give it an id"
    )))
}

/// How many numbers a signal without an id tries before it is refused.
const MAX_NUMBERING_ATTEMPTS: usize = 1000;
