//! Nested stacks through the real binary: templates in files beside their
//! parent, three levels, outputs flowing between siblings, failures and
//! rollbacks across levels, continue-rollback of a nested resource,
//! refusals, limits and a SIGKILL mid-create.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Scratch;
use crate::update::{cairn, ev, events, scratch, sequence_after, status, Ev};

/// Writes the files of a template tree and returns the root's path.
fn tree(s: &Scratch, files: &[(&str, &str)]) -> String {
    for (name, body) in files {
        let path = s.dir.path().join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("dir");
        }
        std::fs::write(&path, body).expect("write template");
    }
    s.dir.path().join(files[0].0).display().to_string()
}

fn deploy(s: &Scratch, stack: &str, root: &str, extra: &[&str]) -> crate::support::Run {
    let mut args = vec!["deploy", stack, root];
    args.extend_from_slice(extra);
    cairn(s, &args)
}

/// Every stack of the state: (name, status, ParentId, RootId).
fn stacks(s: &Scratch) -> Vec<(String, String, String, String)> {
    let list = cairn(s, &["list", "--output", "json"]).json();
    let mut out: Vec<(String, String, String, String)> = list["StackSummaries"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|x| {
            let t = |k: &str| x[k].as_str().unwrap_or_default().to_string();
            (t("StackName"), t("StackStatus"), t("ParentId"), t("RootId"))
        })
        .collect();
    out.sort();
    out
}

/// The stack (by name) whose name starts with `prefix`, with its id.
fn child(s: &Scratch, prefix: &str) -> (String, String) {
    let list = cairn(s, &["list", "--output", "json"]).json();
    list["StackSummaries"]
        .as_array()
        .and_then(|l| {
            l.iter().find(|x| {
                x["StackName"].as_str().is_some_and(|n| {
                    n.starts_with(prefix)
                        && n[prefix.len()..].len() == 13
                        && n[prefix.len()..]
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
                })
            })
        })
        .map(|x| {
            (
                x["StackName"].as_str().unwrap_or_default().to_string(),
                x["StackId"].as_str().unwrap_or_default().to_string(),
            )
        })
        .unwrap_or_else(|| panic!("no stack named {prefix}<13 characters>: {list}"))
}

