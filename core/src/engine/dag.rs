//! Runs work over a dependency graph: a node starts once all its predecessors
//! are done, independent nodes run concurrently up to a bound. When more nodes
//! are ready than may run, the one with the longest chain of nodes still
//! waiting on it starts first (critical path first), so a bound below the
//! graph's width does not stretch the longest path.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;

use futures::stream::{FuturesUnordered, StreamExt};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Failed,
    /// Never started: a predecessor failed, or scheduling stopped.
    NotRun,
    /// Was running when another node failed (with `stop_on_failure`); its work
    /// was dropped at its next await point.
    Cancelled,
}

/// Runs `work` on every node in `todo` order-respecting `preds` (`preds[i]` must
/// finish before `i`). Nodes already `Done` in `initial` are skipped. With
/// `stop_on_failure`, no new node starts after the first failure and the nodes
/// in flight are cancelled (their futures dropped). When `stop` completes (a
/// user cancelled the operation), the same happens whatever `stop_on_failure`
/// says. Returns each node's outcome.
pub async fn run<F, Fut, S>(
    preds: &[Vec<usize>],
    initial: Vec<Outcome>,
    max_concurrency: usize,
    stop_on_failure: bool,
    stop: S,
    work: F,
) -> Vec<Outcome>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = (usize, bool)>,
    S: Future<Output = ()>,
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
    let height = heights(&succs);
    let mut ready: BinaryHeap<(usize, Reverse<usize>)> = (0..n)
        .filter(|&i| outcome[i] != Outcome::Done && waiting[i] == 0)
        .map(|i| (height[i], Reverse(i)))
        .collect();
    let mut running = FuturesUnordered::new();
    let mut in_flight = vec![false; n];
    let mut failed = false;
    let mut stopped = false;
    tokio::pin!(stop);
    loop {
        let halt = stopped || (failed && stop_on_failure);
        while running.len() < max_concurrency.max(1) && !halt {
            let Some((_, Reverse(i))) = ready.pop() else {
                break;
            };
            in_flight[i] = true;
            running.push(work(i));
        }
        if halt {
            drop(running);
            for (i, running) in in_flight.iter().enumerate() {
                if *running {
                    outcome[i] = Outcome::Cancelled;
                }
            }
            break;
        }
        let next = tokio::select! {
            biased;
            _ = &mut stop => {
                stopped = true;
                continue;
            }
            next = running.next() => next,
        };
        let Some((i, ok)) = next else {
            break;
        };
        in_flight[i] = false;
        if ok {
            outcome[i] = Outcome::Done;
            for &s in &succs[i] {
                waiting[s] -= 1;
                // A node done before the run started (a resumed operation's
                // finished work) never runs again, even when a node it
                // depends on runs now.
                if waiting[s] == 0 && outcome[s] == Outcome::NotRun {
                    ready.push((height[s], Reverse(s)));
                }
            }
        } else {
            outcome[i] = Outcome::Failed;
            failed = true;
        }
    }
    outcome
}

/// For each node, the number of nodes on the longest path from it to a sink
/// (itself included). Nodes on a cycle (which a validated graph has none of)
/// get height 0.
fn heights(succs: &[Vec<usize>]) -> Vec<usize> {
    let n = succs.len();
    let mut pending: Vec<usize> = succs.iter().map(Vec::len).collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ss) in succs.iter().enumerate() {
        for &s in ss {
            preds[s].push(i);
        }
    }
    let mut height = vec![0; n];
    let mut stack: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    while let Some(i) = stack.pop() {
        height[i] = 1 + succs[i].iter().map(|&s| height[s]).max().unwrap_or(0);
        for &p in &preds[i] {
            pending[p] -= 1;
            if pending[p] == 0 {
                stack.push(p);
            }
        }
    }
    height
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn longest_chain_starts_first() {
        // 0 -> 1 -> 2 is the critical path; 3, 4 are independent leaves.
        let preds = vec![vec![], vec![0], vec![1], vec![], vec![]];
        assert_eq!(
            heights(&[vec![1], vec![2], vec![], vec![], vec![]]),
            vec![3, 2, 1, 1, 1]
        );
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        run(
            &preds,
            vec![Outcome::NotRun; 5],
            1,
            true,
            std::future::pending(),
            move |i| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push(i);
                    (i, true)
                }
            },
        )
        .await;
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn respects_order_bound_and_failures() {
        // 0 -> 2, 1 -> 2, 2 -> 3
        let preds = vec![vec![], vec![], vec![0, 1], vec![2]];
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let out = run(
            &preds,
            vec![Outcome::NotRun; 4],
            1,
            true,
            std::future::pending(),
            move |i| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push(i);
                    (i, true)
                }
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Done; 4]);
        assert_eq!(*log.lock().unwrap(), vec![0, 1, 2, 3]);

        let out = run(
            &preds,
            vec![Outcome::NotRun; 4],
            4,
            true,
            std::future::pending(),
            |i| async move { (i, i != 1) },
        )
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

        // 0 fails at once while 1 is still working: 1 is cancelled, not awaited.
        let slow_finished = Arc::new(Mutex::new(false));
        let flag = slow_finished.clone();
        let out = run(
            &[vec![], vec![]],
            vec![Outcome::NotRun; 2],
            4,
            true,
            std::future::pending(),
            move |i| {
                let flag = flag.clone();
                async move {
                    if i == 1 {
                        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                        *flag.lock().unwrap() = true;
                    }
                    (i, false)
                }
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Failed, Outcome::Cancelled]);
        assert!(!*slow_finished.lock().unwrap());

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
            std::future::pending(),
            |i| async move {
                assert!(i >= 2);
                (i, true)
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Done; 4]);
    }

    /// A node done before the run (a resumed operation's finished work)
    /// whose predecessor still runs is never run again, and what follows
    /// it starts once both are done (it used to be run again, and its
    /// successors' counts then went below zero).
    #[tokio::test]
    async fn a_node_done_before_the_run_never_runs_again() {
        // 0 -> 1 -> 2: 1 was done, 0 and 2 were not.
        let preds = vec![vec![], vec![0], vec![1]];
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let out = run(
            &preds,
            vec![Outcome::NotRun, Outcome::Done, Outcome::NotRun],
            4,
            true,
            std::future::pending(),
            move |i| {
                let l = l.clone();
                async move {
                    l.lock().unwrap().push(i);
                    (i, true)
                }
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Done; 3]);
        assert_eq!(*log.lock().unwrap(), vec![0, 2]);
    }

    #[tokio::test]
    async fn a_stop_cancels_work_in_flight_and_starts_nothing_more() {
        // 0 runs long, 1 depends on it; the stop fires while 0 runs.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let stop = async move {
            let _ = rx.await;
        };
        let started = Arc::new(Mutex::new(Vec::new()));
        let s = started.clone();
        let sender = Mutex::new(Some(tx));
        let out = run(
            &[vec![], vec![0]],
            vec![Outcome::NotRun; 2],
            4,
            false,
            stop,
            move |i| {
                s.lock().unwrap().push(i);
                if let Some(tx) = sender.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                async move {
                    tokio::time::sleep(std::time::Duration::from_secs(30)).await;
                    (i, true)
                }
            },
        )
        .await;
        assert_eq!(out, vec![Outcome::Cancelled, Outcome::NotRun]);
        assert_eq!(*started.lock().unwrap(), vec![0]);
    }
}
