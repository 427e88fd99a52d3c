//! Stack notifications sent by a command: the engine's `Notifier` runs
//! beside the operation, and before the command exits it sends what is
//! left for a short while. What a target did not take by then is sent by
//! the next command that runs an operation, or by `cairn serve`.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::engine::notifications::Notifier;
use cairn_core::engine::Engine;

/// How long a command waits for its stacks' notifications before it exits.
const FLUSH: Duration = Duration::from_secs(10);

pub(crate) struct Notifying {
    notifier: Arc<Notifier>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts sending `engine`'s stack notifications.
pub(crate) fn start(engine: &Arc<Engine>) -> Notifying {
    let notifier = Arc::new(Notifier::new(engine.clone()));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn({
        let notifier = notifier.clone();
        async move { notifier.run(stopped).await }
    });
    Notifying {
        notifier,
        stop,
        task,
    }
}

impl Notifying {
    /// Stops the background sender and sends what is left, for a while.
    pub(crate) async fn finish(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
        if !self.notifier.flush(FLUSH).await {
            eprintln!("some stack notifications were not accepted yet by their webhook; the next cairn command that runs an operation (or cairn serve) sends them");
        }
    }
}
