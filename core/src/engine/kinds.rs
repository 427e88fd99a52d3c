//! The engine's operation kinds. `Engine` is the small core every
//! operation shares (the store, the registry, leases, the resource-call
//! protocol, scheduling, one operation's records); each kind of operation
//! is a type of its own holding the engine, with that kind's methods:
//! `engine.updates().start_update(…)`, `engine.change_sets().execute_change_set(…)`.
//!
//! A kind is a view, not a second owner: it borrows the engine and reaches
//! the core through `Deref`, so a kind's code reads `self.store` and
//! `self.run_protocol(…)` as the core's own does, and names another kind
//! when it uses one (`self.deletes().delete_one(…)`): which kinds use
//! which is visible at each call.

use std::ops::Deref;

use super::Engine;

macro_rules! operation_kind {
    ($(#[$doc:meta])* $kind:ident, $accessor:ident) => {
        $(#[$doc])*
        pub struct $kind<'a> {
            engine: &'a Engine,
        }

        impl Deref for $kind<'_> {
            type Target = Engine;

            fn deref(&self) -> &Engine {
                self.engine
            }
        }

        impl Engine {
            $(#[$doc])*
            pub fn $accessor(&self) -> $kind<'_> {
                $kind { engine: self }
            }
        }
    };
}

operation_kind!(
    /// The resource-call protocol: which provider serves a resource and
    /// what it is sent (properties, metadata, the request's context), each
    /// call recorded before it is made and its outcome learned
    /// (`protocol`).
    Protocol,
    protocol
);
operation_kind!(
    /// The choreography of every resource call: the intent recorded, the
    /// call made through the protocol, the outcome recorded, an unknown
    /// outcome asked again, the policy applied (`steps`).
    Steps,
    steps
);
operation_kind!(
    /// Who runs which operation: lease owners, claims of operations nobody
    /// holds, hand-offs, dead processes' leases.
    Claims,
    claims
);
operation_kind!(
    /// Creating a stack: its resources, their signals and outputs, and the
    /// rollback of a failed create.
    Creates,
    creates
);
operation_kind!(
    /// Deleting a stack and its resources (deletion policies honoured).
    Deletes,
    deletes
);
operation_kind!(
    /// Updating a stack: its four phases, replacement, rollback, cleanup,
    /// cancel-update and continue-update-rollback.
    Updates,
    updates
);
operation_kind!(
    /// Change sets: planned, stored, described, executed.
    ChangeSets,
    change_sets
);
operation_kind!(
    /// Nested stacks: the `AWS::CloudFormation::Stack` resources whose
    /// children the engine runs.
    NestedStacks,
    nested_stacks
);
operation_kind!(
    /// `cairn update`: bringing a stack's resources back to its template.
    Reconciles,
    reconciles
);
operation_kind!(
    /// Importing resources made elsewhere: checked, read, adopted.
    Imports,
    imports
);
operation_kind!(
    /// Drift detection.
    Drift,
    drift
);
operation_kind!(
    /// Instance groups: members, rolling updates, health.
    Groups,
    groups
);
operation_kind!(
    /// Signals: SignalResource, and waiting for a CreationPolicy's or a
    /// wait condition's signals.
    Signals,
    signals
);
operation_kind!(
    /// Stack refactoring: resources renamed and moved between stacks
    /// without a provider call.
    Refactors,
    refactors
);
