//! Runs work over a dependency graph: a node starts once all its predecessors
//! are done, independent nodes run concurrently up to a bound.

use std::future::Future;

use futures::stream::{FuturesUnordered, StreamExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed,
    /// Never started: a predecessor failed, or scheduling stopped.
    NotRun,
}

/// Runs `work` on every node in `todo` order-respecting `preds` (`preds[i]` must
/// finish before `i`). Nodes already `Done` in `initial` are skipped. With
/// `stop_on_failure`, no new node starts after the first failure (nodes in
/// flight finish). Returns each node's outcome.
pub async fn run<F, Fut>(
    preds: &[Vec<usize>],
    initial: Vec<Outcome>,
    max_concurrency: usize,
    stop_on_failure: bool,
    work: F,
) -> Vec<Outcome>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = (usize, bool)>,
{
    let n = preds.len();
    let mut outcome = initial;
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting: Vec<usize> = vec![0; n];
    for (i, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(i);
            if outcome[p] != Outcome::Done {
                waiting[i] += 1;
            }
        }
    }
    let mut ready: std::collections::VecDeque<usize> = (0..n)
        .filter(|&i| outcome[i] != Outcome::Done && waiting[i] == 0)
        .collect();
    let mut running = FuturesUnordered::new();
    let mut failed = false;
    loop {
        while running.len() < max_concurrency.max(1) && !(failed && stop_on_failure) {
            let Some(i) = ready.pop_front() else { break };
            running.push(work(i));
        }
        let Some((i, ok)) = running.next().await else {
            break;
        };
        if ok {
            outcome[i] = Outcome::Done;
            for &s in &succs[i] {
                waiting[s] -= 1;
                if waiting[s] == 0 {
                    ready.push_back(s);
                }
            }
        } else {
            outcome[i] = Outcome::Failed;
            failed = true;
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn respects_order_bound_and_failures() {
        // 0 -> 2, 1 -> 2, 2 -> 3
        let preds = vec![vec![], vec![], vec![0, 1], vec![2]];
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let out = run(&preds, vec![Outcome::NotRun; 4], 1, true, move |i| {
            let l = l.clone();
            async move {
                l.lock().unwrap().push(i);
                (i, true)
            }
        })
        .await;
        assert_eq!(out, vec![Outcome::Done; 4]);
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3]);

        let out = run(&preds, vec![Outcome::NotRun; 4], 4, true, |i| async move {
            (i, i != 1)
        })
        .await;
        assert_eq!(
            out,
            vec![
                Outcome::Done,
                Outcome::Failed,
                Outcome::NotRun,
                Outcome::NotRun
            ]
        );

        let out = run(
            &preds,
            vec![
                Outcome::Done,
                Outcome::Done,
                Outcome::NotRun,
                Outcome::NotRun,
            ],
            4,
            true,
            |i| async move {
                assert!(i >= 2);
                (i, true)
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Done; 4]);
    }
}
