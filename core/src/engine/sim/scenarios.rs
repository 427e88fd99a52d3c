//! The operations the simulator explores, on small stacks, each at every
//! write point.

use super::{
    cancelled_update, create, create_keeping_failures, reconcile, update, update_keeping_failures,
    Points, Scenario, Step,
};
use crate::stack::StackStatus::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A stack of both kinds of resources with a dependency between them.
const BASE: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
"#;

/// A stack policy that lets everything but B's replacement through.
const DENY_REPLACING_B: &str = r#"{"Statement": [
  {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"},
  {"Effect": "Deny", "Action": "Update:Replace", "Principal": "*", "Resource": "LogicalResourceId/B"}
]}"#;

/// BASE changed every way: A in place, B replaced, H removed, D added.
const CHANGED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "2"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-two, Value: !GetAtt A.Arn}
  D:
    Type: Sim::Handler
    Properties: {Name: d-one, Value: !Ref B}
"#;

/// BASE with the handler's resource updated in place.
const HANDLER_UPDATED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Sub "${A}-2"}
"#;

/// CHANGED with a resource whose create fails: the update rolls back.
const CHANGED_FAILING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "2"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-two, Value: !GetAtt A.Arn}
  D:
    Type: Sim::Handler
    Properties: {Name: d-one, Value: !Ref B}
  E:
    Type: Sim::Thing
    DependsOn: D
    Properties: {Name: e-one, Fail: create}
"#;

/// BASE with an added resource whose create never answers (finding 1).
const ADDED_HANGING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
  Slow:
    Type: Sim::Thing
    Properties: {Name: slow-added, Hang: create}
"#;

/// BASE with B replaced by a create that never answers (finding 1).
const REPLACED_HANGING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-two, Value: !GetAtt A.Arn, Hang: create}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
"#;

/// A create that fails, and one that never answers.
const CREATE_FAILING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
  C:
    Type: Sim::Thing
    DependsOn: H
    Properties: {Name: c-one, Fail: create}
"#;

const CREATE_HANGING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  Slow:
    Type: Sim::Thing
    DependsOn: A
    Properties: {Name: slow, Hang: create}
"#;

/// An instance group of three custom-resource handler members (finding 3).
const GROUP: &str = r#"
Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Sim::Handler
      MemberProperties: {Value: "v1"}
  Group:
    Type: Cairn::Group::InstanceGroup
    Properties:
      LaunchConfigurationName: !Ref Config
      Size: 3
      MemberNamePrefix: m
"#;

const GROUP_ROLLED: &str = r#"
Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Sim::Handler
      MemberProperties: {Value: "v2"}
  Group:
    Type: Cairn::Group::InstanceGroup
    UpdatePolicy:
      RollingUpdate: {MinInstancesInService: 1, MaxBatchSize: 2}
    Properties:
      LaunchConfigurationName: !Ref Config
      Size: 3
      MemberNamePrefix: m
"#;

/// A group whose members keep their names (Heat's ResourceGroup): `{name}`
/// and `{value}` are the members' Name (create-only: replaced) and Value
/// (updated in place); `{fail}` an extra member property.
const GROUP_KEPT: &str = r#"
Resources:
  Config:
    Type: Cairn::Group::LaunchConfiguration
    Properties:
      MemberType: Sim::Handler
      MemberProperties: {Name: "{name}-%index%", Value: "{value}"{fail}}
      IndexVariable: "%index%"
  Group:
    Type: Cairn::Group::InstanceGroup
    UpdatePolicy:
      RollingUpdate: {MinInstancesInService: 2, MaxBatchSize: 2}
    Properties:
      LaunchConfigurationName: !Ref Config
      Size: 3
      MemberNamePrefix: m
      MemberUpdate: InPlace
"#;

fn group_kept(name: &str, value: &str, fail: &str) -> String {
    let fail = if fail.is_empty() {
        String::new()
    } else {
        format!(", Fail: {fail}")
    };
    GROUP_KEPT
        .replace("{name}", name)
        .replace("{value}", value)
        .replace("{fail}", &fail)
}

