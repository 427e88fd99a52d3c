//! The engine's operation kinds and what each uses.
//!
//! [`Core`] is what every operation shares: the store, the registry, the
//! configuration, leases, scheduling and one operation's records. Each
//! kind of operation is a type of its own that borrows the core, with that
//! kind's methods: `engine.updates().start_update(…)`,
//! `engine.change_sets().execute_change_set(…)`.
//!
//! A kind reaches the core through `Deref` (so its code reads `self.store`
//! and `self.record(…)`), and reaches another kind only through the uses
//! declared for it below: `uses [deletes: Deletes]` gives `Creates` a
//! `self.deletes()`, and nothing else does. The core has no way to make a
//! kind, so this table is the whole graph of which kind calls which.
//! A use a kind stops calling is a dead-code warning (CI fails on it), so
//! the table cannot drift from the code.
//!
//! The graph has circles by design, and only these: the engine serves
//! groups and nested stacks itself, behind the same protocol as any
//! provider, so the protocol runs a group's members (steps, again through
//! the protocol), and a nested stack runs its child's operation (a create,
//! update or delete of its own). Without the protocol's and the nested
//! stacks' uses the kinds call one way; the test `the_graph_of_kinds`
//! prints the table and fails on any other circle.

use std::ops::Deref;

use super::{Core, Engine};

macro_rules! operation_kind {
    ($(#[$doc:meta])* $kind:ident, $accessor:ident, uses [$($dep:ident: $dep_kind:ident),* $(,)?]) => {
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $kind<'a> {
            core: &'a Core,
        }

        impl Deref for $kind<'_> {
            type Target = Core;

            fn deref(&self) -> &Core {
                self.core
            }
        }

        impl<'a> $kind<'a> {
            $(
                pub(super) fn $dep(&self) -> $dep_kind<'a> {
                    $dep_kind { core: self.core }
                }
            )*
        }

        impl Engine {
            $(#[$doc])*
            pub fn $accessor(&self) -> $kind<'_> {
                $kind { core: self }
            }
        }

        #[cfg(test)]
        impl $kind<'_> {
            /// This kind's name and the kinds it uses, for the graph test.
            pub(super) const USES: (&'static str, &'static [&'static str]) =
                (stringify!($kind), &[$(stringify!($dep_kind)),*]);
        }
    };
}

