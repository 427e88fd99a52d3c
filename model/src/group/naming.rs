//! Member names of a group and the batches of a rolling replacement, as
//! seed 002 designs them.
//!
//! Members are `<prefix>-<n>`, and a group's indices are always one
//! contiguous run. Growing appends after the highest index; shrinking removes
//! the highest. A full replacement takes new indices starting at 0 when the
//! whole group fits below the lowest current index, otherwise right after the
//! highest; its batches take consecutive indices. New members never reuse a
//! live name, so a replacement's members can be created before the members
//! they replace are deleted (and a host name never changes under a member).
//!
//! Indices are compared as numbers: the seed's prototype sorted names as
//! strings, which puts `vm-10` before `vm-2`.

/// The name of member `index`.
pub fn member_name(prefix: &str, index: u64) -> String {
    format!("{prefix}-{index}")
}

/// The index of a member named `<prefix>-<n>`, if the name has that form.
pub fn member_index(prefix: &str, name: &str) -> Option<u64> {
    let digits = name.strip_prefix(prefix)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // "01" is not a name this scheme makes.
    if digits.len() > 1 && digits.starts_with('0') {
        return None;
    }
    digits.parse().ok()
}

/// The lowest and highest of `indices` (numerically), if any.
fn bounds(indices: &[u64]) -> Option<(u64, u64)> {
    Some((*indices.iter().min()?, *indices.iter().max()?))
}

/// The indices added when a group with `current` members grows to `size`
/// (none if it is not growing): right after the highest index, or from 0
/// for an empty group.
pub fn grow(current: &[u64], size: usize) -> Vec<u64> {
    grow_avoiding(current, &[], size)
}

/// [`grow`] skipping the indices `removed` (Heat's name blacklist): a
/// group created with index 1 removed is 0, 2, 3.
pub fn grow_avoiding(current: &[u64], removed: &[u64], size: usize) -> Vec<u64> {
    let start = bounds(current).map_or(0, |(_, high)| high + 1);
    let adding = size.saturating_sub(current.len());
    (start..)
        .filter(|i| !removed.contains(i))
        .take(adding)
        .collect()
}

/// The indices removed when a group with `current` members shrinks to
/// `size`: the highest ones, highest first.
pub fn shrink(current: &[u64], size: usize) -> Vec<u64> {
    let mut sorted = current.to_vec();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.truncate(current.len().saturating_sub(size));
    sorted
}

/// The new indices of a full replacement of `current`, in batches of at most
/// `batch_size` (seed 002's `get_replacements`, ordered numerically): from 0
/// when the group fits below its lowest index, else after its highest.
pub fn replacement_batches(current: &[u64], batch_size: usize) -> Vec<Vec<u64>> {
    new_indices(current, current.len(), batch_size)
}

/// `count` new indices for a group whose live members are `live`, in
/// batches: from 0 when they fit below the lowest live index, else after the
/// highest. Never a live index.
fn new_indices(live: &[u64], count: usize, batch_size: usize) -> Vec<Vec<u64>> {
    let Some((low, high)) = bounds(live) else {
        return Vec::new();
    };
    let start = if count as u64 <= low { 0 } else { high + 1 };
    (start..start + count as u64)
        .collect::<Vec<_>>()
        .chunks(batch_size.max(1))
        .map(<[u64]>::to_vec)
        .collect()
}

/// One step of a rolling replacement: the members to create (new indices)
/// and the old ones they replace, deleted once the new ones are healthy.
/// A group whose members keep their names ([`super::in_place`]) also
/// updates members under their names (`update`); its `replace` are the
/// members it removes (surge members, a shrink's).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Batch {
    pub create: Vec<u64>,
    pub replace: Vec<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub update: Vec<u64>,
}

/// The batches of a rolling replacement of the whole group: each creates new
/// members, then deletes as many old ones, lowest first.
pub fn rolling_plan(current: &[u64], batch_size: usize) -> Vec<Batch> {
    rolling_plan_of(current, current, batch_size)
}