/// BASE updated with A changed in place and N added, both slowly: the
/// update is cancelled while they are in flight.
const SLOW_UPDATE: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "2", Slow: update}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
  N:
    Type: Sim::Thing
    Properties: {Name: n-one, Slow: create}
"#;

/// A nested stack between resources of the parent.
const NESTED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  Child:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: file://{DIR}/child.yaml
      Parameters: {Upstream: !GetAtt A.Arn}
  After:
    Type: Sim::Handler
    Properties: {Name: after-one, Value: !GetAtt Child.Outputs.Made}
"#;

const CHILD: &str = r#"
Parameters:
  Upstream: {Type: String}
Resources:
  X:
    Type: Sim::Thing
    Properties: {Name: x-one, Value: !Ref Upstream}
  Y:
    Type: Sim::Handler
    Properties: {Name: y-one, Value: !Ref X}
Outputs:
  Made: {Value: !GetAtt X.Arn}
"#;

/// NESTED with the child's template changed every way.
const NESTED_CHANGED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "2"}
  Child:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: file://{DIR}/child-2.yaml
      Parameters: {Upstream: !GetAtt A.Arn}
  After:
    Type: Sim::Handler
    Properties: {Name: after-one, Value: !GetAtt Child.Outputs.Made}
"#;

const CHILD_CHANGED: &str = r#"
Parameters:
  Upstream: {Type: String}
Resources:
  X:
    Type: Sim::Thing
    Properties: {Name: x-two, Value: !Ref Upstream}
  Z:
    Type: Sim::Handler
    Properties: {Name: z-one, Value: !Ref X}
Outputs:
  Made: {Value: !GetAtt X.Arn}
"#;

fn child_files() -> Step {
    Step::File {
        name: "child.yaml",
        text: CHILD,
    }
}

fn changed_child_files() -> Step {
    Step::File {
        name: "child-2.yaml",
        text: CHILD_CHANGED,
    }
}

/// A HOT stack: Heat replaces a resource whose type changes on update.
const HOT_BASE: &str = r#"
heat_template_version: 2018-08-31
resources:
  r:
    type: Sim::Thing
    properties: {Name: r-one, Value: "1"}
  s:
    type: Sim::Thing
    properties: {Name: s-one, Value: {get_resource: r}}
"#;

/// HOT_BASE with `r` of the other type: a new `r` (the handler's) is
/// created, `s` follows its new id in place, the old `r` is deleted.
const HOT_RETYPED: &str = r#"
heat_template_version: 2018-08-31
resources:
  r:
    type: Sim::Handler
    properties: {Name: r-two, Value: "1"}
  s:
    type: Sim::Thing
    properties: {Name: s-one, Value: {get_resource: r}}
"#;

/// HOT_RETYPED whose new `r` fails to create: back to the Thing.
const HOT_RETYPED_FAILING: &str = r#"
heat_template_version: 2018-08-31
resources:
  r:
    type: Sim::Handler
    properties: {Name: r-two, Value: "1", Fail: create}
  s:
    type: Sim::Thing
    properties: {Name: s-one, Value: {get_resource: r}}
"#;

/// BASE with the handler's resource replaced by its handler while it is
/// updated in place (a new PhysicalResourceId in the Update's answer).
const HANDLER_RENEWED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Sub "${A}-2", Renew: update}
"#;

/// Resources that wait for signals before they are complete (a
/// CreationPolicy), one of each type, and one that refers to them.
const SIGNALLED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    CreationPolicy:
      ResourceSignal: {Count: 2, Timeout: PT1M}
    Properties: {Name: a-one, Value: "1"}
  H:
    Type: Sim::Handler
    # After A: physical ids are numbered in the order of creation, and the
    # outcomes compare them.
    DependsOn: A
    CreationPolicy:
      ResourceSignal: {Count: 1, Timeout: PT1M}
    Properties: {Name: h-one, Value: "1"}
  After:
    Type: Sim::Thing
    Properties: {Name: after-one, Value: !Sub "${A}-${H}"}