operation_kind!(
    /// The resource-call protocol: which provider serves a resource and
    /// what it is sent (properties, metadata, the request's context), each
    /// call made with its timeout; the engine-served types (groups, nested
    /// stacks) dispatched to the engine (`protocol`, `served`).
    Protocol,
    protocol,
    uses [groups: Groups, hooks: Hooks, nested_stacks: NestedStacks]
);
operation_kind!(
    /// The choreography of every resource call: the intent recorded, the
    /// call made through the protocol, the outcome recorded, an unknown
    /// outcome asked again, the policy applied (`steps`).
    Steps,
    steps,
    uses [hooks: Hooks, protocol: Protocol, signals: Signals]
);
operation_kind!(
    /// Who runs which operation: claims of operations nobody holds,
    /// hand-offs, dead processes' leases, operations given up.
    Claims,
    claims,
    uses []
);
operation_kind!(
    /// Creating a stack: its resources, their signals and outputs, and the
    /// rollback of a failed create.
    Creates,
    creates,
    uses [deletes: Deletes, protocol: Protocol, signals: Signals, steps: Steps]
);
operation_kind!(
    /// Deleting a stack and its resources (deletion policies honoured).
    Deletes,
    deletes,
    uses [nested_stacks: NestedStacks, steps: Steps]
);
operation_kind!(
    /// Updating a stack: its four phases, replacement, rollback, cleanup,
    /// cancel-update and continue-update-rollback.
    Updates,
    updates,
    uses [creates: Creates, hooks: Hooks, nested_stacks: NestedStacks, protocol: Protocol, signals: Signals, steps: Steps]
);
operation_kind!(
    /// Change sets: planned, stored, described, executed.
    ChangeSets,
    change_sets,
    uses [hooks: Hooks, imports: Imports, nested_stacks: NestedStacks, updates: Updates]
);
operation_kind!(
    /// Nested stacks: the `AWS::CloudFormation::Stack` resources whose
    /// children the engine runs.
    NestedStacks,
    nested_stacks,
    uses [creates: Creates, deletes: Deletes, updates: Updates]
);
operation_kind!(
    /// `cairn update`: bringing a stack's resources back to its template.
    Reconciles,
    reconciles,
    uses [
        creates: Creates,
        drift: Drift,
        groups: Groups,
        nested_stacks: NestedStacks,
        protocol: Protocol,
        steps: Steps,
        updates: Updates,
    ]
);
operation_kind!(
    /// Importing resources made elsewhere: checked, read, adopted.
    Imports,
    imports,
    uses [creates: Creates, nested_stacks: NestedStacks, protocol: Protocol, updates: Updates]
);
operation_kind!(
    /// Drift detection.
    Drift,
    drift,
    uses [groups: Groups, protocol: Protocol]
);
operation_kind!(
    /// Instance groups: members, rolling updates, health.
    Groups,
    groups,
    uses [protocol: Protocol, steps: Steps]
);
operation_kind!(
    /// Signals: SignalResource, and waiting for a CreationPolicy's or a
    /// wait condition's signals.
    Signals,
    signals,
    uses []
);
operation_kind!(
    /// Stack refactoring: resources renamed and moved between stacks
    /// without a provider call.
    Refactors,
    refactors,
    uses []
);
operation_kind!(
    /// Hooks: their verdict on a resource before its action, and the hooks
    /// templates define (kept in the registry).
    Hooks,
    hooks,
    uses []
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn graph() -> BTreeMap<&'static str, &'static [&'static str]> {
        [
            Protocol::USES,
            Steps::USES,
            Claims::USES,
            Creates::USES,
            Deletes::USES,
            Updates::USES,
            ChangeSets::USES,
            NestedStacks::USES,
            Reconciles::USES,
            Imports::USES,
            Drift::USES,
            Groups::USES,
            Signals::USES,
            Refactors::USES,
            Hooks::USES,
        ]
        .into_iter()
        .collect()
    }

    /// The kinds `from` reaches through its uses, itself left out unless
    /// a cycle comes back to it.
    fn reach(
        g: &BTreeMap<&'static str, &'static [&'static str]>,
        from: &str,
    ) -> BTreeSet<&'static str> {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = g[from].to_vec();
        while let Some(k) = todo.pop() {
            if seen.insert(g.get_key_value(k).map(|(k, _)| *k).unwrap_or("?")) {
                todo.extend(g.get(k).copied().unwrap_or_default());
            }
        }
        seen
    }

    /// The groups of kinds that call each other in a circle.
    fn cycles(
        g: &BTreeMap<&'static str, &'static [&'static str]>,
    ) -> BTreeSet<BTreeSet<&'static str>> {
        let reached: BTreeMap<_, _> = g.keys().map(|k| (*k, reach(g, k))).collect();
        g.keys()
            .filter(|k| reached[*k].contains(*k))
            .map(|k| {
                reached[k]
                    .iter()
                    .copied()
                    .filter(|other| reached[other].contains(k))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_graph_of_kinds() {
        let g = graph();
        for (kind, uses) in &g {
            println!("{kind:<13} uses {}", uses.join(", "));
        }
        for uses in g.values() {
            for u in *uses {
                assert!(g.contains_key(u), "{u} is not a kind of the table");
            }
        }
        // The ways back are the engine serving groups and nested stacks
        // itself: the protocol hands their calls to the engine, and a
        // nested stack runs its child's operation. Every circle goes
        // through them...
        let found = cycles(&g);
        println!("circles: {found:?}");
        for circle in &found {
            assert!(
                circle.contains("Protocol") && circle.contains("NestedStacks"),
                "{circle:?} call each other in a circle that is not the engine serving groups and nested stacks"
            );
        }
        // ...and without them, the kinds call one way.
        let mut served_apart = g.clone();
        served_apart.insert("Protocol", &[]);
        served_apart.insert("NestedStacks", &[]);
        assert_eq!(
            cycles(&served_apart),
            BTreeSet::new(),
            "kinds call each other in a circle besides the engine-served types"
        );
        // The engine-served types: groups, nested stacks, and the hooks
        // templates define (which use no kind).
        assert_eq!(g["Protocol"], ["Groups", "Hooks", "NestedStacks"]);
        assert!(g["Hooks"].is_empty());
    }
}
