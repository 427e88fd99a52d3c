//! The rolling update of a group whose members keep their names (Heat's
//! `OS::Heat::ResourceGroup`): a new member definition reaches the members
//! by updating them under their own names and indices (in place, or
//! replaced under the same name when their type says so), never by new
//! names; only growth adds indices and only a shrink removes them.
//!
//! The batches are Heat's, computed the way heat/scaling/rolling_update.py
//! and resource_group.py compute them (`next_batch`, `_get_batches`,
//! `_assemble_for_rolling_update` with scaling/template.py's
//! `member_definitions`): capacity may surge above the target so that
//! `min_in_service` members stay untouched, the surge members are made with
//! the new definition and removed by the last batch. The whole plan is
//! worked out before the first batch runs, by replaying those steps over
//! the members, so a resumed rollout runs exactly the batches it stored.

use super::naming::Batch;

/// Heat's `rolling_update.next_batch`: the group's capacity after the batch
/// and how many of its members have the new definition in it.
pub fn next_batch(
    target: usize,
    current: usize,
    updated: usize,
    batch_size: usize,
    min_in_service: usize,
) -> (usize, usize) {
    let effective_min = min_in_service.min(target).min(current);
    let effective_batch = batch_size.min(target.saturating_sub(updated));
    let capacity = effective_batch
        + current
            .min(target.saturating_sub(effective_batch))
            .max(effective_min);
    (capacity, effective_batch)
}

/// Heat's `rolling_update.needs_update`.
pub fn needs_update(target: usize, current: usize, updated: usize) -> bool {
    !(updated >= current && current == target)
}

/// ResourceGroup's `_get_batches`: (capacity, members given the new
/// definition) per batch; surge members are not counted as updated.
pub fn batch_sizes(
    target: usize,
    current: usize,
    batch_size: usize,
    min_in_service: usize,
) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut current, mut updated) = (current, 0usize);
    // Each batch updates at least one member or settles the capacity, so
    // the loop ends; the bound only guards against a policy of size 0.
    while needs_update(target, current, updated) && out.len() <= 2 * target + current + 2 {
        let (capacity, new) = next_batch(target, current, updated, batch_size, min_in_service);
        out.push((capacity, new));
        let surge = capacity.saturating_sub(current.max(target));
        updated = (updated + new).saturating_sub(surge);
        current = capacity;
    }
    out
}

/// A member as the planner sees it: its index, and whether it already has
/// the definition the rollout moves to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub index: u64,
    pub up_to_date: bool,
}

/// The batches that move `members` (index order) to the new definition and
/// the group to `target` members, with Heat's batch size and
/// min_in_service; `removed` indices are never used. Each batch creates
/// `create` (new indices, new definition), updates `update` (kept names)
/// and deletes `replace` (surge members and a shrink's). Batches that
/// change nothing are left out.
pub fn plan(
    members: &[Slot],
    removed: &[u64],
    target: usize,
    batch_size: usize,
    min_in_service: usize,
) -> Vec<Batch> {
    let mut live: Vec<Slot> = members.to_vec();
    let mut batches = Vec::new();
    for (capacity, new) in batch_sizes(target, live.len(), batch_size.max(1), min_in_service) {
        let batch = assemble(&live, removed, target, capacity, new);
        live.retain(|s| !batch.replace.contains(&s.index));
        for s in live.iter_mut() {
            if batch.update.contains(&s.index) {
                s.up_to_date = true;
            }
        }
        live.extend(batch.create.iter().map(|&index| Slot {
            index,
            up_to_date: true,
        }));
        live.sort_by_key(|s| s.index);
        if !(batch.create.is_empty() && batch.update.is_empty() && batch.replace.is_empty()) {
            batches.push(batch);
        }
    }
    batches
}