"#;

/// A larger stack: `layers` layers of `width` resources, each depending
/// on one of the layer before; every third a handler. `version` changes
/// values (in place) and, from 2 on, the names of the first of each
/// layer (replacements).
fn layered(layers: usize, width: usize, version: usize) -> String {
    let mut t = String::from("Resources:\n");
    for l in 0..layers {
        for w in 0..width {
            let kind = if (l * width + w) % 3 == 2 {
                "Handler"
            } else {
                "Thing"
            };
            let name = if w == 0 && version > 1 {
                format!("r{l}-{w}-v{version}")
            } else {
                format!("r{l}-{w}")
            };
            // A dependency by DependsOn, not by Ref: physical ids differ
            // between runs, and the outcomes are compared by properties.
            let depends = if l > 0 {
                format!("\n    DependsOn: R{}x{}", l - 1, (w + l) % width)
            } else {
                String::new()
            };
            t.push_str(&format!(
                "  R{l}x{w}:\n    Type: Sim::{kind}{depends}\n    Properties: {{Name: {name}, Value: \"{version}\"}}\n"
            ));
        }
    }
    t
}

/// A resource of a registered type (its version 1 when made) and one
/// that depends on it.
const VERSIONED_BASE: &str = r#"
Resources:
  V:
    Type: Sim::Versioned::Thing
    Properties: {Name: v-one, Value: "1"}
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: !GetAtt V.Arn}
"#;

/// VERSIONED_BASE with V changed in place.
const VERSIONED_CHANGED: &str = r#"
Resources:
  V:
    Type: Sim::Versioned::Thing
    Properties: {Name: v-one, Value: "2"}
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: !GetAtt V.Arn}
"#;

/// VERSIONED_BASE with a new resource of the registered type, and one,
/// made after V and it, whose create fails: the update rolls back (V's
/// move to version 2 is undone by version 1's provider).
const VERSIONED_FAILING: &str = r#"
Resources:
  V:
    Type: Sim::Versioned::Thing
    Properties: {Name: v-one, Value: "1"}
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: !GetAtt V.Arn}
  W:
    Type: Sim::Versioned::Thing
    Properties: {Name: w-one, Value: "1"}
  X:
    Type: Sim::Thing
    DependsOn: [V, W]
    Properties: {Name: x-one, Fail: create}
"#;

/// Guard rules: a Thing's Value may not be "forbidden".
const NO_FORBIDDEN: &str = r#"
let things = Resources.*[ Type == 'Sim::Thing' ]
rule NOT_FORBIDDEN when %things !empty {
    %things.Properties.Value != "forbidden"
    << a Sim::Thing's Value may not be forbidden >>
}
"#;

/// A Guard hook on every Thing's create and update, and the Thing A
/// (`a`: its properties) after it, with `more` resources.
fn guarded(a: &str, more: &str) -> String {
    format!(
        r#"
Resources:
  Rules:
    Type: AWS::CloudFormation::GuardHook
    Properties:
      Alias: Sim::Guard::NoForbidden
      RuleLocation: {{Uri: "file://{{DIR}}/rules.guard"}}
      FailureMode: FAIL
      TargetOperations: [RESOURCE]
      TargetFilters: {{Actions: [CREATE, UPDATE], TargetNames: [Sim::Thing]}}
  A:
    Type: Sim::Thing
    DependsOn: Rules
    Properties: {a}
{more}"#
    )
}

