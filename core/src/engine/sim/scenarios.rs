//! The operations the simulator explores, on small stacks, each at every
//! write point.

use super::{create, create_keeping_failures, update, Scenario, Step};
use crate::stack::StackStatus::*;

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

fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "create",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(BASE),
        },
        Scenario {
            name: "create that fails and rolls back",
            expect: Some(RollbackComplete),
            setup: vec![],
            step: create(CREATE_FAILING),
        },
        Scenario {
            name: "create whose resource never answers",
            expect: Some(RollbackFailed),
            setup: vec![],
            step: create(CREATE_HANGING),
        },
        Scenario {
            name: "delete",
            expect: None,
            setup: vec![create(BASE)],
            step: Step::Delete,
        },
        Scenario {
            name: "delete of a create whose outcome is unknown while the provider is down",
            expect: Some(DeleteFailed),
            setup: vec![
                create_keeping_failures(CREATE_HANGING),
                Step::CloudDown(true),
            ],
            step: Step::Delete,
        },
        Scenario {
            name: "update in place, replace, add, remove",
            expect: Some(UpdateComplete),
            setup: vec![create(BASE)],
            step: update(CHANGED),
        },
        Scenario {
            name: "update of a handler's resource in place",
            setup: vec![create(BASE)],
            step: update(HANDLER_UPDATED),
            expect: Some(UpdateComplete),
        },
        Scenario {
            name: "update that fails and rolls back",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE)],
            step: update(CHANGED_FAILING),
        },
        Scenario {
            name: "update adding a resource whose create never answers",
            expect: Some(UpdateRollbackFailed),
            setup: vec![create(BASE)],
            step: update(ADDED_HANGING),
        },
        Scenario {
            name: "update replacing with a create that never answers",
            expect: Some(UpdateRollbackFailed),
            setup: vec![create(BASE)],
            step: update(REPLACED_HANGING),
        },
        Scenario {
            name: "continue-rollback once the hanging create answers",
            expect: Some(UpdateRollbackComplete),
            setup: vec![create(BASE), update(ADDED_HANGING), Step::Heal],
            step: Step::ContinueRollback,
        },
        Scenario {
            name: "delete after an update rollback that could not learn a create",
            expect: None,
            setup: vec![create(BASE), update(REPLACED_HANGING), Step::Heal],
            step: Step::Delete,
        },
        Scenario {
            name: "group of handler members: create",
            expect: Some(CreateComplete),
            setup: vec![],
            step: create(GROUP),
        },
        Scenario {
            name: "group of handler members: rolling update",
            expect: Some(UpdateComplete),
            setup: vec![create(GROUP)],
            step: update(GROUP_ROLLED),
        },
        Scenario {
            name: "group of handler members: delete",
            expect: None,
            setup: vec![create(GROUP)],
            step: Step::Delete,
        },
    ]
}

/// Every scenario at every write point. Prints how many crash points it
/// explored; fails with every problem found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_survives_a_crash_at_every_write() {
    let mut total = 0;
    let mut problems = Vec::new();
    for s in scenarios() {
        let started = std::time::Instant::now();
        let report = s.explore().await;
        println!(
            "crash simulator: {:<75} {:>3} crash points, {} problems, {:.1} s",
            s.name,
            report.crash_points,
            report.problems.len(),
            started.elapsed().as_secs_f64()
        );
        total += report.crash_points;
        problems.extend(report.problems);
    }
    println!(
        "crash simulator: {total} crash points explored, {} problems",
        problems.len()
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}