fn stack_id(s: &Scratch, name: &str) -> String {
    cairn(s, &["describe", name, "--output", "json"]).json()["Stacks"][0]["StackId"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The events of `stack` (by id, so deleted stacks too) after `skip`,
/// without physical ids.
fn seq(s: &Scratch, stack: &str, skip: usize) -> Vec<Ev> {
    sequence_after(s, stack, skip)
        .into_iter()
        .map(|(l, st, r, _)| (l, st, r, String::new()))
        .collect()
}

fn e(l: &str, s: &str, r: &str) -> Ev {
    ev(l, s, r, "")
}

const ROOT: &str = "Parameters:
  Env: {Type: String, Default: dev}
Resources:
  Network:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: network.yaml
      Parameters: {Env: !Ref Env}
  App:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: app/app.yaml
      Parameters:
        VpcId: !GetAtt Network.Outputs.VpcId
Outputs:
  Vpc: {Value: !GetAtt Network.Outputs.VpcId}
  Endpoint: {Value: !GetAtt App.Outputs.Endpoint}
";

const NETWORK: &str = "Parameters:
  Env: {Type: String}
Resources:
  Vpc:
    Type: Cairn::Test::Resource
    Properties: {Value: !Sub 'vpc-${Env}'}
Outputs:
  VpcId: {Value: !GetAtt Vpc.Value}
";

const APP: &str = "Parameters:
  VpcId: {Type: String}
Resources:
  Db:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: DBFILE
      Parameters: {Vpc: !Ref VpcId}
  Server:
    Type: Cairn::Test::Resource
    Properties: {Value: !GetAtt Db.Outputs.Endpoint}
Outputs:
  Endpoint: {Value: !GetAtt Server.Value}
";

const DB: &str = "Parameters:
  Vpc: {Type: String}
Resources:
  Instance:
    Type: Cairn::Test::Resource
    Properties: {Value: !Sub 'db-in-${Vpc}'FAIL}
Outputs:
  Endpoint: {Value: !GetAtt Instance.Value}
";

fn three_levels(s: &Scratch, fail: bool) -> String {
    let db = if fail {
        DB.replace("FAIL", ", Fail: create, FailMessage: disk full")
    } else {
        DB.replace("FAIL", "")
    };
    tree(
        s,
        &[
            ("root.yaml", ROOT),
            ("network.yaml", NETWORK),
            ("app/app.yaml", &APP.replace("DBFILE", "db.yaml")),
            ("app/db.yaml", &db),
        ],
    )
}

#[test]
fn a_three_level_tree_is_created_listed_and_deleted() {
    let s = scratch();
    let root = three_levels(&s, false);
    let run = deploy(&s, "web", &root, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    // The deploy shows the nested stacks' events under their paths.
    assert!(run.stdout().contains("App/Db/Instance"), "{}", run.stdout());

    let (network, network_id) = child(&s, "web-Network-");
    let (app, app_id) = child(&s, "web-App-");
    let (db, db_id) = child(&s, &format!("{app}-Db-"));
    let web_id = stack_id(&s, "web");
    assert_eq!(stacks(&s), {
        let mut v = vec![
            (
                "web".to_string(),
                "CREATE_COMPLETE".to_string(),
                String::new(),
                String::new(),
            ),
            (
                network.clone(),
                "CREATE_COMPLETE".into(),
                web_id.clone(),
                web_id.clone(),
            ),
            (
                app.clone(),
                "CREATE_COMPLETE".into(),
                web_id.clone(),
                web_id.clone(),
            ),
            (
                db.clone(),
                "CREATE_COMPLETE".into(),
                app_id.clone(),
                web_id.clone(),
            ),
        ];
        v.sort();
        v
    });
    // The parent records each child resource as CloudFormation does; Ref
    // is the child's id.
    let root_events = sequence_after(&s, "web", 0);
    assert_eq!(
        root_events,
        vec![
            ev("web", "CREATE_IN_PROGRESS", "User Initiated", ""),
            ev("Network", "CREATE_IN_PROGRESS", "", ""),
            ev(
                "Network",
                "CREATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("Network", "CREATE_COMPLETE", "", ""),
            ev("App", "CREATE_IN_PROGRESS", "", ""),
            ev(
                "App",
                "CREATE_IN_PROGRESS",
                "Resource creation Initiated",
                ""
            ),
            ev("App", "CREATE_COMPLETE", "", ""),
            ev("web", "CREATE_COMPLETE", "", ""),
        ]
    );
    let listed = cairn(&s, &["resources", "web", "--output", "json"]).json();
    let refs: Vec<(&str, &str)> = listed["StackResources"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    (
                        r["LogicalResourceId"].as_str().unwrap_or_default(),
                        r["PhysicalResourceId"].as_str().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        refs,
        vec![("App", app_id.as_str()), ("Network", network_id.as_str())]
    );
    // Outputs flow from Network to its sibling App, down to Db and back up.
    let outputs = cairn(&s, &["outputs", "web"]);
    assert_eq!(
        outputs.stdout(),
        "Vpc = vpc-dev\nEndpoint = db-in-vpc-dev\n"
    );
    let described = cairn(&s, &["describe", &db, "--output", "json"]).json();
    assert_eq!(
        described["Stacks"][0]["ParentId"],
        Value::String(app_id.clone())
    );
    assert_eq!(
        described["Stacks"][0]["RootId"],
        Value::String(web_id.clone())
    );
    assert!(
        cairn(&s, &["describe", "web", "--output", "json"]).json()["Stacks"][0]
            .get("ParentId")
            .is_none()
    );
    // `cairn resources` shows the tree; `events --nested` merges the levels.
    let res = cairn(&s, &["resources", "web"]).stdout();
    let names: Vec<&str> = res
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        vec![
            "App",
            "App/Db",
            "App/Db/Instance",
            "App/Server",
            "Network",
            "Network/Vpc"
        ]
    );
    let nested = cairn(&s, &["events", "web", "--nested", "--output", "json"]).json();
    let from: Vec<&str> = nested["StackEvents"]
        .as_array()
        .map(|l| l.iter().filter_map(|e| e["StackId"].as_str()).collect())
        .unwrap_or_default();
    for id in [&web_id, &network_id, &app_id, &db_id] {
        assert!(from.contains(&id.as_str()), "{id} missing from {from:?}");
    }
    assert_eq!(s.resource_files().len(), 3);

    // A nested stack is changed only through its root.
    let refused = cairn(&s, &["delete", &db]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(&format!(
            "Stack [{db}] is a nested stack of [{app}] in the stack tree of [web]: Cairn does not delete a nested stack on its own; delete the root stack [web] instead"
        )),
        "{}",
        refused.stderr()
    );
    let refused = cairn(
        &s,
        &[
            "deploy",
            &network,
            &format!("{}/network.yaml", s.dir.path().display()),
            "-p",
            "Env=x",
        ],
    );
    assert!(
        refused.stderr().contains(
            "Cairn does not update a nested stack on its own; update the root stack [web] instead"
        ),
        "{}",
        refused.stderr()
    );

    // Delete removes the children in reverse dependency order.
    let run = cairn(&s, &["delete", "web"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let tail: Vec<Ev> = seq(&s, &web_id, root_events.len());
    assert_eq!(
        tail,
        vec![
            e("web", "DELETE_IN_PROGRESS", "User Initiated"),
            e("App", "DELETE_IN_PROGRESS", ""),
            e("App", "DELETE_COMPLETE", ""),
            e("Network", "DELETE_IN_PROGRESS", ""),
            e("Network", "DELETE_COMPLETE", ""),
            e("web", "DELETE_COMPLETE", ""),
        ]
    );
    assert!(
        stacks(&s).iter().all(|x| x.1 == "DELETE_COMPLETE"),
        "{:?}",
        stacks(&s)
    );
    assert!(s.resource_files().is_empty());
}

#[test]
fn a_grandchild_failure_rolls_back_the_tree() {
    let s = scratch();
    let root = three_levels(&s, true);
    let run = deploy(&s, "bad", &root, &[]);
    assert_eq!(run.code(), 1);
    let (app, app_id) = child(&s, "bad-App-");
    let (db, db_id) = child(&s, &format!("{app}-Db-"));
    let bad_id = stack_id(&s, "bad");
    assert_eq!(
        seq(&s, &db_id, 0),
        vec![
            e(&db, "CREATE_IN_PROGRESS", "User Initiated"),
            e("Instance", "CREATE_IN_PROGRESS", ""),
            e("Instance", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            e("Instance", "CREATE_FAILED", "disk full"),
            e(&db, "ROLLBACK_IN_PROGRESS", "The following resource(s) failed to create: [Instance]. Rollback requested by user."),
            e("Instance", "DELETE_IN_PROGRESS", ""),
            e("Instance", "DELETE_COMPLETE", ""),
            e(&db, "ROLLBACK_COMPLETE", ""),
            e(&db, "DELETE_IN_PROGRESS", "User Initiated"),
            e(&db, "DELETE_COMPLETE", ""),
        ]
    );
    let app_events = seq(&s, &app_id, 0);
    assert_eq!(
        app_events[..6].to_vec(),
        vec![
            e(&app, "CREATE_IN_PROGRESS", "User Initiated"),
            e("Db", "CREATE_IN_PROGRESS", ""),
            e("Db", "CREATE_IN_PROGRESS", "Resource creation Initiated"),
            e(
                "Db",
                "CREATE_FAILED",
                &format!("Embedded stack {db_id} was not successfully created: The following resource(s) failed to create: [Instance]. ")
            ),
            e(&app, "ROLLBACK_IN_PROGRESS", "The following resource(s) failed to create: [Db]. Rollback requested by user."),
            e("Db", "DELETE_IN_PROGRESS", ""),
        ]
    );
    let root_events = seq(&s, &bad_id, 0);
    assert!(root_events.contains(&e(
        "App",
        "CREATE_FAILED",
        &format!("Embedded stack {app_id} was not successfully created: The following resource(s) failed to create: [Db]. ")
    )), "{root_events:?}");
    assert_eq!(root_events.last(), Some(&e("bad", "ROLLBACK_COMPLETE", "")));
    assert_eq!(status(&s, "bad"), "ROLLBACK_COMPLETE");
    assert!(s.resource_files().is_empty(), "{:?}", s.resource_files());
}

const PAIR: &str = "Parameters:
  A: {Type: String, Default: a1}
  B: {Type: String, Default: b1}
  Breaker: {Type: String, Default: 'no'}
Conditions:
  Break: !Equals [!Ref Breaker, 'yes']
Resources:
  First:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: leaf.yaml
      Parameters: {V: !Ref A}
  Second:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: leaf.yaml
      Parameters: {V: !Ref B}
  Bomb:
    Type: Cairn::Test::Resource
    DependsOn: First
    Properties:
      Value: !Ref Breaker
      Fail: !If [Break, update, !Ref 'AWS::NoValue']
      FailMessage: bomb went off
";

const LEAF: &str = "Parameters:
  V: {Type: String}
Resources:
  Thing:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref V}
  Named:
    Type: Cairn::Test::Resource
    Properties: {Value: !Ref V, Name: !Sub 'n-${V}'}
Outputs:
  V: {Value: !GetAtt Thing.Value}
";

#[test]
fn an_update_changes_only_the_child_whose_inputs_changed_and_rolls_back_across_levels() {
    let s = scratch();
    let root = tree(&s, &[("pair.yaml", PAIR), ("leaf.yaml", LEAF)]);
    assert_eq!(deploy(&s, "two", &root, &[]).code(), 0);
    let (first, first_id) = child(&s, "two-First-");
    let (_, second_id) = child(&s, "two-Second-");
    let two_id = stack_id(&s, "two");
    let (first_n, second_n, two_n) = (
        seq(&s, &first_id, 0).len(),
        seq(&s, &second_id, 0).len(),
        seq(&s, &two_id, 0).len(),
    );

    // Only First's parameter changes: Second gets no event at all.
    let run = deploy(&s, "two", &root, &["-p", "A=a2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(seq(&s, &second_id, 0).len(), second_n);
    assert_eq!(
        seq(&s, &two_id, two_n),
        vec![
            e("two", "UPDATE_IN_PROGRESS", "User Initiated"),
            e("First", "UPDATE_IN_PROGRESS", ""),
            e("First", "UPDATE_COMPLETE", ""),
            e("two", "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e("two", "UPDATE_COMPLETE", ""),
        ]
    );
    // The child's cleanup (deleting the replaced Named) waits for its
    // parent's update to succeed.
    let first_update = seq(&s, &first_id, first_n);
    let replacing =
        "Requested update requires the creation of a new physical resource; hence creating one.";
    assert_eq!(
        first_update[0],
        e(&first, "UPDATE_IN_PROGRESS", "User Initiated")
    );
    assert!(first_update.contains(&e("Named", "UPDATE_IN_PROGRESS", replacing)));
    assert_eq!(
        first_update[first_update.len() - 4..].to_vec(),
        vec![
            e(&first, "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e("Named", "DELETE_IN_PROGRESS", ""),
            e("Named", "DELETE_COMPLETE", ""),
            e(&first, "UPDATE_COMPLETE", ""),
        ]
    );
    assert_eq!(cairn(&s, &["outputs", &first]).stdout(), "V = a2\n");

    // First updates (and waits), Bomb fails: First rolls back with its own
    // UPDATE_ROLLBACK_* sequence, deleting the Named it made.
    let (first_n, two_n) = (seq(&s, &first_id, 0).len(), seq(&s, &two_id, 0).len());
    let run = deploy(&s, "two", &root, &["-p", "A=a3", "-p", "Breaker=yes"]);
    assert_eq!(run.code(), 1);
    assert_eq!(
        seq(&s, &two_id, two_n),
        vec![
            e("two", "UPDATE_IN_PROGRESS", "User Initiated"),
            e("First", "UPDATE_IN_PROGRESS", ""),
            e("First", "UPDATE_COMPLETE", ""),
            e("Bomb", "UPDATE_IN_PROGRESS", ""),
            e("Bomb", "UPDATE_FAILED", "bomb went off"),
            e(
                "two",
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The following resource(s) failed to update: [Bomb]."
            ),
            e("Bomb", "UPDATE_IN_PROGRESS", ""),
            e("Bomb", "UPDATE_COMPLETE", ""),
            e("First", "UPDATE_IN_PROGRESS", ""),
            e("First", "UPDATE_COMPLETE", ""),
            e("two", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e("two", "UPDATE_ROLLBACK_COMPLETE", ""),
        ]
    );
    let first_events = seq(&s, &first_id, first_n);
    let from_cleanup: Vec<Ev> = first_events
        .iter()
        .skip_while(|x| x.1 != "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS")
        .filter(|x| x.0 == first)
        .cloned()
        .collect();
    assert_eq!(
        from_cleanup,
        vec![
            e(&first, "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e(
                &first,
                "UPDATE_ROLLBACK_IN_PROGRESS",
                "The update of a parent stack failed; rolling back this nested stack with it."
            ),
            e(&first, "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e(&first, "UPDATE_ROLLBACK_COMPLETE", ""),
        ]
    );
    assert_eq!(cairn(&s, &["outputs", &first]).stdout(), "V = a2\n");
    assert_eq!(seq(&s, &second_id, 0).len(), second_n);
    // Two leaves of two resources and Bomb: nothing leaked.
    assert_eq!(s.resource_files().len(), 5);

    // A changed nested template behind the same TemplateURL updates the child.
    std::fs::write(
        s.dir.path().join("leaf.yaml"),
        LEAF.replace("Value: !Ref V}", "Value: !Ref V, Description: d}"),
    )
    .expect("write");
    let run = deploy(&s, "two", &root, &["-p", "A=a2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert!(seq(&s, &second_id, 0).len() > second_n);
}

#[test]
fn continue_rollback_skips_a_nested_resource() {
    let s = scratch();
    let c1 = "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: micro, Fail: update, FailMessage: cannot be stopped}}\n";
    let c2 =
        "Resources:\n  I2: {Type: Cairn::Test::Resource, Properties: {Name: i2, Value: small}}\n";
    let v1 =
        "Resources:\n  C: {Type: AWS::CloudFormation::Stack, Properties: {TemplateURL: c1.yaml}}\n";
    let v2 = "Resources:\n  C: {Type: AWS::CloudFormation::Stack, Properties: {TemplateURL: c2.yaml}}\n  Bomb: {Type: Cairn::Test::Resource, DependsOn: C, Properties: {Name: b, Fail: create}}\n";
    let r1 = tree(&s, &[("v1.yaml", v1), ("c1.yaml", c1), ("c2.yaml", c2)]);
    let r2 = tree(&s, &[("v2.yaml", v2)]);
    assert_eq!(deploy(&s, "rf", &r1, &[]).code(), 0);
    let (c, c_id) = child(&s, "rf-C-");
    let run = deploy(&s, "rf", &r2, &[]);
    assert_eq!(run.code(), 1);
    assert_eq!(status(&s, "rf"), "UPDATE_ROLLBACK_FAILED");
    let rf_events = seq(&s, "rf", 0);
    assert!(rf_events.contains(&e(
        "C",
        "UPDATE_FAILED",
        &format!("Embedded stack {c_id} was not successfully updated. Currently in UPDATE_ROLLBACK_FAILED with reason: The following resource(s) failed to update: [I2].")
    )), "{rf_events:?}");
    assert_eq!(
        rf_events.last(),
        Some(&e(
            "rf",
            "UPDATE_ROLLBACK_FAILED",
            "The following resource(s) failed to update: [C]."
        ))
    );

    let bad = cairn(&s, &["continue-rollback", "rf", "--skip", "Bomb.I2"]);
    assert!(bad.stderr().contains("Resource Bomb.I2 cannot be skipped: Bomb is not a nested stack the rollback still has to restore"), "{}", bad.stderr());
    let refused = cairn(&s, &["continue-rollback", &c]);
    assert!(
        refused
            .stderr()
            .contains("continue the update rollback of the root stack [rf] instead"),
        "{}",
        refused.stderr()
    );

    let run = cairn(&s, &["continue-rollback", "rf", "--skip", "C.I2"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "rf"), "UPDATE_ROLLBACK_COMPLETE");
    let c_tail: Vec<Ev> = seq(&s, &c_id, 0)
        .into_iter()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    assert_eq!(
        c_tail,
        vec![
            e("I2", "UPDATE_COMPLETE", "Skipped by continue-rollback"),
            e(&c, "UPDATE_ROLLBACK_IN_PROGRESS", "User Initiated"),
            e(&c, "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS", ""),
            e(&c, "UPDATE_ROLLBACK_COMPLETE", ""),
        ]
    );
}

#[test]
fn nested_templates_are_checked_before_anything_is_made() {
    let s = scratch();
    // An output the child does not declare.
    let root = tree(
        &s,
        &[
            ("r.yaml", "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: n.yaml}\nOutputs:\n  X: {Value: !GetAtt N.Outputs.Nope}\n"),
            ("n.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\nOutputs:\n  Yes: {Value: a}\n"),
        ],
    );
    let run = deploy(&s, "chk", &root, &[]);
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr().contains("Template error: resource N does not support attribute type Outputs.Nope in Fn::GetAtt (its nested template has outputs: Yes)"),
        "{}",
        run.stderr()
    );
    // A missing file, and an error inside a nested template, name it.
    let root = tree(&s, &[("m.yaml", "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: missing.yaml}\n")]);
    let run = deploy(&s, "chk", &root, &[]);
    assert!(
        run.stderr()
            .contains("Template error: TemplateURL missing.yaml of N cannot be read: "),
        "{}",
        run.stderr()
    );
    let root = tree(
        &s,
        &[
            ("b.yaml", "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: broken.yaml}\n"),
            ("broken.yaml", "Resources:\n  A: {Type: No::Such::Type}\n"),
        ],
    );
    let run = deploy(&s, "chk", &root, &[]);
    assert!(
        run.stderr().contains("nested stack N: "),
        "{}",
        run.stderr()
    );
    assert!(run.stderr().contains("broken.yaml: "), "{}", run.stderr());
    assert!(run.stderr().contains("No::Such::Type"), "{}", run.stderr());
    // A template that nests itself hits the depth limit.
    let root = tree(&s, &[("self.yaml", "Resources:\n  Again:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: self.yaml}\n")]);
    let run = deploy(&s, "chk", &root, &[]);
    assert!(
        run.stderr().contains("Template error: nested stack Again/Again/Again/Again/Again/Again is more than 5 levels deep; the limit is [nested] max_depth = 5"),
        "{}",
        run.stderr()
    );
    // The tree's size is bounded too.
    s.write("cairn.toml", "[nested]\nmax_resources = 3\n");
    let root = tree(
        &s,
        &[
            ("big.yaml", "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties: {TemplateURL: three.yaml}\n"),
            ("three.yaml", "Resources:\n  A: {Type: Cairn::Test::Resource}\n  B: {Type: Cairn::Test::Resource}\n  C: {Type: Cairn::Test::Resource}\n"),
        ],
    );
    let run = deploy(&s, "chk", &root, &[]);
    assert!(
        run.stderr().contains("Template error: the stack and its nested stacks have more than 3 resources; the limit is [nested] max_resources = 3"),
        "{}",
        run.stderr()
    );
    assert!(stacks(&s).is_empty(), "{:?}", stacks(&s));
}

#[test]
fn sigkill_during_a_nested_create_is_resumed_at_every_level() {
    let s = scratch();
    let slow = LEAF.replace(
        "Properties: {Value: !Ref V}",
        "Properties: {Value: !Ref V, WaitSeconds: 1.5}",
    );
    let root = tree(
        &s,
        &[
            ("pair.yaml", &PAIR.replace("leaf.yaml", "slow.yaml")),
            ("slow.yaml", &slow),
        ],
    );
    let mut child_process = s.spawn_cairn(&["--config", "cairn.toml", "deploy", "crash", &root]);
    let started = Instant::now();
    loop {
        let list = stacks(&s);
        if list.iter().filter(|x| !x.2.is_empty()).count() == 2 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "children never started: {list:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    child_process.kill().expect("SIGKILL");
    let _ = child_process.wait();
    let run = cairn(&s, &["list"]);
    assert!(
        run.stderr().contains("resumed the interrupted operation"),
        "{}",
        run.stderr()
    );
    let all = stacks(&s);
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(all.iter().all(|x| x.1 == "CREATE_COMPLETE"), "{all:?}");
    // Two leaves of two resources and Bomb, each made once.
    assert_eq!(s.resource_files().len(), 5);
    let (_, first_id) = child(&s, "crash-First-");
    let thing_done = seq(&s, &first_id, 0)
        .iter()
        .filter(|x| x.0 == "Thing" && x.1 == "CREATE_COMPLETE")
        .count();
    assert_eq!(thing_done, 1);
    assert_eq!(cairn(&s, &["delete", "crash"]).code(), 0);
    assert!(s.resource_files().is_empty());
    let _ = events;
}

/// A change set made from a changed nested template shows the stack
/// resources as automatic Modify changes, and executes the templates as
/// they were read when it was made.
#[test]
fn a_change_set_shows_a_changed_nested_template_and_runs_it() {
    let s = scratch();
    let root = tree(&s, &[("pair.yaml", PAIR), ("leaf.yaml", LEAF)]);
    assert_eq!(deploy(&s, "cs", &root, &[]).code(), 0);
    let (first, _) = child(&s, "cs-First-");
    let leaf = s.dir.path().join("leaf.yaml");
    // Thing's Value, hence the child's output V, changes.
    let thing = "Properties: {Value: !Ref V}";
    let planned = LEAF.replacen(thing, "Properties: {Value: !Sub '${V}-planned'}", 1);
    std::fs::write(&leaf, planned).expect("write");
    let plan = cairn(
        &s,
        &["plan", "cs", &root, "--name", "cs1", "--output", "json"],
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let changes: Vec<Value> = plan.json()["Changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|c| {
            let mut r = c["ResourceChange"].clone();
            if let Some(o) = r.as_object_mut() {
                o.remove("PhysicalResourceId");
            }
            r
        })
        .collect();
    let automatic = |logical: &str| {
        serde_json::json!({
            "Action": "Modify", "LogicalResourceId": logical, "ResourceType": "AWS::CloudFormation::Stack",
            "Replacement": "False", "Scope": ["Properties"],
            "Details": [{"Target": {"Attribute": "Properties", "RequiresRecreation": "Never"}, "Evaluation": "Dynamic", "ChangeSource": "Automatic"}]
        })
    };
    assert_eq!(changes, vec![automatic("First"), automatic("Second")]);
    // The file changes again after the plan: the set runs what it planned.
    let later = LEAF.replacen(thing, "Properties: {Value: !Sub '${V}-later'}", 1);
    std::fs::write(&leaf, later).expect("write");
    let run = cairn(&s, &["execute", "cs", "cs1"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(cairn(&s, &["outputs", &first]).stdout(), "V = a1-planned\n");
}

/// IncludeNestedStacks: the nested stack the update modifies gets a change
/// set of its own, linked both ways; the root set runs it.
#[test]
fn include_nested_makes_a_change_set_per_modified_child() {
    let s = scratch();
    let root = tree(&s, &[("pair.yaml", PAIR), ("leaf.yaml", LEAF)]);
    assert_eq!(deploy(&s, "inc", &root, &[]).code(), 0);
    let (first, _) = child(&s, "inc-First-");
    let plan = cairn(
        &s,
        &[
            "plan",
            "inc",
            &root,
            "-p",
            "A=a5",
            "--name",
            "up",
            "--include-nested",
            "--output",
            "json",
        ],
    );
    assert_eq!(plan.code(), 0, "{}", plan.stderr());
    let top = plan.json();
    assert_eq!(top["IncludeNestedStacks"], true);
    let changes = top["Changes"].as_array().cloned().unwrap_or_default();
    assert_eq!(changes.len(), 1, "{changes:?}");
    let rc = &changes[0]["ResourceChange"];
    assert_eq!(
        (rc["LogicalResourceId"].as_str(), rc["Action"].as_str()),
        (Some("First"), Some("Modify"))
    );
    let child_set = rc["ChangeSetId"].as_str().unwrap_or_default().to_string();
    assert!(child_set.contains(":changeSet/up-First/"), "{child_set}");

    let nested = cairn(&s, &["change-set", &first, "up-First", "--output", "json"]).json();
    assert_eq!(nested["ChangeSetId"].as_str(), Some(child_set.as_str()));
    assert_eq!(nested["ParentChangeSetId"], top["ChangeSetId"]);
    assert_eq!(nested["RootChangeSetId"], top["ChangeSetId"]);
    assert_eq!(
        nested["Parameters"],
        serde_json::json!([{"ParameterKey": "V", "ParameterValue": "a5"}])
    );
    let inner: Vec<(String, String)> = nested["Changes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let rc = &c["ResourceChange"];
            (
                rc["LogicalResourceId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                rc["Replacement"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        inner,
        vec![
            ("Thing".to_string(), "False".to_string()),
            ("Named".to_string(), "True".to_string())
        ]
    );
    let refused = cairn(&s, &["execute", &first, "up-First"]);
    assert!(
        refused
            .stderr()
            .contains("is a nested change set; execute its root change set"),
        "{}",
        refused.stderr()
    );
    let run = cairn(&s, &["execute", "inc", "up"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(cairn(&s, &["outputs", &first]).stdout(), "V = a5\n");
    let after = cairn(&s, &["change-set", &first, "up-First", "--output", "json"]).json();
    assert_eq!(after["ExecutionStatus"], "OBSOLETE");
}

/// A TemplateURL built from parameters, pseudo parameters and mappings is
/// computed before the operation starts (the child it names is read and
/// checked then, and an update to another file replaces the child's
/// template); one that depends on a resource is refused by `cairn
/// validate` and `cairn deploy` alike, with the same text.
#[test]
fn a_template_url_computed_from_parameters() {
    let s = scratch();
    let root = tree(
        &s,
        &[
            (
                "root.yaml",
                "Parameters:\n  Size:\n    Type: String\n    Default: small\nMappings:\n  Files:\n    small: {Name: small}\n    large: {Name: large}\nResources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: !Sub\n        - 'children/${Name}-${AWS::Region}.yaml'\n        - Name: !FindInMap [Files, !Ref Size, Name]\nOutputs:\n  Said:\n    Value: !GetAtt Child.Outputs.Said\n",
            ),
            (
                "children/small-us-east-1.yaml",
                "Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Properties: {Value: small}\nOutputs:\n  Said:\n    Value: !GetAtt R.Value\n",
            ),
            (
                "children/large-us-east-1.yaml",
                "Resources:\n  R:\n    Type: Cairn::Test::Resource\n    Properties: {Value: large}\nOutputs:\n  Said:\n    Value: !GetAtt R.Value\n",
            ),
        ],
    );
    let valid = cairn(&s, &["validate", &root]);
    assert_eq!(valid.code(), 0, "{}", valid.stderr());
    let run = deploy(&s, "computed", &root, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        cairn(&s, &["outputs", "computed"]).stdout(),
        "Said = small\n"
    );
    let run = deploy(&s, "computed", &root, &["-p", "Size=large"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(
        cairn(&s, &["outputs", "computed"]).stdout(),
        "Said = large\n"
    );

    let bad = tree(
        &s,
        &[(
            "bad.yaml",
            "Resources:\n  Name:\n    Type: Cairn::Test::Resource\n    Properties: {Value: children/small-us-east-1.yaml}\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: !GetAtt Name.Value\n",
        )],
    );
    let text = "Template error: TemplateURL of Child depends on a resource: Cairn reads nested templates before the operation starts; build it from parameters, mappings and pseudo parameters";
    let refused = cairn(&s, &["validate", &bad]);
    assert_eq!(refused.code(), 1);
    assert!(refused.stderr().contains(text), "{}", refused.stderr());
    let refused = deploy(&s, "bad", &bad, &[]);
    assert_eq!(refused.code(), 1);
    assert!(refused.stderr().contains(text), "{}", refused.stderr());
}

/// CloudFormation's "Conditions" reference: resources associated with a
/// false condition are ignored, so a nested stack's TemplateURL is not
/// read until its condition holds.
#[test]
fn a_nested_stack_whose_condition_is_false_is_never_read() {
    let s = scratch();
    let root = tree(
        &s,
        &[(
            "root.yaml",
            "Parameters:\n  Env:\n    Type: String\n    Default: dev\n    AllowedValues: [dev, prod]\nConditions:\n  IsProd: !Equals [!Ref Env, prod]\nResources:\n  Always:\n    Type: Cairn::Test::Resource\n    Properties: {Value: always}\n  Monitoring:\n    Type: AWS::CloudFormation::Stack\n    Condition: IsProd\n    Properties:\n      TemplateURL: children/monitoring.yaml\n",
        )],
    );
    let run = deploy(&s, "cond", &root, &[]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    let listed = cairn(&s, &["resources", "cond", "--output", "json"]).json();
    let ids: Vec<&str> = listed["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["LogicalResourceId"].as_str())
        .collect();
    assert_eq!(ids, ["Always"]);

    // Once the condition holds, the template is read (and missing, refused).
    let refused = deploy(&s, "cond", &root, &["-p", "Env=prod"]);
    assert_eq!(refused.code(), 1);
    assert!(
        refused.stderr().contains(
            "Template error: TemplateURL children/monitoring.yaml of Monitoring cannot be read"
        ),
        "{}",
        refused.stderr()
    );
    tree(
        &s,
        &[(
            "children/monitoring.yaml",
            "Resources:\n  Alarm:\n    Type: Cairn::Test::Resource\n    Properties: {Value: watching}\n",
        )],
    );
    let run = deploy(&s, "cond", &root, &["-p", "Env=prod"]);
    assert_eq!(run.code(), 0, "{}", run.stderr());
    assert_eq!(status(&s, "cond"), "UPDATE_COMPLETE");
    let listed = cairn(&s, &["resources", "cond", "--output", "json"]).json();
    let mut ids: Vec<&str> = listed["StackResources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["LogicalResourceId"].as_str())
        .collect();
    ids.sort();
    assert_eq!(ids, ["Always", "Monitoring"]);
}