/// One batch, as `_assemble_for_rolling_update` lays out the group's
/// template: the first `capacity` indices not removed are the members; the
/// others go first; the kept ones are updated highest index first (surge
/// members last), `new` in all counting the members created.
fn assemble(live: &[Slot], removed: &[u64], target: usize, capacity: usize, new: usize) -> Batch {
    let names: Vec<u64> = (0u64..)
        .filter(|i| !removed.contains(i))
        .take(capacity)
        .collect();
    let priority = |s: &Slot| match names.iter().position(|n| *n == s.index) {
        None => 0,
        Some(p) if p < target => target - p,
        Some(_) => capacity,
    };
    let mut ordered: Vec<Slot> = live.to_vec();
    // Stable: equal priorities stay in index order, as Heat's sort keeps
    // the nested stack's member order.
    ordered.sort_by_key(priority);
    let dropped = ordered.len().saturating_sub(capacity);
    let replace: Vec<u64> = ordered[..dropped].iter().map(|s| s.index).collect();
    let kept = &ordered[dropped..];
    let creating = capacity - kept.len();
    let mut replacing = new.saturating_sub(creating);
    let mut update = Vec::new();
    for s in kept {
        if !s.up_to_date && replacing > 0 {
            replacing -= 1;
            update.push(s.index);
        }
    }
    let create: Vec<u64> = names
        .iter()
        .copied()
        .filter(|n| !live.iter().any(|s| s.index == *n))
        .take(creating)
        .collect();
    Batch {
        create,
        replace,
        update,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stale(n: u64) -> Vec<Slot> {
        (0..n)
            .map(|index| Slot {
                index,
                up_to_date: false,
            })
            .collect()
    }

    /// heat/tests/openstack/heat/test_resource_group.py's batch vectors
    /// (and heat.md §3.3): (target, current, batch, min_in_service).
    #[test]
    fn heats_batch_sizes() {
        assert_eq!(
            batch_sizes(5, 5, 1, 5),
            [vec![(6, 1); 6], vec![(5, 0)]].concat()
        );
        let b = batch_sizes(10, 10, 3, 8);
        assert_eq!(b.last(), Some(&(10, 2)));
        assert_eq!(
            batch_sizes(10, 10, 3, 1),
            vec![(10, 3), (10, 3), (10, 3), (10, 1)]
        );
        assert_eq!(next_batch(10, 10, 0, 3, 8), (11, 3));
        assert!(!needs_update(4, 4, 4));
        // Without a rolling_update: everything in one batch.
        assert_eq!(batch_sizes(3, 3, 1_000_000, 0), vec![(3, 3)]);
    }

    /// heat_integrationtests test_resource_group.py, rolling update of
    /// count 10: every member updated under its name, surge removed.
    #[test]
    fn the_integration_tests_counts() {
        let count = |target: usize, batch: usize, min: usize| {
            let plan = plan(&stale(10), &[], target, batch, min);
            let all = |f: fn(&Batch) -> &Vec<u64>| -> Vec<u64> {
                plan.iter().flat_map(|b| f(b).clone()).collect()
            };
            let (created, updated, deleted) =
                (all(|b| &b.create), all(|b| &b.update), all(|b| &b.replace));
            // Surge members: made and removed by the same rollout.
            let surge: Vec<u64> = created
                .iter()
                .copied()
                .filter(|i| deleted.contains(i))
                .collect();
            let new = created.len() - surge.len();
            let gone = deleted.len() - surge.len();
            let mut updated_sorted = updated.clone();
            updated_sorted.sort_unstable();
            updated_sorted.dedup();
            assert_eq!(updated_sorted.len(), updated.len(), "no member twice");
            (updated.len(), new, gone)
        };
        assert_eq!(count(10, 3, 1), (10, 0, 0));
        assert_eq!(count(6, 3, 1), (6, 0, 4));
        assert_eq!(count(12, 3, 1), (10, 2, 0));
        assert_eq!(count(6, 4, 8), (6, 0, 4));
        assert_eq!(count(10, 4, 8), (10, 0, 0));
        assert_eq!(count(10, 20, 0), (10, 0, 0));
        assert_eq!(count(10, 1, 20), (10, 0, 0));
    }

    #[test]
    fn highest_indices_first_and_surge_last() {
        let p = plan(&stale(10), &[], 10, 4, 8);
        assert_eq!(
            p[0],
            Batch {
                create: vec![10, 11],
                update: vec![9, 8],
                replace: vec![]
            }
        );
        assert_eq!(p[1].update, vec![7, 6, 5, 4]);
        assert_eq!(p[2].update, vec![3, 2, 1, 0]);
        assert_eq!(
            p[3],
            Batch {
                create: vec![],
                update: vec![],
                replace: vec![10, 11]
            }
        );
        assert_eq!(p.len(), 4);
    }

    #[test]
    fn removed_indices_are_skipped_and_up_to_date_members_left_alone() {
        let mut members: Vec<Slot> = [0u64, 4, 5]
            .iter()
            .map(|&index| Slot {
                index,
                up_to_date: false,
            })
            .collect();
        members[1].up_to_date = true;
        let p = plan(&members, &[1, 2, 3], 4, 1_000_000, 0);
        assert_eq!(
            p,
            vec![Batch {
                create: vec![6],
                update: vec![5, 0],
                replace: vec![]
            }]
        );
        // Nothing stale and nothing to resize: no batch.
        let fresh: Vec<Slot> = (0..3)
            .map(|index| Slot {
                index,
                up_to_date: true,
            })
            .collect();
        assert!(plan(&fresh, &[], 3, 1, 0).is_empty());
    }
}