/// The hook and a Thing it lets through.
fn guarded_base() -> String {
    guarded(r#"{Name: a-one, Value: "1"}"#, "")
}

/// A Lambda hook (the simulator's webhook: IN_PROGRESS twice, then its
/// verdict) on every Thing's create, update and delete, and the Thing A
/// (`a`: its properties) after it.
fn hooked(a: &str) -> String {
    format!(
        r#"
Resources:
  Hook:
    Type: AWS::CloudFormation::LambdaHook
    Properties:
      Alias: Sim::Lambda::NoForbidden
      LambdaFunction: {url}
      ExecutionRole: arn:aws:iam::123456789012:role/hook
      FailureMode: FAIL
      TargetOperations: [RESOURCE]
      TargetFilters: {{TargetNames: [Sim::Thing]}}
  A:
    Type: Sim::Thing
    DependsOn: Hook
    Properties: {a}
"#,
        url = super::webhook_hook::URL
    )
}

/// A STACK-target Lambda hook (the simulator's webhook: IN_PROGRESS twice,
/// then SUCCESS for a whole stack) and a Thing whose Value is `value`.
fn stack_hooked(value: &str) -> String {
    format!(
        r#"
Resources:
  Hook:
    Type: AWS::CloudFormation::LambdaHook
    Properties:
      Alias: Sim::Lambda::Stacks
      LambdaFunction: {url}
      ExecutionRole: arn:aws:iam::123456789012:role/hook
      FailureMode: FAIL
      TargetOperations: [STACK]
  A:
    Type: Sim::Thing
    Properties: {{Name: a-one, Value: "{value}"}}
"#,
        url = super::webhook_hook::URL
    )
}

/// Guard rules for whole stacks: every template has a Description.
const DESCRIBED: &str = r#"
rule DESCRIBED {
    Description exists
    << every stack needs a Description >>
}
"#;

/// A STACK-target Guard hook and a Thing whose Value is `value`;
/// `description` the template's first line.
fn stack_guarded(description: &str, value: &str) -> String {
    format!(
        r#"{description}
Resources:
  Rules:
    Type: AWS::CloudFormation::GuardHook
    Properties:
      Alias: Sim::Guard::Described
      RuleLocation: {{Uri: "file://{{DIR}}/described.guard"}}
      FailureMode: FAIL
      TargetOperations: [STACK]
  A:
    Type: Sim::Thing
    Properties: {{Name: a-one, Value: "{value}"}}
"#
    )
}

/// The rules written beside the state, then the guarded stack made.
fn guarded_setup() -> Vec<Step> {
    vec![
        Step::File {
            name: "rules.guard",
            text: NO_FORBIDDEN,
        },
        create(&guarded_base()),
    ]
}

/// VERSIONED_BASE made on version 1, then version 2 the default.
fn versioned_setup() -> Vec<Step> {
    vec![
        Step::RegisterVersion,
        create(VERSIONED_BASE),
        Step::RegisterVersion,
    ]
}

/// Sampled write points on a 30-resource stack.
const SAMPLE: Points = Points::Sample {
    n: 10,
    seed: 0x5eed,
};

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "create",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(BASE),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create that fails and rolls back",
            expect: Some(RollbackComplete),
            setup: vec![],
            step: create(CREATE_FAILING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create whose resource never answers",
            expect: Some(RollbackFailed),
            setup: vec![],
            step: create(CREATE_HANGING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "delete",
            expect: None,
            setup: vec![create(BASE)],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "delete of a create whose outcome is unknown while the provider is down",
            expect: Some(DeleteFailed),
            setup: vec![
                create_keeping_failures(CREATE_HANGING),
                Step::CloudDown(true),
            ],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update moving a resource to its type's new default version",
            expect: Some(UpdateComplete),
            setup: versioned_setup(),
            step: Step::Upgrade {
                template: VERSIONED_BASE.into(),
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update keeping a resource on its type version",
            expect: Some(UpdateComplete),
            setup: versioned_setup(),
            step: update(VERSIONED_CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update moving type versions that fails and rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: versioned_setup(),
            step: Step::Upgrade {
                template: VERSIONED_FAILING.into(),
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create with a Guard hook in force",
            expect: Some(CreateComplete),
            setup: vec![Step::File {
                name: "rules.guard",
                text: NO_FORBIDDEN,
            }],
            step: create(&guarded_base()),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update a Guard hook refuses in place, rolled back",
            expect: Some(UpdateRollbackComplete),
            setup: guarded_setup(),
            // A's update is refused; B, which the rules let through, is
            // made and rolled back.
            step: update(&guarded(
                "{Name: a-one, Value: forbidden}",
                "  B:\n    Type: Sim::Thing\n    Properties: {Name: b-one, Value: \"2\"}\n",
            )),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "replacement a Guard hook refuses, rolled back",
            expect: Some(UpdateRollbackComplete),
            setup: guarded_setup(),
            // A's replacement is refused.
            step: update(&guarded("{Name: a-two, Value: forbidden}", "")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update a stack-target Guard hook refuses",
            expect: Some(UpdateRollbackComplete),
            setup: vec![
                Step::File {
                    name: "described.guard",
                    text: DESCRIBED,
                },
                create(&stack_guarded("Description: guarded", "1")),
            ],
            // A's change is never made: the whole update is refused.
            step: update(&stack_guarded("", "2")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "delete of a stack with a Guard hook",
            expect: None,
            setup: guarded_setup(),
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create with a Lambda hook answering IN_PROGRESS twice",
            expect: Some(CreateComplete),
            setup: Vec::new(),
            step: create(&hooked(r#"{Name: a-one, Value: "1"}"#)),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update in place a Lambda hook refuses after IN_PROGRESS, rolled back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(&hooked(r#"{Name: a-one, Value: "1"}"#))],
            step: update(&hooked("{Name: a-one, Value: forbidden}")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "replacement a Lambda hook lets through after IN_PROGRESS",
            expect: Some(UpdateComplete),
            setup: vec![create(&hooked(r#"{Name: a-one, Value: "1"}"#))],
            step: update(&hooked(r#"{Name: a-two, Value: "2"}"#)),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update judged by a STACK-target Lambda hook answering IN_PROGRESS twice",
            expect: Some(UpdateComplete),
            setup: vec![create(&stack_hooked("1"))],
            step: update(&stack_hooked("2")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "delete of a stack with a Lambda hook",
            expect: None,
            setup: vec![create(&hooked(r#"{Name: a-one, Value: "1"}"#))],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update in place, replace, add, remove",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE)],
            step: update(CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "HOT update that changes a resource's type (replacement)",
            expect: Some(UpdateComplete),
            setup: vec![create(HOT_BASE)],
            step: update(HOT_RETYPED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "HOT update to a type whose create fails and rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(HOT_BASE)],
            step: update(HOT_RETYPED_FAILING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update of a handler's resource in place",
            setup: vec![create(BASE)],
            step: update(HANDLER_UPDATED),
            expect: Some(UpdateComplete),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update that fails and rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE)],
            step: update(CHANGED_FAILING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update that fails with rollback disabled (kept in UPDATE_FAILED)",
            expect: Some(UpdateFailed),
            setup: vec![create(BASE)],
            step: update_keeping_failures(CHANGED_FAILING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update that continues a kept failed update",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE), update_keeping_failures(CHANGED_FAILING)],
            step: update(CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update back to the last stable template from a kept failed update",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE), update_keeping_failures(CHANGED_FAILING)],
            step: update(BASE),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "rollback (RollbackStack) of a kept failed update",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE), update_keeping_failures(CHANGED_FAILING)],
            step: Step::Rollback,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "rollback (RollbackStack) of a create kept in CREATE_FAILED",
            expect: Some(RollbackComplete),
            setup: vec![create_keeping_failures(CHANGED_FAILING)],
            step: Step::Rollback,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update adding a resource whose create never answers",
            expect: Some(UpdateRollbackFailed),
            setup: vec![create(BASE)],
            step: update(ADDED_HANGING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update replacing with a create that never answers",
            expect: Some(UpdateRollbackFailed),
            setup: vec![create(BASE)],
            step: update(REPLACED_HANGING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "continue-rollback once the hanging create answers",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE), update(ADDED_HANGING), Step::Heal],
            step: Step::ContinueRollback,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "delete after an update rollback that could not learn a create",
            expect: None,
            setup: vec![create(BASE), update(REPLACED_HANGING), Step::Heal],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create that waits for signals",
            expect: Some(CreateComplete),
            setup: vec![],
            step: Step::SignalledCreate {
                template: SIGNALLED.into(),
                signals: &[
                    ("A", "i-1", "SUCCESS"),
                    ("A", "i-2", "SUCCESS"),
                    ("H", "i-3", "SUCCESS"),
                ],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update replacing a resource with a CreationPolicy, which waits for new signals",
            expect: Some(UpdateComplete),
            setup: vec![Step::SignalledCreate {
                template: SIGNALLED.into(),
                signals: &[
                    ("A", "i-1", "SUCCESS"),
                    ("A", "i-2", "SUCCESS"),
                    ("H", "i-3", "SUCCESS"),
                ],
            }],
            step: Step::SignalledUpdate {
                template: SIGNALLED.replace("Name: a-one", "Name: a-two"),
                signals: &[("A", "i-4", "SUCCESS"), ("A", "i-5", "SUCCESS")],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create whose signal says FAILURE, and rolls back",
            expect: Some(RollbackComplete),
            setup: vec![],
            step: Step::SignalledCreate {
                template: SIGNALLED.into(),
                signals: &[
                    ("A", "i-1", "SUCCESS"),
                    ("A", "i-2", "FAILURE"),
                    ("H", "i-3", "SUCCESS"),
                ],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "cairn update: in place, reinstall, install, uninstall",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE)],
            step: reconcile(CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "cairn update: a handler replaces its resource while updating it",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE)],
            step: reconcile(HANDLER_RENEWED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "cairn update --drift-only: one drifted, one gone",
            expect: Some(UpdateComplete),
            setup: vec![
                create(BASE),
                Step::Tamper {
                    logical_id: "H",
                    key: "Value",
                    value: "changed by hand",
                },
                Step::Vanish { logical_id: "A" },
            ],
            step: Step::Reconcile { template: None },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group of handler members: create",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(GROUP),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group of handler members: create in batches (HOT's batch_create)",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(&GROUP.replace(
                "  Group:\n    Type: Cairn::Group::InstanceGroup\n",
                "  Group:\n    Type: Cairn::Group::InstanceGroup\n    UpdatePolicy:\n      BatchCreate: {MaxBatchSize: 2}\n",
            )),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group of handler members: rolling update",
            expect: Some(UpdateComplete),
            setup: vec![create(GROUP)],
            step: update(GROUP_ROLLED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group whose members keep their names: updated in place, with a surge member",
            expect: Some(UpdateComplete),
            setup: vec![create(&group_kept("a", "v1", ""))],
            step: update(&group_kept("a", "v2", "")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group whose members keep their names: replaced under their names",
            expect: Some(UpdateComplete),
            setup: vec![create(&group_kept("a", "v1", ""))],
            step: update(&group_kept("b", "v1", "")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group whose members keep their names: a failed update in place rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(&group_kept("a", "v1", ""))],
            step: update(&group_kept("a", "v2", "update")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group whose members keep their names: an update leaves a new resource and fails",
            expect: Some(UpdateRollbackComplete),
            // Members of the idempotent type: asked again after a crash it
            // names what it left (the handler's kept answer is its reason).
            setup: vec![create(&group_kept("a", "v1", "").replace("Sim::Handler", "Sim::Thing"))],
            step: update(
                &group_kept("a", "v2", "")
                    .replace("Sim::Handler", "Sim::Thing")
                    .replace("Value: \"v2\"", "Value: \"v2\", Leave: update"),
            ),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group whose members keep their names: a failed replacement rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(&group_kept("a", "v1", ""))],
            step: update(&group_kept("b", "v1", "create")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "group of handler members: delete",
            expect: None,
            setup: vec![create(GROUP)],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update cancelled while its calls are in flight",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE)],
            step: cancelled_update(SLOW_UPDATE),
            // A crash before the cancel was recorded: the update finishes
            // (asked again, the slow calls answer).
            also: &[UpdateComplete],
            points: Points::Every,
        },
        Scenario {
            name: "nested stack: create",
            expect: Some(CreateComplete),
            setup: vec![child_files()],
            step: create(NESTED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "nested stack: update",
            expect: Some(UpdateComplete),
            setup: vec![child_files(), create(NESTED), changed_child_files()],
            step: update(NESTED_CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "nested stack: delete",
            expect: None,
            setup: vec![child_files(), create(NESTED)],
            step: Step::Delete,
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update whose replacement the stack policy denies (rolls back)",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE), Step::StackPolicy(DENY_REPLACING_B)],
            step: update(CHANGED),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "30 resources: create (sampled points)",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(&layered(5, 6, 1)),
            also: &[],
            points: SAMPLE,
        },
        Scenario {
            name: "30 resources: update (sampled points)",
            expect: Some(UpdateComplete),
            setup: vec![create(&layered(5, 6, 1))],
            step: update(&layered(5, 6, 2)),
            also: &[],
            points: SAMPLE,
        },
        Scenario {
            name: "30 resources: delete (sampled points)",
            expect: None,
            setup: vec![create(&layered(5, 6, 1))],
            step: Step::Delete,
            also: &[],
            points: SAMPLE,
        },
        Scenario {
            name: "cairn update whose in-place update fails leaving a new resource",
            expect: Some(UpdateFailed),
            setup: vec![create(BASE)],
            step: reconcile(LEAVING),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "cairn update after one that failed leaving a new resource",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE), reconcile(LEAVING)],
            step: reconcile(&LEAVING.replace(", Leave: update", "")),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "import of a resource made outside into an existing stack",
            expect: Some(ImportComplete),
            setup: vec![
                create(BASE),
                Step::Outside {
                    physical: "outside-1",
                    logical_id: "X",
                    name: "x-one",
                },
            ],
            step: Step::Import {
                template: IMPORTED.into(),
                resources: &[("X", "outside-1")],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "import into a new stack",
            expect: Some(ImportComplete),
            setup: vec![Step::Outside {
                physical: "outside-1",
                logical_id: "X",
                name: "x-one",
            }],
            step: Step::Import {
                template: IMPORTED_ALONE.into(),
                resources: &[("X", "outside-1")],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "import of a resource that does not exist (refused, nothing recorded)",
            expect: Some(CreateComplete),
            setup: vec![create(BASE)],
            step: Step::Import {
                template: IMPORTED.into(),
                resources: &[("X", "outside-1")],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "refactor renaming two resources (a swap) and one more",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE)],
            step: Step::Refactor {
                template: RENAMED.into(),
                renames: &[("A", "B"), ("B", "A"), ("H", "Handler")],
            },
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "create whose macro adds a resource",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(MACRO),
            also: &[],
            points: Points::Every,
        },
        Scenario {
            name: "update of a stack whose macro adds a resource",
            expect: Some(UpdateComplete),
            setup: vec![create(MACRO)],
            step: update(&MACRO.replace("a-one, Value: \"1\"", "a-one, Value: \"2\"")),
            also: &[],
            points: Points::Every,
        },
    ]
}

/// BASE with A updated in place by a call that makes a new resource and
/// fails naming it.
const LEAVING: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "2", Leave: update}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
"#;

/// BASE with a Thing made outside the stack, to be imported.
const IMPORTED: &str = r#"
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  B:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt A.Arn}
  H:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref A}
  X:
    Type: Sim::Thing
    DeletionPolicy: Delete
    Properties: {Name: x-one}
"#;

/// A stack of the imported Thing alone.
const IMPORTED_ALONE: &str = r#"
Resources:
  X:
    Type: Sim::Thing
    DeletionPolicy: Delete
    Properties: {Name: x-one}
"#;

/// BASE with A and B swapping names and H renamed (what refers to them
/// follows).
const RENAMED: &str = r#"
Resources:
  B:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  A:
    Type: Sim::Thing
    Properties: {Name: b-one, Value: !GetAtt B.Arn}
  Handler:
    Type: Sim::Handler
    Properties: {Name: h-one, Value: !Ref B}
"#;

/// A template whose macro (the cloud's `SimAddThing`) adds the Thing
/// `Added`, which `After` refers to.
const MACRO: &str = r#"
Transform: SimAddThing
Resources:
  A:
    Type: Sim::Thing
    Properties: {Name: a-one, Value: "1"}
  After:
    Type: Sim::Handler
    Properties: {Name: after-one, Value: !GetAtt Added.Arn}
"#;

/// How many scenarios are explored at once, each on a thread of its own
/// (every scenario has its own world). One after another they took 48 s,
/// nearly all of the unit tests' time on CI's two cores, at half a core:
/// signal and cancellation scenarios mostly wait. Four take 17 s (two,
/// 24 s); the longest scenario alone takes 9 s.
const EXPLORERS: usize = 4;

/// What the explorers found, added up.
#[derive(Default)]
struct Explored {
    scenarios: usize,
    crash_points: u64,
    takeovers: u64,
    problems: Vec<String>,
}

/// Every scenario at every write point. Prints how many crash points it
/// explored; fails with every problem found.
#[test]
fn every_operation_survives_a_crash_at_every_write() {
    let next = Arc::new(AtomicUsize::new(0));
    let found = Arc::new(Mutex::new(Explored::default()));
    let explorers: Vec<_> = (0..EXPLORERS)
        .map(|_| {
            let (next, found) = (next.clone(), found.clone());
            std::thread::spawn(move || super::deep(move || explore_scenarios(next, found)))
        })
        .collect();
    for explorer in explorers {
        if let Err(panic) = explorer.join() {
            std::panic::resume_unwind(panic);
        }
    }
    let found = std::mem::take(&mut *found.lock().unwrap_or_else(|e| e.into_inner()));
    println!(
        "crash simulator: {} scenarios, {} crash points and {} takeovers explored, {} problems",
        found.scenarios,
        found.crash_points,
        found.takeovers,
        found.problems.len()
    );
    // A filter that matches nothing explores nothing: that is no pass.
    assert!(
        found.scenarios > 0,
        "no scenario explored (CAIRN_SIM_ONLY matches none)"
    );
    assert!(
        found.problems.is_empty(),
        "{} problems:\n{}",
        found.problems.len(),
        found.problems.join("\n")
    );
}

/// Explores the scenarios not yet taken (`next` is the first), one at a
/// time, adding what it finds to `found`.
async fn explore_scenarios(next: Arc<AtomicUsize>, found: Arc<Mutex<Explored>>) {
    // CAIRN_SIM_ONLY=text explores the scenarios whose name has it.
    let only = std::env::var("CAIRN_SIM_ONLY").unwrap_or_default();
    let all: Vec<_> = scenarios()
        .into_iter()
        .filter(|s| s.name.contains(&only))
        .collect();
    while let Some(s) = all.get(next.fetch_add(1, Ordering::Relaxed)) {
        let started = std::time::Instant::now();
        let report = s.explore().await;
        println!(
            "crash simulator: {:<75} {:>3} writes, {:>3} crash points, {:>3} takeovers, {} problems, {:.1} s",
            s.name,
            report.writes,
            report.crash_points,
            report.takeover_points,
            report.problems.len(),
            started.elapsed().as_secs_f64()
        );
        let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
        found.scenarios += 1;
        found.crash_points += report.crash_points;
        found.takeovers += report.takeover_points;
        found.problems.extend(report.problems);
    }
}