/// The batches that replace the members `stale` of a group whose live
/// members are `live` (a rollback replaces only the members a failed
/// rollout had already moved). New names follow seed 002's rule, applied to
/// the live indices, so they never collide with a member that stays.
pub fn rolling_plan_of(live: &[u64], stale: &[u64], batch_size: usize) -> Vec<Batch> {
    let mut old = stale.to_vec();
    old.sort_unstable();
    let mut old = old.into_iter();
    new_indices(live, stale.len(), batch_size)
        .into_iter()
        .map(|create| Batch {
            replace: old.by_ref().take(create.len()).collect(),
            create,
            update: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(prefix: &str, batches: &[Vec<u64>]) -> Vec<Vec<String>> {
        batches
            .iter()
            .map(|b| b.iter().map(|i| member_name(prefix, *i)).collect())
            .collect()
    }

    fn indices(prefix: &str, members: &[&str]) -> Vec<u64> {
        members
            .iter()
            .filter_map(|m| member_index(prefix, m))
            .collect()
    }

    #[test]
    fn growing_skips_removed_indices() {
        assert_eq!(grow_avoiding(&[], &[1], 3), [0, 2, 3]);
        assert_eq!(grow_avoiding(&[0, 2], &[1, 3], 4), [4, 5]);
        assert_eq!(grow_avoiding(&[0, 1], &[], 1), Vec::<u64>::new());
        assert_eq!(grow(&[0, 1], 3), [2]);
    }

    #[test]
    fn the_seeds_worked_examples() {
        let current = indices("vm", &["vm-0", "vm-2", "vm-4", "vm-1", "vm-3", "vm-5"]);
        assert_eq!(
            names("vm", &replacement_batches(&current, 2)),
            [["vm-6", "vm-7"], ["vm-8", "vm-9"], ["vm-10", "vm-11"]]
        );
        let current = indices("vm", &["vm-6", "vm-8", "vm-10", "vm-7", "vm-9", "vm-11"]);
        assert_eq!(
            names("vm", &replacement_batches(&current, 2)),
            [["vm-0", "vm-1"], ["vm-2", "vm-3"], ["vm-4", "vm-5"]]
        );
    }

    #[test]
    fn the_seeds_resize_and_replace_sequence() {
        // Initial stack with min capacity 2.
        let mut group: Vec<u64> = grow(&[], 2);
        assert_eq!(group, [0, 1]);
        // Grow to 4: appended after the highest.
        group.extend(grow(&group, 4));
        assert_eq!(group, [0, 1, 2, 3]);
        // Replaced: 4 members do not fit below index 0, so after 3.
        group = replacement_batches(&group, 4).concat();
        assert_eq!(group, [4, 5, 6, 7]);
        // Grow to 6, shrink to 4 (the highest go).
        group.extend(grow(&group, 6));
        assert_eq!(group, [4, 5, 6, 7, 8, 9]);
        let removed = shrink(&group, 4);
        assert_eq!(removed, [9, 8]);
        group.retain(|i| !removed.contains(i));
        assert_eq!(group, [4, 5, 6, 7]);
        // Replaced again: 4 members fit below index 4, so from 0.
        group = replacement_batches(&group, 4).concat();
        assert_eq!(group, [0, 1, 2, 3]);
    }

    #[test]
    fn indices_are_numeric_not_textual() {
        // Sorted as strings, vm-2…vm-10 starts at "vm-10" and ends at
        // "vm-9": the prototype would start the replacement at 0 and reuse
        // the live names vm-2…vm-8. Numerically it starts after vm-10.
        let current: Vec<u64> = (2..=10).collect();
        assert_eq!(
            replacement_batches(&current, 3),
            [vec![11, 12, 13], vec![14, 15, 16], vec![17, 18, 19]]
        );
        assert_eq!(
            rolling_plan(&[9, 10, 11, 12], 2),
            [
                Batch {
                    create: vec![0, 1],
                    replace: vec![9, 10],
                    update: vec![]
                },
                Batch {
                    create: vec![2, 3],
                    replace: vec![11, 12],
                    update: vec![]
                },
            ]
        );
    }

    #[test]
    fn a_partial_replacement_avoids_every_live_name() {
        // A rollout moved vm-0, vm-1 to vm-6, vm-7 and then failed: rolling
        // back replaces only those two, with the free names below vm-2.
        let live = [2, 3, 4, 5, 6, 7];
        assert_eq!(
            rolling_plan_of(&live, &[6, 7], 1),
            [
                Batch {
                    create: vec![0],
                    replace: vec![6],
                    update: vec![]
                },
                Batch {
                    create: vec![1],
                    replace: vec![7],
                    update: vec![]
                },
            ]
        );
        // Three stale members do not fit below vm-2: after the highest.
        assert_eq!(
            rolling_plan_of(&live, &[2, 6, 7], 3),
            [Batch {
                create: vec![8, 9, 10],
                replace: vec![2, 6, 7],
                update: vec![]
            }]
        );
    }

    #[test]
    fn names_parse_only_in_their_own_form() {
        assert_eq!(member_index("vm", "vm-12"), Some(12));
        assert_eq!(member_index("vm", "vm-0"), Some(0));
        assert_eq!(member_index("vm", "vm-01"), None);
        assert_eq!(member_index("vm", "vm-"), None);
        assert_eq!(member_index("vm", "vmx-1"), None);
        assert_eq!(member_index("web-vm", "web-vm-3"), Some(3));
        assert_eq!(member_index("vm", "vm-3a"), None);
    }

    /// A resize or a replacement.
    #[derive(Debug, Clone)]
    enum Op {
        Resize(usize),
        Replace(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..40).prop_map(Op::Resize),
            (1usize..12).prop_map(Op::Replace),
        ]
    }

    fn contiguous(group: &[u64]) -> bool {
        match bounds(group) {
            None => true,
            Some((low, high)) => (high - low + 1) as usize == group.len(),
        }
    }

    proptest! {
        /// A rollback replaces only some members: the new names avoid every
        /// live name, are consecutive, and each batch is bounded.
        #[test]
        fn partial_replacements_never_reuse_a_live_name(
            start in 0u64..40,
            size in 1usize..30,
            picks in proptest::collection::vec(any::<bool>(), 30),
            batch in 1usize..8,
        ) {
            let live: Vec<u64> = (start..start + size as u64).collect();
            let stale: Vec<u64> = live.iter().zip(&picks).filter(|(_, p)| **p).map(|(i, _)| *i).collect();
            let plan = rolling_plan_of(&live, &stale, batch);
            let created: Vec<u64> = plan.iter().flat_map(|b| b.create.clone()).collect();
            let replaced: Vec<u64> = plan.iter().flat_map(|b| b.replace.clone()).collect();
            prop_assert_eq!(&replaced, &stale);
            prop_assert_eq!(created.len(), stale.len());
            prop_assert!(created.iter().all(|i| !live.contains(i)));
            prop_assert!(created.windows(2).all(|w| w[1] == w[0] + 1));
            prop_assert!(plan.iter().all(|b| b.create.len() <= batch && b.create.len() == b.replace.len()));
        }

        #[test]
        fn any_history_keeps_names_unique_contiguous_and_batches_bounded(
            initial in 0usize..30,
            ops in proptest::collection::vec(op(), 0..25),
        ) {
            let mut group = grow(&[], initial);
            for op in ops {
                match op {
                    Op::Resize(size) => {
                        if size >= group.len() {
                            let added = grow(&group, size);
                            prop_assert!(added.iter().all(|i| !group.contains(i)));
                            group.extend(added);
                        } else {
                            let removed = shrink(&group, size);
                            let highest: Vec<u64> = {
                                let mut g = group.clone();
                                g.sort_unstable();
                                g.split_off(size).into_iter().rev().collect()
                            };
                            prop_assert_eq!(&removed, &highest);
                            group.retain(|i| !removed.contains(i));
                        }
                        prop_assert_eq!(group.len(), size);
                    }
                    Op::Replace(batch) => {
                        let plan = rolling_plan(&group, batch);
                        let created: Vec<u64> = plan.iter().flat_map(|b| b.create.clone()).collect();
                        let replaced: Vec<u64> = plan.iter().flat_map(|b| b.replace.clone()).collect();
                        // Every batch is at most the batch size and replaces
                        // as many members as it creates.
                        for b in &plan {
                            prop_assert!(!b.create.is_empty() && b.create.len() <= batch);
                            prop_assert_eq!(b.create.len(), b.replace.len());
                        }
                        // Full coverage, no live name reused, consecutive names.
                        prop_assert_eq!(created.len(), group.len());
                        let mut old = group.clone();
                        old.sort_unstable();
                        prop_assert_eq!(&replaced, &old);
                        prop_assert!(created.iter().all(|i| !group.contains(i)));
                        prop_assert!(created.windows(2).all(|w| w[1] == w[0] + 1));
                        group = created;
                    }
                }
                prop_assert!(contiguous(&group), "not contiguous: {:?}", group);
            }
        }
    }
}
