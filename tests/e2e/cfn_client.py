"""Drives `cairn serve` with boto3 and the aws CLI, unchanged, for Cairn's
end-to-end tests: `python3 cfn_client.py SCENARIO ENDPOINT [CA_BUNDLE]`.

Credentials come from the environment (AWS_ACCESS_KEY_ID, …) as for any AWS
tool. Every check is an assert with the value it got; exit status 0 means
the scenario passed.
"""

import datetime
import json
import os
import subprocess
import sys
import time
import unittest.mock
import urllib.request

import boto3
import botocore.auth
import botocore.awsrequest
import botocore.credentials
from botocore.config import Config
from botocore.exceptions import ClientError, WaiterError

ENDPOINT = sys.argv[2]
CA = sys.argv[3] if len(sys.argv) > 3 else None
FAST = {"Delay": 1, "MaxAttempts": 60}



def shard(physical_id):
    """The shard directory Cairn::Test::Resource keeps a record in: the low
    byte of the FNV-1a hash of the physical id, in hex."""
    h = 0x811C9DC5
    for b in physical_id.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "%02x" % (h & 0xFF)

def client(pool=10, **kw):
    return boto3.client(
        "cloudformation",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        verify=CA if CA else True,
        config=Config(retries={"max_attempts": 1}, max_pool_connections=pool),
        **kw,
    )


cf = client()


def error(call, *args, **kwargs):
    """The (code, message, HTTP status) of a call that must fail."""
    try:
        call(*args, **kwargs)
    except ClientError as e:
        return (
            e.response["Error"]["Code"],
            e.response["Error"]["Message"],
            e.response["ResponseMetadata"]["HTTPStatusCode"],
        )
    raise AssertionError(f"{call.__name__} did not fail")


def events(stack):
    pages = cf.get_paginator("describe_stack_events").paginate(StackName=stack)
    out = [e for p in pages for e in p["StackEvents"]]
    out.reverse()
    return out


def statuses(stack, after=0):
    return [(e["LogicalResourceId"], e["ResourceStatus"]) for e in events(stack)[after:]]


def aws(*args):
    env = dict(os.environ)
    cmd = ["aws", "--endpoint-url", ENDPOINT]
    if CA:
        cmd += ["--ca-bundle", CA]
    run = subprocess.run(cmd + list(args), capture_output=True, text=True, env=env)
    return run.returncode, run.stdout, run.stderr


TEMPLATE = """
Parameters:
  V: {Type: String, Default: one}
  Secret: {Type: String, NoEcho: true, Default: hidden}
Resources:
  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref V}}
  B: {Type: Cairn::Test::Resource, Properties: {Value: !GetAtt A.Value}}
Outputs:
  AId: {Value: !Ref A, Export: {Name: !Sub "${AWS::StackName}-a"}}
"""


def lifecycle():
    r = cf.create_stack(StackName="s1", TemplateBody=TEMPLATE,
                        Parameters=[{"ParameterKey": "Secret", "ParameterValue": "pw"}],
                        Tags=[{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "test"}])
    assert r["StackId"].startswith("arn:aws:cloudformation:us-east-1:123456789012:stack/s1/"), r
    cf.get_waiter("stack_create_complete").wait(StackName="s1", WaiterConfig=FAST)
    s = cf.describe_stacks(StackName="s1")["Stacks"][0]
    assert s["StackStatus"] == "CREATE_COMPLETE", s
    assert s["StackId"] == r["StackId"]
    params = {p["ParameterKey"]: p["ParameterValue"] for p in s["Parameters"]}
    assert params == {"V": "one", "Secret": "****"}, params
    assert s["Tags"] == [{"Key": "team", "Value": "a"}, {"Key": "env", "Value": "test"}], s["Tags"]
    a = cf.describe_stack_resource(StackName="s1", LogicalResourceId="A")["StackResourceDetail"]
    assert a["ResourceStatus"] == "CREATE_COMPLETE" and a["ResourceType"] == "Cairn::Test::Resource", a
    assert s["Outputs"] == [{"OutputKey": "AId", "OutputValue": a["PhysicalResourceId"], "ExportName": "s1-a"}], s["Outputs"]
    assert statuses("s1") == [
        ("s1", "CREATE_IN_PROGRESS"), ("A", "CREATE_IN_PROGRESS"), ("A", "CREATE_IN_PROGRESS"),
        ("A", "CREATE_COMPLETE"), ("B", "CREATE_IN_PROGRESS"), ("B", "CREATE_IN_PROGRESS"),
        ("B", "CREATE_COMPLETE"), ("s1", "CREATE_COMPLETE"),
    ], statuses("s1")
    first = events("s1")[0]
    assert first["ResourceStatusReason"] == "User Initiated" and first["PhysicalResourceId"] == r["StackId"], first
    assert first["ResourceType"] == "AWS::CloudFormation::Stack"
    listed = cf.list_stack_resources(StackName="s1")["StackResourceSummaries"]
    assert [x["LogicalResourceId"] for x in listed] == ["A", "B"], listed
    described = cf.describe_stack_resources(StackName="s1")["StackResources"]
    assert [(x["LogicalResourceId"], x["StackName"]) for x in described] == [("A", "s1"), ("B", "s1")]
    by_physical = cf.describe_stack_resources(PhysicalResourceId=a["PhysicalResourceId"])["StackResources"]
    assert by_physical[0]["StackName"] == "s1"
    assert cf.get_template(StackName="s1")["TemplateBody"] == TEMPLATE
    # TemplateStage=Processed: the template as Cairn reads it, as JSON
    # (which botocore hands back parsed).
    processed = cf.get_template(StackName="s1", TemplateStage="Processed")["TemplateBody"]
    processed = json.loads(processed) if isinstance(processed, str) else processed
    assert sorted(processed["Resources"]) == ["A", "B"], processed
    summary = cf.get_template_summary(StackName="s1")
    assert [(p["ParameterKey"], p["ParameterType"], p.get("DefaultValue"), p["NoEcho"]) for p in summary["Parameters"]] == [
        ("V", "String", "one", False), ("Secret", "String", "****", True)], summary["Parameters"]
    assert summary["ResourceTypes"] == ["Cairn::Test::Resource"], summary
    # What an import could adopt, by the schema's primary identifier.
    assert summary["ResourceIdentifierSummaries"] == [{
        "ResourceType": "Cairn::Test::Resource", "LogicalResourceIds": ["A", "B"],
        "ResourceIdentifiers": ["Name"]}], summary
    mixed = cf.get_template_summary(TemplateBody="Resources:\n  R: {Type: Cairn::Random::String}\n  F: {Type: Cairn::Local::File, Properties: {Path: x}}\n")
    assert mixed["ResourceIdentifierSummaries"] == [{
        "ResourceType": "Cairn::Local::File", "LogicalResourceIds": ["F"],
        "ResourceIdentifiers": ["Path"]}], mixed
    v = cf.validate_template(TemplateBody=TEMPLATE)
    assert [p["ParameterKey"] for p in v["Parameters"]] == ["V", "Secret"], v
    code, msg, status = error(cf.validate_template, TemplateBody="Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !GetAtt Nope.Value}}\n")
    assert (code, status) == ("ValidationError", 400), (code, msg)
    assert msg.startswith("Template error: instance of Fn::GetAtt references undefined resource Nope"), msg
    assert error(cf.create_stack, StackName="s1", TemplateBody=TEMPLATE) == ("AlreadyExistsException", "Stack [s1] already exists", 400)
    # Rules: valid to ValidateTemplate; a false assertion refuses the
    # create with its AssertDescription, and nothing is recorded.
    ruled = ("Parameters:\n  Env: {Type: String}\nRules:\n  NoTest:\n    Assertions:\n"
             "      - Assert: !Not [!Equals [!Ref Env, test]]\n        AssertDescription: Env must not be test\n"
             "Resources:\n  A: {Type: Cairn::Test::Resource}\n")
    cf.validate_template(TemplateBody=ruled)
    code, msg, status = error(cf.create_stack, StackName="ruled", TemplateBody=ruled,
                              Parameters=[{"ParameterKey": "Env", "ParameterValue": "test"}])
    assert (code, status) == ("ValidationError", 400), (code, msg)
    assert msg.startswith("Env must not be test"), msg
    assert error(cf.describe_stacks, StackName="ruled")[0] == "ValidationError"
    cf.update_stack(StackName="s1", UsePreviousTemplate=True,
                    Parameters=[{"ParameterKey": "V", "ParameterValue": "two"},
                                {"ParameterKey": "Secret", "UsePreviousValue": True}])
    cf.get_waiter("stack_update_complete").wait(StackName="s1", WaiterConfig=FAST)
    b = cf.describe_stack_resource(StackName="s1", LogicalResourceId="B")["StackResourceDetail"]
    assert b["ResourceStatus"] == "UPDATE_COMPLETE", b
    assert error(cf.update_stack, StackName="s1", UsePreviousTemplate=True,
                 Parameters=[{"ParameterKey": "V", "UsePreviousValue": True}]) == (
        "ValidationError", "No updates are to be performed.", 400)
    # New tags alone are an update; absent Tags keep them, an empty list removes them.
    cf.update_stack(StackName="s1", UsePreviousTemplate=True, Tags=[{"Key": "team", "Value": "b"}],
                    Parameters=[{"ParameterKey": "V", "UsePreviousValue": True}])
    cf.get_waiter("stack_update_complete").wait(StackName="s1", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="s1")["Stacks"][0]["Tags"] == [{"Key": "team", "Value": "b"}]
    cf.update_stack(StackName="s1", UsePreviousTemplate=True, Tags=[],
                    Parameters=[{"ParameterKey": "V", "UsePreviousValue": True}])
    cf.get_waiter("stack_update_complete").wait(StackName="s1", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="s1")["Stacks"][0]["Tags"] == []
    assert error(cf.update_stack, StackName="nope", UsePreviousTemplate=True) == (
        "ValidationError", "Stack with id nope does not exist", 400)
    assert error(cf.describe_stacks, StackName="nope")[:2] == ("ValidationError", "Stack with id nope does not exist")
    # Waiters: StackExists, and the create waiter failing on ROLLBACK_COMPLETE.
    cf.get_waiter("stack_exists").wait(StackName="s1", WaiterConfig=FAST)
    cf.create_stack(StackName="bad", TemplateBody="Resources:\n  X: {Type: Cairn::Test::Resource, Properties: {Fail: create}}\n")
    try:
        cf.get_waiter("stack_create_complete").wait(StackName="bad", WaiterConfig=FAST)
        raise AssertionError("the waiter should have failed")
    except WaiterError as e:
        assert "ROLLBACK_COMPLETE" in str(e), str(e)
    rolling = [e for e in events("bad") if e["ResourceStatus"] == "ROLLBACK_IN_PROGRESS"]
    assert rolling[0]["ResourceStatusReason"] == "The following resource(s) failed to create: [X]. Rollback requested by user.", rolling
    assert error(cf.update_stack, StackName="bad", UsePreviousTemplate=True)[1].endswith("is in ROLLBACK_COMPLETE state and can not be updated.")
    for name in ["s1", "bad"]:
        cf.delete_stack(StackName=name)
        cf.get_waiter("stack_delete_complete").wait(StackName=name, WaiterConfig=FAST)
    assert error(cf.describe_stacks, StackName="s1")[:2] == ("ValidationError", "Stack with id s1 does not exist")
    deleted = cf.describe_stacks(StackName=r["StackId"])["Stacks"][0]
    assert deleted["StackStatus"] == "DELETE_COMPLETE", deleted
    summaries = cf.list_stacks(StackStatusFilter=["DELETE_COMPLETE"])["StackSummaries"]
    assert sorted(x["StackName"] for x in summaries) == ["bad", "s1"], summaries
    cf.delete_stack(StackName="never-existed")
    assert cf.describe_stacks()["Stacks"] == []
    # TemplateURL: a file under [server] template_dirs, nothing else.
    os.makedirs("templates", exist_ok=True)
    with open("templates/t.yaml", "w") as f:
        f.write(TEMPLATE)
    cf.create_stack(StackName="fromfile", TemplateURL="file://" + os.path.abspath("templates/t.yaml"))
    cf.get_waiter("stack_create_complete").wait(StackName="fromfile", WaiterConfig=FAST)
    assert cf.get_template(StackName="fromfile")["TemplateBody"] == TEMPLATE
    code, msg, _ = error(cf.create_stack, StackName="x", TemplateURL="https://example.com/t.yaml")
    assert code == "ValidationError" and "only file:/// URLs are supported" in msg, msg
    with open("outside.yaml", "w") as f:
        f.write(TEMPLATE)
    code, msg, _ = error(cf.create_stack, StackName="x", TemplateURL="file://" + os.path.abspath("outside.yaml"))
    assert "it is not under a directory of [server] template_dirs" in msg, msg
    # /healthz and the Prometheus page.
    with urllib.request.urlopen(ENDPOINT + "/healthz") as r:
        lines = r.read().decode().splitlines()
        assert lines[0] == "ok" and lines[1].startswith("engine ") and lines[2].startswith("store: reachable ("), lines
    with urllib.request.urlopen(ENDPOINT + "/metrics") as r:
        metrics = dict(line.rsplit(" ", 1) for line in r.read().decode().splitlines() if not line.startswith("#"))
    assert metrics['cairn_api_requests_total{action="CreateStack",status="200"}'] == "3", metrics
    assert metrics['cairn_operations_ended_total{kind="CREATE",status="ROLLBACK_COMPLETE"}'] == "1", metrics
    assert metrics['cairn_operations_ended_total{kind="DELETE",status="DELETE_COMPLETE"}'] == "2", metrics
    assert metrics['cairn_provider_calls_total{kind="creation",outcome="ok"}'] == "4", metrics
    assert metrics['cairn_provider_calls_total{kind="creation",outcome="InternalFailure"}'] == "1", metrics


def changesets():
    r = cf.create_change_set(StackName="c1", ChangeSetName="first", ChangeSetType="CREATE", TemplateBody=TEMPLATE)
    assert r["Id"].startswith("arn:aws:cloudformation:us-east-1:123456789012:changeSet/first/"), r
    cf.get_waiter("change_set_create_complete").wait(StackName="c1", ChangeSetName="first", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="c1")["Stacks"][0]["StackStatus"] == "REVIEW_IN_PROGRESS"
    d = cf.describe_change_set(StackName="c1", ChangeSetName="first")
    assert (d["Status"], d["ExecutionStatus"]) == ("CREATE_COMPLETE", "AVAILABLE"), d
    assert [(c["ResourceChange"]["Action"], c["ResourceChange"]["LogicalResourceId"]) for c in d["Changes"]] == [
        ("Add", "A"), ("Add", "B")], d["Changes"]
    by_arn = cf.describe_change_set(ChangeSetName=r["Id"])
    assert by_arn["ChangeSetName"] == "first"
    cf.execute_change_set(StackName="c1", ChangeSetName="first")
    cf.get_waiter("stack_create_complete").wait(StackName="c1", WaiterConfig=FAST)
    cf.create_change_set(StackName="c1", ChangeSetName="second", UsePreviousTemplate=True,
                         Parameters=[{"ParameterKey": "V", "ParameterValue": "two"}])
    d = cf.describe_change_set(StackName="c1", ChangeSetName="second")
    change = d["Changes"][0]["ResourceChange"]
    assert change["Action"] == "Modify" and change["LogicalResourceId"] == "A" and change["Replacement"] == "False", change
    detail = change["Details"][0]
    assert detail == {"Target": {"Attribute": "Properties", "Name": "Value", "RequiresRecreation": "Never"},
                      "Evaluation": "Static", "ChangeSource": "ParameterReference", "CausingEntity": "V"}, detail
    # The executed set is gone (CloudFormation lists none after an
    # execution); the one made since stays.
    assert [(s["ChangeSetName"], s["ExecutionStatus"]) for s in cf.list_change_sets(StackName="c1")["Summaries"]] == [
        ("second", "AVAILABLE")], cf.list_change_sets(StackName="c1")["Summaries"]
    cf.create_change_set(StackName="c1", ChangeSetName="same", UsePreviousTemplate=True)
    d = cf.describe_change_set(StackName="c1", ChangeSetName="same")
    assert (d["Status"], d["ExecutionStatus"]) == ("FAILED", "UNAVAILABLE"), d
    assert d["StatusReason"] == "The submitted information didn't contain changes. Submit different information to create a change set.", d
    code, msg, status = error(cf.execute_change_set, StackName="c1", ChangeSetName="same")
    assert (code, status) == ("InvalidChangeSetStatus", 400), (code, msg)
    assert error(cf.describe_change_set, StackName="c1", ChangeSetName="none") == (
        "ChangeSetNotFound", "ChangeSet [none] does not exist", 404)
    try:
        cf.describe_change_set(StackName="c1", ChangeSetName="none")
    except cf.exceptions.ChangeSetNotFoundException:
        pass
    cf.delete_change_set(StackName="c1", ChangeSetName="same")
    cf.execute_change_set(StackName="c1", ChangeSetName="second")
    cf.get_waiter("stack_update_complete").wait(StackName="c1", WaiterConfig=FAST)
    # Executing "second" removed the stack's change sets, itself included.
    assert cf.list_change_sets(StackName="c1")["Summaries"] == [], cf.list_change_sets(StackName="c1")["Summaries"]
    params = {p["ParameterKey"]: p["ParameterValue"] for p in cf.describe_stacks(StackName="c1")["Stacks"][0]["Parameters"]}
    assert params["V"] == "two", params


def deploy_cli():
    with open("d.yaml", "w") as f:
        f.write("Parameters:\n  V: {Type: String, Default: one}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref V}}\n")
    started = time.time()
    rc, out, err = aws("cloudformation", "deploy", "--stack-name", "dep", "--template-file", "d.yaml")
    assert rc == 0, (rc, out, err)
    assert "Successfully created/updated stack - dep" in out, out
    # The operation is done before the CLI's first poll: no 30-second sleep.
    assert time.time() - started < 25, time.time() - started
    # The CLI names its change sets by the second, and the executed one is
    # gone from the stack's list: deploys within one second both work.
    for value in ("quick", "two"):
        rc, out, err = aws("cloudformation", "deploy", "--stack-name", "dep", "--template-file", "d.yaml", "--parameter-overrides", "V=" + value)
        assert rc == 0, (rc, out, err)
    assert cf.list_change_sets(StackName="dep")["Summaries"] == []
    # Tags given to a change set reach the stack (aws cloudformation deploy
    # --tags, create-change-set --tags); tags alone are a change.
    rc, out, err = aws("cloudformation", "deploy", "--stack-name", "dep", "--template-file", "d.yaml", "--parameter-overrides", "V=two", "--tags", "team=a", "owner=b")
    assert rc == 0, (rc, out, err)
    tags = {t["Key"]: t["Value"] for t in cf.describe_stacks(StackName="dep")["Stacks"][0]["Tags"]}
    assert tags == {"team": "a", "owner": "b"}, tags
    cs = cf.create_change_set(StackName="dep", ChangeSetName="retag", UsePreviousTemplate=True,
                              Parameters=[{"ParameterKey": "V", "UsePreviousValue": True}], Tags=[{"Key": "team", "Value": "c"}])
    d = cf.describe_change_set(ChangeSetName=cs["Id"])
    assert (d["Status"], d["Tags"]) == ("CREATE_COMPLETE", [{"Key": "team", "Value": "c"}]), d
    cf.execute_change_set(ChangeSetName=cs["Id"])
    cf.get_waiter("stack_update_complete").wait(StackName="dep", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="dep")["Stacks"][0]["Tags"] == [{"Key": "team", "Value": "c"}]
    rc, out, err = aws("cloudformation", "deploy", "--stack-name", "dep", "--template-file", "d.yaml", "--parameter-overrides", "V=two")
    assert rc == 255 and "No changes to deploy. Stack dep is up to date" in err, (rc, out, err)
    rc, out, err = aws("cloudformation", "describe-stacks", "--stack-name", "dep", "--query", "Stacks[0].[StackStatus,Parameters[0].ParameterValue]", "--output", "text")
    assert out.split() == ["UPDATE_COMPLETE", "two"], out
    rc, out, err = aws("cloudformation", "wait", "stack-update-complete", "--stack-name", "dep")
    assert rc == 0, err
    rc, out, err = aws("cloudformation", "describe-stacks", "--stack-name", "missing")
    assert rc == 255 and "An error occurred (ValidationError) when calling the DescribeStacks operation: Stack with id missing does not exist" in err, (rc, err)
    # Pagination: 130 resources make 262 events; the CLI and boto3 follow NextToken.
    body = "Resources:\n" + "".join(f"  R{i}: {{Type: Cairn::Test::Resource}}\n" for i in range(130))
    cf.create_stack(StackName="many", TemplateBody=body)
    cf.get_waiter("stack_create_complete").wait(StackName="many", WaiterConfig=FAST)
    page = cf.describe_stack_events(StackName="many")
    assert len(page["StackEvents"]) == 100 and page["NextToken"], len(page["StackEvents"])
    all_events = events("many")
    assert len(all_events) == 2 + 130 * 3, len(all_events)
    assert len({e["EventId"] for e in all_events}) == len(all_events)
    # Newest first across the pages: the first page starts with the stack's
    # CREATE_COMPLETE, the last ends with its CREATE_IN_PROGRESS.
    assert [(e["LogicalResourceId"], e["ResourceStatus"]) for e in (all_events[0], all_events[-1])] == [
        ("many", "CREATE_IN_PROGRESS"), ("many", "CREATE_COMPLETE")], (all_events[0], all_events[-1])
    assert page["StackEvents"][0]["EventId"] == all_events[-1]["EventId"]
    last = cf.describe_stack_events(StackName="many", NextToken="300")
    assert [e["EventId"] for e in last["StackEvents"]] == [e["EventId"] for e in reversed(all_events[:92])]
    assert "NextToken" not in last, last.get("NextToken")
    assert error(cf.describe_stack_events, StackName="many", NextToken="393") == ("ValidationError", "Invalid NextToken", 400)
    rc, out, err = aws("cloudformation", "describe-stack-events", "--stack-name", "many", "--query", "length(StackEvents)")
    assert rc == 0 and out.strip() == "392", (out, err)
    rc, out, err = aws("cloudformation", "list-stack-resources", "--stack-name", "many", "--query", "length(StackResourceSummaries)")
    assert out.strip() == "130", out


def update_waiter_fails(stack):
    """The update waiter of `stack` stops on a failure status."""
    try:
        cf.get_waiter("stack_update_complete").wait(StackName=stack, WaiterConfig=FAST)
        raise AssertionError("the update waiter should have failed")
    except WaiterError:
        pass


def rollback_and_cancel():
    v1 = "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: '1', Fail: update}}\n"
    v2 = "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: '2'}}\n  C: {Type: Cairn::Test::Resource, DependsOn: B, Properties: {Fail: create}}\n"
    cf.create_stack(StackName="rb", TemplateBody=v1)
    cf.get_waiter("stack_create_complete").wait(StackName="rb", WaiterConfig=FAST)
    cf.update_stack(StackName="rb", TemplateBody=v2)
    update_waiter_fails("rb")
    s = cf.describe_stacks(StackName="rb")["Stacks"][0]
    assert s["StackStatus"] == "UPDATE_ROLLBACK_FAILED", s
    assert error(cf.cancel_update_stack, StackName="rb")[:2] == (
        "ValidationError", "CancelUpdateStack cannot be called from current stack status: stack rb is UPDATE_ROLLBACK_FAILED")
    cf.continue_update_rollback(StackName="rb", ResourcesToSkip=["B"])
    cf.get_waiter("stack_rollback_complete").wait(StackName="rb", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="rb")["Stacks"][0]["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
    assert error(cf.continue_update_rollback, StackName="rb")[0] == "ValidationError"
    slow = "Resources:\n  S: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n"
    cf.create_stack(StackName="cx", TemplateBody=slow)
    cf.get_waiter("stack_create_complete").wait(StackName="cx", WaiterConfig=FAST)
    cf.update_stack(StackName="cx", TemplateBody=slow.replace("Value: a", "Value: b, WaitSeconds: 60"))
    assert cf.describe_stacks(StackName="cx")["Stacks"][0]["StackStatus"] == "UPDATE_IN_PROGRESS"
    # A second operation on the busy stack gets CloudFormation's error.
    code, msg, _ = error(cf.update_stack, StackName="cx", TemplateBody=slow)
    assert code == "ValidationError" and msg.endswith("is in UPDATE_IN_PROGRESS state and can not be updated."), msg
    started = time.time()
    cf.cancel_update_stack(StackName="cx")
    cf.get_waiter("stack_rollback_complete").wait(StackName="cx", WaiterConfig=FAST)
    assert time.time() - started < 30
    last = events("cx")[-1]
    assert (last["LogicalResourceId"], last["ResourceStatus"]) == ("cx", "UPDATE_ROLLBACK_COMPLETE"), last
    # DisableRollback on UpdateStack keeps the failed update (UPDATE_FAILED,
    # which the update waiter reports as a failure); RollbackStack goes back.
    good = "Resources:\n  K: {Type: Cairn::Test::Resource, Properties: {Name: k1}}\n"
    bad = "Resources:\n  K: {Type: Cairn::Test::Resource, Properties: {Name: k2}}\n  F: {Type: Cairn::Test::Resource, DependsOn: K, Properties: {Fail: create, FailMessage: no}}\n"
    cf.create_stack(StackName="kept", TemplateBody=good)
    cf.get_waiter("stack_create_complete").wait(StackName="kept", WaiterConfig=FAST)
    cf.update_stack(StackName="kept", TemplateBody=bad, DisableRollback=True)
    update_waiter_fails("kept")
    s = cf.describe_stacks(StackName="kept")["Stacks"][0]
    assert (s["StackStatus"], s["StackStatusReason"]) == (
        "UPDATE_FAILED", "The following resource(s) failed to create: [F]."), s
    k = cf.describe_stack_resource(StackName="kept", LogicalResourceId="K")["StackResourceDetail"]
    assert k["PhysicalResourceId"] == "k2", k
    stack_id = cf.rollback_stack(StackName="kept")["StackId"]
    assert stack_id == s["StackId"], stack_id
    cf.get_waiter("stack_rollback_complete").wait(StackName="kept", WaiterConfig=FAST)
    k = cf.describe_stack_resource(StackName="kept", LogicalResourceId="K")["StackResourceDetail"]
    assert k["PhysicalResourceId"] == "k1", k
    code, msg, _ = error(cf.rollback_stack, StackName="kept")
    assert (code, msg) == ("ValidationError", "Stack:%s is in UPDATE_ROLLBACK_COMPLETE state and can not be rolled back; only a stack in CREATE_FAILED or UPDATE_FAILED can" % stack_id), msg


def exports_and_drift():
    cf.create_stack(StackName="ex", TemplateBody=TEMPLATE)
    cf.get_waiter("stack_create_complete").wait(StackName="ex", WaiterConfig=FAST)
    imp = "Resources:\n  I: {Type: Cairn::Test::Resource, Properties: {Value: !ImportValue ex-a}}\n"
    cf.create_stack(StackName="im", TemplateBody=imp)
    cf.get_waiter("stack_create_complete").wait(StackName="im", WaiterConfig=FAST)
    exports = cf.list_exports()["Exports"]
    assert [(e["Name"], e["ExportingStackId"].split("/")[1]) for e in exports] == [("ex-a", "ex")], exports
    assert cf.list_imports(ExportName="ex-a")["Imports"] == ["im"]
    a = cf.describe_stack_resource(StackName="ex", LogicalResourceId="A")["StackResourceDetail"]["PhysicalResourceId"]
    path = os.path.join("cairn-state.db.resources", "test-resources", shard(a), a + ".json")
    record = json.load(open(path))
    record["Properties"]["Value"] = "hacked"
    json.dump(record, open(path, "w"))
    did = cf.detect_stack_drift(StackName="ex")["StackDriftDetectionId"]
    st = cf.describe_stack_drift_detection_status(StackDriftDetectionId=did)
    assert (st["StackDriftStatus"], st["DetectionStatus"], st["DriftedStackResourceCount"]) == ("DRIFTED", "DETECTION_COMPLETE", 1), st
    drifts = cf.describe_stack_resource_drifts(StackName="ex", StackResourceDriftStatusFilters=["MODIFIED"])["StackResourceDrifts"]
    assert [(d["LogicalResourceId"], d["PropertyDifferences"]) for d in drifts] == [
        ("A", [{"PropertyPath": "/Value", "ExpectedValue": "one", "ActualValue": "hacked", "DifferenceType": "NOT_EQUAL"}])], drifts
    page = cf.describe_stack_resource_drifts(StackName="ex", MaxResults=1)
    assert len(page["StackResourceDrifts"]) == 1 and page["NextToken"], page
    rest = cf.describe_stack_resource_drifts(StackName="ex", MaxResults=1, NextToken=page["NextToken"])
    assert [d["LogicalResourceId"] for d in page["StackResourceDrifts"] + rest["StackResourceDrifts"]] == ["A", "B"]
    assert "NextToken" not in rest, rest
    one = cf.detect_stack_resource_drift(StackName="ex", LogicalResourceId="B")["StackResourceDrift"]
    assert one["StackResourceDriftStatus"] == "IN_SYNC", one
    # An earlier detection is still found by its id.
    st = cf.describe_stack_drift_detection_status(StackDriftDetectionId=did)
    assert (st["StackDriftDetectionId"], st["StackDriftStatus"]) == (did, "DRIFTED"), st


def auth():
    def raw_call(headers, body=b"Action=ListStacks&Version=2010-05-15"):
        req = urllib.request.Request(ENDPOINT + "/", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    assert cf.list_stacks()["StackSummaries"] == []
    wrong = client(aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key="wrong")
    code, msg, status = error(wrong.list_stacks)
    assert (code, status) == ("SignatureDoesNotMatch", 403), (code, msg)
    unknown = client(aws_access_key_id="AKIDUNKNOWN", aws_secret_access_key="x")
    assert error(unknown.list_stacks) == ("InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    status, body = raw_call({"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403 and "<Code>MissingAuthenticationToken</Code>" in body, (status, body)
    status, body = raw_call({"Content-Type": "application/x-www-form-urlencoded", "Authorization": "AWS4-HMAC-SHA256 garbage", "X-Amz-Date": "20261121T000000Z"})
    assert status == 400 and "<Code>IncompleteSignature</Code>" in body, (status, body)
    # Signed correctly, but 20 minutes ago.
    creds = botocore.credentials.Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
    req = botocore.awsrequest.AWSRequest(method="POST", url=ENDPOINT + "/", data=b"Action=ListStacks&Version=2010-05-15",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    stale = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(minutes=20)

    class Then(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return stale

        @classmethod
        def now(cls, tz=None):
            return stale.replace(tzinfo=tz) if tz else stale

    with unittest.mock.patch("botocore.auth.datetime.datetime", Then):
        botocore.auth.SigV4Auth(creds, "cloudformation", "us-east-1").add_auth(req)
    status, body = raw_call(dict(req.headers.items()))
    assert status == 403 and "<Code>SignatureDoesNotMatch</Code>" in body and "Signature expired: " in body, (status, body)
    # A key limited to some stacks.
    limited = client(aws_access_key_id="AKIDLIMITED", aws_secret_access_key="limited-secret")
    code, msg, status = error(limited.create_stack, StackName="other", TemplateBody=TEMPLATE)
    assert (code, status) == ("AccessDenied", 403), (code, msg)
    assert msg == "User: AKIDLIMITED is not authorized to perform: cloudformation:CreateStack on resource: other", msg
    # Hooks govern every stack: only an unlimited key registers or
    # configures them.
    hook_configuration = json.dumps({"CloudFormationConfiguration": {"HookConfiguration": {
        "HookInvocationStatus": "DISABLED"}}})
    for call, args in [
        (limited.set_type_configuration, {"TypeName": "Private::Guard::FileMode", "Type": "HOOK",
                                          "Configuration": hook_configuration}),
        (limited.register_type, {"Type": "HOOK", "TypeName": "Org::Files::ModeHook",
                                 "SchemaHandlerPackage": "file:///nowhere.tar.gz"}),
    ]:
        code, msg, status = error(call, **args)
        assert (code, status) == ("AccessDenied", 403), (code, msg)
        assert msg.startswith("User: AKIDLIMITED is not authorized to perform: cloudformation:"), msg
    limited.create_stack(StackName="mine", TemplateBody=TEMPLATE)
    limited.get_waiter("stack_create_complete").wait(StackName="mine", WaiterConfig=FAST)
    # A change set of another stack, named by its ARN, is authorised against
    # that stack, whatever StackName says.
    cf.create_stack(StackName="other", TemplateBody=TEMPLATE)
    cf.get_waiter("stack_create_complete").wait(StackName="other", WaiterConfig=FAST)
    other_cs = cf.create_change_set(StackName="other", ChangeSetName="theirs", TemplateBody=TEMPLATE.replace("Default: one", "Default: two"))["Id"]
    cf.get_waiter("change_set_create_complete").wait(StackName="other", ChangeSetName="theirs", WaiterConfig=FAST)
    for call, kwargs, action in [
        (limited.describe_change_set, {"StackName": "mine", "ChangeSetName": other_cs}, "DescribeChangeSet"),
        (limited.describe_change_set, {"ChangeSetName": other_cs}, "DescribeChangeSet"),
        (limited.execute_change_set, {"StackName": "mine", "ChangeSetName": other_cs}, "ExecuteChangeSet"),
        (limited.delete_change_set, {"StackName": "mine", "ChangeSetName": other_cs}, "DeleteChangeSet"),
        (limited.get_template, {"StackName": "mine", "ChangeSetName": other_cs}, "GetTemplate"),
        (limited.describe_stacks, {"StackName": cf.describe_stacks(StackName="other")["Stacks"][0]["StackId"]}, "DescribeStacks"),
        (limited.delete_stack, {"StackName": "other"}, "DeleteStack"),
    ]:
        code, msg, status = error(call, **kwargs)
        assert (code, status) == ("AccessDenied", 403), (action, code, msg)
        assert msg.startswith("User: AKIDLIMITED is not authorized to perform: cloudformation:%s on resource: " % action), msg
    # Nothing happened to the other stack or its change set.
    assert cf.describe_change_set(ChangeSetName=other_cs)["ExecutionStatus"] == "AVAILABLE"
    assert cf.describe_stacks(StackName="other")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"


def tls():
    assert ENDPOINT.startswith("https://"), ENDPOINT
    cf.create_stack(StackName="t", TemplateBody=TEMPLATE)
    cf.get_waiter("stack_create_complete").wait(StackName="t", WaiterConfig=FAST)
    rc, out, err = aws("cloudformation", "describe-stacks", "--stack-name", "t", "--query", "Stacks[0].StackStatus", "--output", "text")
    assert rc == 0 and out.strip() == "CREATE_COMPLETE", (rc, out, err)
    untrusted = boto3.client("cloudformation", endpoint_url=ENDPOINT, region_name="us-east-1",
                             config=Config(retries={"max_attempts": 1}))
    try:
        untrusted.list_stacks()
        raise AssertionError("an untrusted certificate was accepted")
    except botocore.exceptions.SSLError:
        pass


def resumed():
    cf.get_waiter("stack_create_complete").wait(StackName="term", WaiterConfig=FAST)
    assert [(r["LogicalResourceId"], r["ResourceStatus"]) for r in cf.list_stack_resources(StackName="term")["StackResourceSummaries"]] == [
        ("A", "CREATE_COMPLETE"), ("B", "CREATE_COMPLETE")]


def limits():
    """Hostile bodies get the Query API's XML errors and the server stays up:
    a body over max_body_bytes (100,000 here), deep nesting, an alias bomb."""
    big = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: '%s'}}\n" % ("x" * 150_000)
    code, msg, status = error(cf.create_stack, StackName="big", TemplateBody=big)
    assert (code, status) == ("ValidationError", 413), (code, status, msg)
    assert "larger than the server accepts (100000 bytes, [server] max_body_bytes)" in msg, msg
    deep = "Resources:\n  A:\n    Type: Cairn::Test::Resource\n    Properties:\n      Value:\n        " + "- " * 10_000 + "x\n"
    code, msg, status = error(cf.validate_template, TemplateBody=deep)
    assert (code, status) == ("ValidationError", 400), (code, status, msg)
    assert "the template nests collections more than 128 levels deep" in msg, msg
    bomb = "Metadata:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for level in range(1, 10):
        bomb += "  a%d: &a%d [%s]\n" % (level, level, ", ".join(["*a%d" % (level - 1)] * 10))
    bomb += "Resources:\n  A: {Type: Cairn::Test::Resource}\n"
    code, msg, status = error(cf.validate_template, TemplateBody=bomb)
    assert (code, status) == ("ValidationError", 400), (code, status, msg)
    assert "YAML aliases expand to more than" in msg, msg
    code, msg, status = error(cf.create_stack, StackName="bomb", TemplateBody=bomb)
    assert "YAML aliases expand to more than" in msg, msg
    assert cf.list_stacks()["StackSummaries"] == []


def capabilities():
    """CloudFormation's capabilities: ValidateTemplate names what a template
    requires; CreateStack, UpdateStack and CreateChangeSet are refused with
    InsufficientCapabilitiesException until it is acknowledged."""
    named = "Resources:\n  Role: {Type: AWS::IAM::Role, Properties: {RoleName: app}}\n"
    v = cf.validate_template(TemplateBody=named)
    assert v["Capabilities"] == ["CAPABILITY_NAMED_IAM"], v
    assert v["CapabilitiesReason"] == "The following resource(s) require capabilities: [AWS::IAM::Role]", v
    refused = ("InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_NAMED_IAM]", 400)
    assert error(cf.create_stack, StackName="iam", TemplateBody=named) == refused
    assert error(cf.create_stack, StackName="iam", TemplateBody=named, Capabilities=["CAPABILITY_IAM"]) == refused
    assert error(cf.create_change_set, StackName="iam", ChangeSetName="c", ChangeSetType="CREATE", TemplateBody=named) == refused
    assert cf.list_stacks()["StackSummaries"] == []
    cf.create_stack(StackName="iam", TemplateBody=named, Capabilities=["CAPABILITY_NAMED_IAM"])
    cf.get_waiter("stack_create_complete").wait(StackName="iam", WaiterConfig=FAST)
    described = cf.describe_stacks(StackName="iam")["Stacks"][0]
    assert described["Capabilities"] == ["CAPABILITY_NAMED_IAM"], described
    two = named + "  Other: {Type: AWS::IAM::Role, Properties: {Value: x}}\n"
    got = error(cf.update_stack, StackName="iam", TemplateBody=two)
    assert got == refused, got
    cf.update_stack(StackName="iam", TemplateBody=two, Capabilities=["CAPABILITY_NAMED_IAM", "CAPABILITY_IAM"])
    cf.get_waiter("stack_update_complete").wait(StackName="iam", WaiterConfig=FAST)
    described = cf.describe_stacks(StackName="iam")["Stacks"][0]
    assert described["Capabilities"] == ["CAPABILITY_NAMED_IAM", "CAPABILITY_IAM"], described


def macros():
    """Macros through the API: ValidateTemplate declares and runs them,
    CreateStack needs CAPABILITY_AUTO_EXPAND, a change set does not; the
    original and processed templates are both served; a macro's failure is
    CloudFormation's text. The Count macro (examples/python-macro) runs as
    a webhook of the server's configuration."""
    body = "Transform: Count\nResources:\n  B:\n    Type: Cairn::Test::Resource\n    Count: 2\n    Properties: {Value: v-%d}\n"
    v = cf.validate_template(TemplateBody=body)
    assert v["DeclaredTransforms"] == ["Count"], v
    assert v["Capabilities"] == ["CAPABILITY_AUTO_EXPAND"], v
    assert v["CapabilitiesReason"] == "The template contains a transform that expands it.", v
    refused = ("InsufficientCapabilitiesException", "Requires capabilities : [CAPABILITY_AUTO_EXPAND]", 400)
    assert error(cf.create_stack, StackName="counted", TemplateBody=body) == refused
    cf.create_change_set(StackName="counted", ChangeSetName="c1", ChangeSetType="CREATE", TemplateBody=body)
    cf.get_waiter("change_set_create_complete").wait(StackName="counted", ChangeSetName="c1", WaiterConfig=FAST)
    changes = cf.describe_change_set(StackName="counted", ChangeSetName="c1")["Changes"]
    assert sorted(c["ResourceChange"]["LogicalResourceId"] for c in changes) == ["B1", "B2"], changes
    cf.execute_change_set(StackName="counted", ChangeSetName="c1")
    cf.get_waiter("stack_create_complete").wait(StackName="counted", WaiterConfig=FAST)
    original = cf.get_template(StackName="counted")
    assert original["TemplateBody"] == body, original
    assert original["StagesAvailable"] == ["Original", "Processed"], original
    processed = cf.get_template(StackName="counted", TemplateStage="Processed")["TemplateBody"]
    assert processed["Resources"]["B2"] == {"Type": "Cairn::Test::Resource", "Properties": {"Value": "v-2"}}, processed
    assert "Transform" not in processed, processed
    summary = cf.get_template_summary(StackName="counted")
    assert summary["DeclaredTransforms"] == ["Count"], summary
    assert summary["ResourceTypes"] == ["Cairn::Test::Resource"], summary
    failing = body.replace("Count: 2", "Count: lots")
    code, message, status = error(cf.update_stack, StackName="counted", TemplateBody=failing,
                                  Capabilities=["CAPABILITY_AUTO_EXPAND"])
    assert (code, status) == ("ValidationError", 400), (code, message)
    assert message.startswith("Transform 123456789012::Count failed with: Count of B must be a whole number, not 'lots'"), message
    cf.update_stack(StackName="counted", TemplateBody=body.replace("Count: 2", "Count: 3"),
                    Capabilities=["CAPABILITY_AUTO_EXPAND"])
    cf.get_waiter("stack_update_complete").wait(StackName="counted", WaiterConfig=FAST)
    listed = cf.list_stack_resources(StackName="counted")["StackResourceSummaries"]
    assert sorted(r["LogicalResourceId"] for r in listed) == ["B1", "B2", "B3"], listed
    cf.delete_stack(StackName="counted")
    cf.get_waiter("stack_delete_complete").wait(StackName="counted", WaiterConfig=FAST)


def protection():
    """Termination protection: EnableTerminationProtection on CreateStack,
    DescribeStacks shows it, DeleteStack is refused with CloudFormation's
    text and changes nothing, UpdateTerminationProtection turns it off."""
    body = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: a}}\n"
    created = cf.create_stack(StackName="prot", TemplateBody=body, EnableTerminationProtection=True)
    cf.get_waiter("stack_create_complete").wait(StackName="prot", WaiterConfig=FAST)
    stack = cf.describe_stacks(StackName="prot")["Stacks"][0]
    assert stack["EnableTerminationProtection"] is True, stack
    refused = ("ValidationError", "Stack [prot] cannot be deleted while TerminationProtection is enabled", 400)
    assert error(cf.delete_stack, StackName="prot") == refused
    assert cf.describe_stacks(StackName="prot")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    answer = cf.update_termination_protection(StackName="prot", EnableTerminationProtection=False)
    assert answer["StackId"] == created["StackId"], answer
    assert cf.describe_stacks(StackName="prot")["Stacks"][0]["EnableTerminationProtection"] is False
    cf.delete_stack(StackName="prot")
    cf.get_waiter("stack_delete_complete").wait(StackName="prot", WaiterConfig=FAST)
    code, message, _ = error(cf.update_termination_protection, StackName="nope", EnableTerminationProtection=True)
    assert (code, message) == ("ValidationError", "Stack [nope] does not exist"), message


def import_resources():
    """Import through change sets: a file made by hand joins a stack
    (CreateChangeSet IMPORT with ResourcesToImport, DescribeChangeSet's
    Import action, ExecuteChangeSet, the stack_import_complete waiter,
    IMPORT_COMPLETE on the resource), and a refusal with CloudFormation's
    text."""
    base = "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: x}}\n"
    cf.create_stack(StackName="imp", TemplateBody=base)
    cf.get_waiter("stack_create_complete").wait(StackName="imp", WaiterConfig=FAST)
    path = os.path.abspath("by-hand.txt")
    with open(path, "w") as f:
        f.write("hello")
    body = base + "  F:\n    Type: Cairn::Local::File\n    DeletionPolicy: Retain\n    Properties: {Path: '%s', Content: hello}\n" % path
    wanted = [{"ResourceType": "Cairn::Local::File", "LogicalResourceId": "F", "ResourceIdentifier": {"Path": path}}]
    cs = cf.create_change_set(StackName="imp", ChangeSetName="adopt", ChangeSetType="IMPORT",
                              TemplateBody=body, ResourcesToImport=wanted)
    described = cf.describe_change_set(ChangeSetName=cs["Id"])
    changes = [(c["ResourceChange"]["Action"], c["ResourceChange"]["LogicalResourceId"],
                c["ResourceChange"]["PhysicalResourceId"]) for c in described["Changes"]]
    assert changes == [("Import", "F", path)], described
    cf.execute_change_set(ChangeSetName=cs["Id"])
    cf.get_waiter("stack_import_complete").wait(StackName="imp", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="imp")["Stacks"][0]["StackStatus"] == "IMPORT_COMPLETE"
    f = cf.describe_stack_resource(StackName="imp", LogicalResourceId="F")["StackResourceDetail"]
    assert (f["ResourceStatus"], f["PhysicalResourceId"]) == ("IMPORT_COMPLETE", path), f
    # Without a DeletionPolicy: refused when the change set is made.
    code, message, _ = error(cf.create_change_set, StackName="imp", ChangeSetName="again", ChangeSetType="IMPORT",
                             TemplateBody=body.replace("    DeletionPolicy: Retain\n", "").replace("  F:", "  G:"),
                             ResourcesToImport=[dict(wanted[0], LogicalResourceId="G")])
    assert (code, message) == ("ValidationError", "The following resources to import [G] must have DeletionPolicy attribute specified in the template."), message
    cf.delete_stack(StackName="imp")
    cf.get_waiter("stack_delete_complete").wait(StackName="imp", WaiterConfig=FAST)
    assert os.path.exists(path)


POLICY_DENY_REPLACE = json.dumps({"Statement": [
    {"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"},
    {"Effect": "Deny", "Action": "Update:Replace", "Principal": "*", "Resource": "LogicalResourceId/Db*"},
]})


def refactor():
    """CreateStackRefactor with a ResourceMapping (a rename) and a move
    found by logical id; DescribeStackRefactor, ListStackRefactorActions,
    ExecuteStackRefactor, ListStackRefactors; the resources keep their
    physical ids in their new stacks; a refactor that would delete a
    resource is CREATE_FAILED with the reason."""
    a = ("Resources:\n  Keep: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n"
         "  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n")
    b = "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n"
    for name, body in [("ra", a), ("rb", b)]:
        cf.create_stack(StackName=name, TemplateBody=body)
        cf.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=FAST)
    physical = lambda s, l: cf.describe_stack_resource(StackName=s, LogicalResourceId=l)["StackResourceDetail"]["PhysicalResourceId"]
    keep, db = physical("ra", "Keep"), physical("ra", "Db")
    a2 = "Resources:\n  Kept: {Type: Cairn::Test::Resource, Properties: {Value: k}}\n"
    b2 = b + "  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n"
    rid = cf.create_stack_refactor(
        Description="split the database out",
        StackDefinitions=[{"StackName": "ra", "TemplateBody": a2}, {"StackName": "rb", "TemplateBody": b2}],
        ResourceMappings=[{"Source": {"StackName": "ra", "LogicalResourceId": "Keep"},
                           "Destination": {"StackName": "ra", "LogicalResourceId": "Kept"}}],
    )["StackRefactorId"]
    d = cf.describe_stack_refactor(StackRefactorId=rid)
    assert (d["Status"], d["ExecutionStatus"], d["Description"]) == ("CREATE_COMPLETE", "AVAILABLE", "split the database out"), d
    assert len(d["StackIds"]) == 2, d
    actions = cf.list_stack_refactor_actions(StackRefactorId=rid)["StackRefactorActions"]
    got = [(x["Action"], x["Entity"], x["Detection"], x["PhysicalResourceId"],
            x["ResourceMapping"]["Source"]["LogicalResourceId"], x["ResourceMapping"]["Destination"]["StackName"])
           for x in actions]
    assert got == [("MOVE", "RESOURCE", "AUTO", db, "Db", "rb"), ("MOVE", "RESOURCE", "MANUAL", keep, "Keep", "ra")], got
    cf.execute_stack_refactor(StackRefactorId=rid)
    assert cf.describe_stack_refactor(StackRefactorId=rid)["ExecutionStatus"] == "EXECUTE_COMPLETE"
    assert physical("ra", "Kept") == keep and physical("rb", "Db") == db
    assert [r["LogicalResourceId"] for r in cf.describe_stack_resources(StackName="ra")["StackResources"]] == ["Kept"]
    assert cf.get_template(StackName="rb")["TemplateBody"] == b2
    summaries = cf.list_stack_refactors()["StackRefactorSummaries"]
    assert [(x["StackRefactorId"], x["ExecutionStatus"]) for x in summaries] == [(rid, "EXECUTE_COMPLETE")], summaries
    # Executing it again, or a refactor that deletes: refused.
    code, message, _ = error(cf.execute_stack_refactor, StackRefactorId=rid)
    assert code == "ValidationError" and "can not be executed" in message, message
    bad = cf.create_stack_refactor(StackDefinitions=[{"StackName": "rb", "TemplateBody": b}])["StackRefactorId"]
    d = cf.describe_stack_refactor(StackRefactorId=bad)
    assert (d["Status"], d["ExecutionStatus"]) == ("CREATE_FAILED", "UNAVAILABLE"), d
    assert d["StatusReason"] == "Resource Db of stack rb is in none of the refactored templates: a refactor can't delete resources (remove it with an update first)", d
    # B moves out into a stack the refactor creates.
    b_phys = physical("rb", "B")
    rc = "Resources:\n  B: {Type: Cairn::Test::Resource, Properties: {Value: b}}\n"
    rb = "Resources:\n  Db: {Type: Cairn::Test::Resource, Properties: {Value: data}}\n"
    rid = cf.create_stack_refactor(EnableStackCreation=True, StackDefinitions=[
        {"StackName": "rb", "TemplateBody": rb}, {"StackName": "rc", "TemplateBody": rc}])["StackRefactorId"]
    kinds = [(x["Action"], x["Entity"]) for x in cf.list_stack_refactor_actions(StackRefactorId=rid)["StackRefactorActions"]]
    assert kinds == [("CREATE", "STACK"), ("MOVE", "RESOURCE")], kinds
    cf.execute_stack_refactor(StackRefactorId=rid)
    assert cf.describe_stacks(StackName="rc")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    assert physical("rc", "B") == b_phys


def loopback_server(answer):
    """A threaded HTTP server on loopback: every GET or POST is answered
    with the status `answer(request)` returns. Returns (server, base URL)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def respond(self):
            self.send_response(answer(self))
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = respond

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, "http://127.0.0.1:%d" % server.server_address[1]


def notifications():
    """NotificationARNs on CreateStack: DescribeStacks lists the webhook,
    which receives every event of the create in order with CloudFormation's
    SNS fields; an update with an empty list removes it; an SNS topic is
    refused."""
    got = []

    def hook(request):
        got.append(json.loads(request.rfile.read(int(request.headers["Content-Length"]))))
        return 200

    server, base = loopback_server(hook)
    url = base + "/events"
    body = lambda v: "Resources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: %s}}\n" % v
    cf.create_stack(StackName="told", TemplateBody=body("v1"), NotificationARNs=[url])
    cf.get_waiter("stack_create_complete").wait(StackName="told", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="told")["Stacks"][0]["NotificationARNs"] == [url]
    recorded = [e["EventId"] for e in reversed(cf.describe_stack_events(StackName="told")["StackEvents"])]
    deadline = time.time() + 20
    while len(got) < len(recorded):
        assert time.time() < deadline, (got, recorded)
        time.sleep(0.1)
    assert [m["EventId"] for m in got] == recorded, (got, recorded)
    assert [(m["LogicalResourceId"], m["ResourceStatus"]) for m in got][-1] == ("told", "CREATE_COMPLETE"), got
    assert got[0]["StackName"] == "told" and got[0]["ResourceType"] == "AWS::CloudFormation::Stack", got[0]
    cf.update_stack(StackName="told", TemplateBody=body("v2"), NotificationARNs=[])
    cf.get_waiter("stack_update_complete").wait(StackName="told", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="told")["Stacks"][0]["NotificationARNs"] == []
    code, message, _ = error(cf.create_stack, StackName="told2", TemplateBody=body("v1"),
                             NotificationARNs=["arn:aws:sns:us-east-1:123456789012:topic"])
    assert code == "ValidationError" and message.startswith(
        "Notification target arn:aws:sns:us-east-1:123456789012:topic is not a webhook URL"), message
    server.shutdown()


def rollback_triggers():
    """RollbackConfiguration on CreateStack and UpdateStack: DescribeStacks
    shows it, a health check failing mid-update rolls the update back with
    a reason naming the trigger, leaving it out keeps it, an empty list
    clears it, and CloudFormation's limit is refused."""
    health = {"status": 200}
    server, base = loopback_server(lambda request: health["status"])
    url = base + "/health"
    trigger = {"Arn": url, "Type": "Cairn::Http::HealthCheck"}
    body = lambda v, wait: ("Resources:\n  A: {Type: Cairn::Test::Resource, "
                            "Properties: {Value: %s, WaitSeconds: %d}}\n" % (v, wait))
    cf.create_stack(StackName="trig", TemplateBody=body("v1", 0),
                    RollbackConfiguration={"RollbackTriggers": [trigger], "MonitoringTimeInMinutes": 0})
    cf.get_waiter("stack_create_complete").wait(StackName="trig", WaiterConfig=FAST)
    stack = cf.describe_stacks(StackName="trig")["Stacks"][0]
    assert stack["RollbackConfiguration"] == {"RollbackTriggers": [trigger], "MonitoringTimeInMinutes": 0}, stack
    cf.update_stack(StackName="trig", TemplateBody=body("v2", 60))
    deadline = time.time() + 30
    while not any(e["LogicalResourceId"] == "A" and e["ResourceStatus"] == "UPDATE_IN_PROGRESS"
                  for e in cf.describe_stack_events(StackName="trig")["StackEvents"]):
        assert time.time() < deadline, "A's update never started"
        time.sleep(0.1)
    health["status"] = 503
    try:
        cf.get_waiter("stack_update_complete").wait(StackName="trig", WaiterConfig=FAST)
        raise AssertionError("the update completed although its trigger fired")
    except WaiterError:
        pass
    stack = cf.describe_stacks(StackName="trig")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE", stack
    rolled = [e["ResourceStatusReason"] for e in cf.describe_stack_events(StackName="trig")["StackEvents"]
              if e["ResourceStatus"] == "UPDATE_ROLLBACK_IN_PROGRESS"]
    assert rolled == ["Rollback trigger Cairn::Http::HealthCheck [%s] is in ALARM: the health check answered HTTP 503. " % url], rolled
    health["status"] = 200
    cf.update_stack(StackName="trig", TemplateBody=body("v3", 0))
    cf.get_waiter("stack_update_complete").wait(StackName="trig", WaiterConfig=FAST)
    stack = cf.describe_stacks(StackName="trig")["Stacks"][0]
    assert stack["RollbackConfiguration"]["RollbackTriggers"] == [trigger], stack
    cf.update_stack(StackName="trig", TemplateBody=body("v4", 0), RollbackConfiguration={"RollbackTriggers": []})
    cf.get_waiter("stack_update_complete").wait(StackName="trig", WaiterConfig=FAST)
    stack = cf.describe_stacks(StackName="trig")["Stacks"][0]
    assert stack["RollbackConfiguration"] == {}, stack
    code, message, _ = error(cf.create_stack, StackName="trig2", TemplateBody=body("v1", 0),
                             RollbackConfiguration={"RollbackTriggers": [trigger] * 6})
    assert (code, message) == ("ValidationError", "1 validation error detected: Value at 'rollbackConfiguration.rollbackTriggers' failed to satisfy constraint: Member must have length less than or equal to 5"), message
    server.shutdown()


def stack_policy():
    """Stack policies: StackPolicyBody on CreateStack, GetStackPolicy and
    SetStackPolicy, an update whose implicit replacement the policy denies
    rolls back with the denial on the resource's event, and
    StackPolicyDuringUpdateBody lets one update through."""
    body = ("Parameters:\n  N: {Type: String}\nResources:\n"
            "  A: {Type: Cairn::Test::Resource, Properties: {Name: !Ref N}}\n"
            "  Db: {Type: Cairn::Test::Resource, Properties: {Name: !Sub '${A}-db'}}\n")
    params = lambda n: [{"ParameterKey": "N", "ParameterValue": n}]
    cf.create_stack(StackName="pol", TemplateBody=body, Parameters=params("a1"), StackPolicyBody=POLICY_DENY_REPLACE)
    cf.get_waiter("stack_create_complete").wait(StackName="pol", WaiterConfig=FAST)
    assert cf.get_stack_policy(StackName="pol")["StackPolicyBody"] == POLICY_DENY_REPLACE
    cf.update_stack(StackName="pol", TemplateBody=body, Parameters=params("a2"))
    try:
        cf.get_waiter("stack_update_complete").wait(StackName="pol", WaiterConfig=FAST)
        raise AssertionError("the denied update completed")
    except WaiterError:
        pass
    stack = cf.describe_stacks(StackName="pol")["Stacks"][0]
    assert stack["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE", stack
    failed = [e for e in cf.describe_stack_events(StackName="pol")["StackEvents"]
              if e["ResourceStatus"] == "UPDATE_FAILED"]
    assert [(e["LogicalResourceId"], e["ResourceStatusReason"]) for e in failed] == [
        ("Db", "Action denied by stack policy: Statement [#2] does not allow [Update:Replace] for resource [LogicalResourceId/Db];")], failed
    db = cf.describe_stack_resource(StackName="pol", LogicalResourceId="Db")["StackResourceDetail"]
    assert db["PhysicalResourceId"] == "a1-db", db
    # One update allowed by its own policy; the stack's stays.
    allow_all = json.dumps({"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]})
    cf.update_stack(StackName="pol", TemplateBody=body, Parameters=params("a2"), StackPolicyDuringUpdateBody=allow_all)
    cf.get_waiter("stack_update_complete").wait(StackName="pol", WaiterConfig=FAST)
    db = cf.describe_stack_resource(StackName="pol", LogicalResourceId="Db")["StackResourceDetail"]
    assert db["PhysicalResourceId"] == "a2-db", db
    assert cf.get_stack_policy(StackName="pol")["StackPolicyBody"] == POLICY_DENY_REPLACE
    # SetStackPolicy replaces it; a malformed one is refused.
    cf.set_stack_policy(StackName="pol", StackPolicyBody=allow_all)
    assert cf.get_stack_policy(StackName="pol")["StackPolicyBody"] == allow_all
    code, message, _ = error(cf.set_stack_policy, StackName="pol", StackPolicyBody='{"Statement": [{"Effect": "Allow"}]}')
    assert (code, message) == ("ValidationError", "StackPolicyBody is not a valid stack policy: Statement [#1]: Principal is required and must be \"*\""), message
    cf.delete_stack(StackName="pol")
    cf.get_waiter("stack_delete_complete").wait(StackName="pol", WaiterConfig=FAST)
    code, message, _ = error(cf.get_stack_policy, StackName="pol")
    assert (code, message) == ("ValidationError", "Stack with id pol does not exist"), message
    # A stack without a policy: none, and every update allowed.
    cf.create_stack(StackName="free", TemplateBody=body, Parameters=params("f1"))
    cf.get_waiter("stack_create_complete").wait(StackName="free", WaiterConfig=FAST)
    assert "StackPolicyBody" not in cf.get_stack_policy(StackName="free")
    cf.delete_stack(StackName="free")
    cf.get_waiter("stack_delete_complete").wait(StackName="free", WaiterConfig=FAST)


def racing():
    """Two mutating calls on one stack at once, behind a barrier, a few
    hundred times: one starts, the other gets CloudFormation's refusal, and
    every stack ends in a terminal status (none is left in progress)."""
    import threading
    cf = client(pool=64)
    stacks = ["race%d" % i for i in range(20)]
    body = "Parameters:\n  V: {Type: String}\nResources:\n  A: {Type: Cairn::Test::Resource, Properties: {Value: !Ref V, WaitSeconds: 0.05}}\n"
    for name in stacks:
        cf.create_stack(StackName=name, TemplateBody=body, Parameters=[{"ParameterKey": "V", "ParameterValue": "0"}])

    def settled(name):
        for _ in range(600):
            status = cf.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
            if not status.endswith("_IN_PROGRESS"):
                return status
            time.sleep(0.05)
        raise AssertionError("%s stayed %s" % (name, status))

    for name in stacks:
        assert settled(name) == "CREATE_COMPLETE"
    ids = {name: cf.describe_stacks(StackName=name)["Stacks"][0]["StackId"] for name in stacks}
    refused = 0
    pairs = 0
    for round_ in range(15):
        barrier = threading.Barrier(2 * len(stacks))
        outcomes = []
        lock = threading.Lock()

        def update(name, value):
            barrier.wait()
            try:
                cf.update_stack(StackName=name, TemplateBody=body, Parameters=[{"ParameterKey": "V", "ParameterValue": value}])
                result = ("ok", name, "")
            except botocore.exceptions.ClientError as e:
                result = (e.response["Error"]["Code"], name, e.response["Error"]["Message"])
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=update, args=(name, "%d-%d" % (round_, side)))
                   for name in stacks for side in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        pairs += len(stacks)
        for code, name, msg in outcomes:
            if code == "ok":
                continue
            assert code == "ValidationError", (code, msg)
            busy = "Stack:%s is in UPDATE_IN_PROGRESS state and can not be updated." % ids[name]
            cleanup = "Stack:%s is in UPDATE_COMPLETE_CLEANUP_IN_PROGRESS state and can not be updated." % ids[name]
            # (The other call may also have finished before this one took
            # the stack: then it was prepared against a stale stack.)
            stale = msg.startswith("Stack:%s changed while the update was being prepared" % ids[name])
            assert msg in (busy, cleanup) or stale, msg
            refused += 1
        for name in stacks:
            assert settled(name) == "UPDATE_COMPLETE", name
    assert pairs == 300 and refused >= 100, (pairs, refused)
    # A second delete of a stack being deleted is a no-op.
    barrier = threading.Barrier(2 * len(stacks))

    def delete(name):
        barrier.wait()
        cf.delete_stack(StackName=name)

    threads = [threading.Thread(target=delete, args=(name,)) for name in stacks for _ in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in stacks:
        assert settled(ids[name]) == "DELETE_COMPLETE", name


SIGNALS = """
Resources:
  Handle:
    Type: AWS::CloudFormation::WaitConditionHandle
  Wait:
    Type: AWS::CloudFormation::WaitCondition
    Properties: {Handle: !Ref Handle, Timeout: '120'}
  Box:
    Type: Cairn::Test::Resource
    DependsOn: Wait
    CreationPolicy:
      ResourceSignal: {Count: 2, Timeout: PT2M}
    Properties: {Value: boxed}
Outputs:
  Data: {Value: !GetAtt Wait.Data}
"""


def signals():
    cf.create_stack(StackName="sig", TemplateBody=SIGNALS, TimeoutInMinutes=10)

    def resource(logical):
        for _ in range(300):
            try:
                r = cf.describe_stack_resource(StackName="sig", LogicalResourceId=logical)["StackResourceDetail"]
                if r.get("PhysicalResourceId"):
                    return r
            except ClientError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"{logical} was never made")

    # The handle's URL is on the server's own address; a PUT with the body
    # cfn-signal sends is kept before it is answered.
    url = resource("Handle")["PhysicalResourceId"]
    assert url.startswith(ENDPOINT + "/cfn-signal/"), url
    put = urllib.request.Request(
        url,
        data=b'{"Status":"SUCCESS","Reason":"booted","UniqueId":"boot","Data":"ready"}',
        method="PUT",
        headers={"Content-Type": ""},
    )
    assert urllib.request.urlopen(put).status == 200

    resource("Box")
    for unique_id in ("i-1", "i-1"):
        cf.signal_resource(StackName="sig", LogicalResourceId="Box", UniqueId=unique_id, Status="SUCCESS")
    time.sleep(0.8)
    assert cf.describe_stacks(StackName="sig")["Stacks"][0]["StackStatus"] == "CREATE_IN_PROGRESS"
    assert error(cf.signal_resource, StackName="sig", LogicalResourceId="Box", UniqueId="i-2", Status="MAYBE")[0] == "ValidationError"
    cf.signal_resource(StackName="sig", LogicalResourceId="Box", UniqueId="i-2", Status="SUCCESS")
    cf.get_waiter("stack_create_complete").wait(StackName="sig", WaiterConfig=FAST)

    outputs = {o["OutputKey"]: o["OutputValue"] for o in cf.describe_stacks(StackName="sig")["Stacks"][0]["Outputs"]}
    assert json.loads(outputs["Data"]) == {"boot": "ready"}, outputs
    box = [(e["ResourceStatus"], e.get("ResourceStatusReason", "")) for e in events("sig") if e["LogicalResourceId"] == "Box"]
    assert box == [
        ("CREATE_IN_PROGRESS", ""),
        ("CREATE_IN_PROGRESS", "Resource creation Initiated"),
        ("CREATE_IN_PROGRESS", "Received SUCCESS signal with UniqueId i-1"),
        ("CREATE_IN_PROGRESS", "Received SUCCESS signal with UniqueId i-2"),
        ("CREATE_COMPLETE", ""),
    ], box
    assert error(cf.signal_resource, StackName="sig", LogicalResourceId="Box", UniqueId="i-3", Status="SUCCESS") == (
        "ValidationError", "Resource Box is in CREATE_COMPLETE state and cannot be signaled", 400)
    assert error(cf.signal_resource, StackName="nope", LogicalResourceId="Box", UniqueId="i-3", Status="SUCCESS")[0] == "ValidationError"
    # The aws CLI's signal-resource reaches the same check.
    rc, _, err = aws("cloudformation", "signal-resource", "--stack-name", "sig", "--logical-resource-id", "Box",
                     "--unique-id", "cli", "--status", "SUCCESS")
    assert rc != 0 and "Resource Box is in CREATE_COMPLETE state and cannot be signaled" in err, (rc, err)
    cf.delete_stack(StackName="sig")
    cf.get_waiter("stack_delete_complete").wait(StackName="sig", WaiterConfig=FAST)


NESTED_ROOT = """
Parameters:
  V: {Type: String, Default: hello}
Resources:
  Child:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: PATH
      Parameters: {V: !Ref V}
Outputs:
  Out: {Value: !GetAtt Child.Outputs.V}
"""

NESTED_CHILD = """
Parameters:
  V: {Type: String}
Resources:
  R: {Type: Cairn::Test::Resource, Properties: {Value: !Ref V}}
Outputs:
  V: {Value: !GetAtt R.Value}
"""


def nested():
    os.makedirs("templates", exist_ok=True)
    with open("templates/root.yaml", "w") as f:
        f.write(NESTED_ROOT.replace("PATH", "child.yaml"))
    with open("templates/child.yaml", "w") as f:
        f.write(NESTED_CHILD)
    with open("outside.yaml", "w") as f:
        f.write(NESTED_CHILD)
    cf.create_stack(StackName="tree", TemplateURL="file://" + os.path.abspath("templates/root.yaml"))
    cf.get_waiter("stack_create_complete").wait(StackName="tree", WaiterConfig=FAST)
    root = cf.describe_stacks(StackName="tree")["Stacks"][0]
    assert "ParentId" not in root and "RootId" not in root, root
    assert root["Outputs"][0]["OutputValue"] == "hello", root
    child_id = cf.list_stack_resources(StackName="tree")["StackResourceSummaries"][0]["PhysicalResourceId"]
    child = cf.describe_stacks(StackName=child_id)["Stacks"][0]
    assert child["StackName"].startswith("tree-Child-"), child
    assert (child["ParentId"], child["RootId"]) == (root["StackId"], root["StackId"]), child
    summaries = {x["StackName"]: x for x in cf.list_stacks()["StackSummaries"]}
    assert summaries[child["StackName"]]["ParentId"] == root["StackId"]
    code, message, status = error(cf.delete_stack, StackName=child_id)
    assert (code, status) == ("ValidationError", 400), (code, message)
    assert "delete the root stack [tree] instead" in message, message
    # A TemplateBody's relative TemplateURL is read from [server] template_dirs.
    cf.update_stack(StackName="tree", TemplateBody=NESTED_ROOT.replace("PATH", "child.yaml"),
                    Parameters=[{"ParameterKey": "V", "ParameterValue": "world"}])
    cf.get_waiter("stack_update_complete").wait(StackName="tree", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="tree")["Stacks"][0]["Outputs"][0]["OutputValue"] == "world"
    events = [e for e in cf.describe_stack_events(StackName=child_id)["StackEvents"]]
    assert any(e["LogicalResourceId"] == "R" and e["ResourceStatus"] == "UPDATE_COMPLETE" for e in events), events
    # IncludeNestedStacks: the child gets a change set of its own.
    cs = cf.create_change_set(StackName="tree", ChangeSetName="deep", TemplateBody=NESTED_ROOT.replace("PATH", "child.yaml"),
                              Parameters=[{"ParameterKey": "V", "ParameterValue": "again"}], IncludeNestedStacks=True)
    top = cf.describe_change_set(ChangeSetName=cs["Id"])
    assert top["IncludeNestedStacks"] is True, top
    child_set = top["Changes"][0]["ResourceChange"]["ChangeSetId"]
    inner = cf.describe_change_set(ChangeSetName=child_set)
    assert (inner["ParentChangeSetId"], inner["RootChangeSetId"]) == (cs["Id"], cs["Id"]), inner
    assert [c["ResourceChange"]["LogicalResourceId"] for c in inner["Changes"]] == ["R"], inner
    cf.execute_change_set(ChangeSetName=cs["Id"])
    cf.get_waiter("stack_update_complete").wait(StackName="tree", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName="tree")["Stacks"][0]["Outputs"][0]["OutputValue"] == "again"
    # A nested template outside those directories is refused.
    code, message, _ = error(cf.update_stack, StackName="tree", TemplateBody=NESTED_ROOT.replace("PATH", "../outside.yaml"))
    assert code == "ValidationError" and "is not under a directory of [nested] template_dirs" in message, message
    cf.delete_stack(StackName="tree")
    cf.get_waiter("stack_delete_complete").wait(StackName="tree", WaiterConfig=FAST)
    assert cf.describe_stacks(StackName=child_id)["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE"



FILE_MODE_RULES = """let files = Resources.*[ Type == 'Cairn::Local::File' ]
rule FILE_MODE_0600 when %files !empty {
    %files.Properties.Mode == "0600"
    << every Cairn::Local::File must have Mode 0600 >>
}
"""


def hooks():
    """A Guard hook (AWS::CloudFormation::GuardHook, rules from a file)
    judges every Cairn::Local::File of the state before its create: FAIL
    refuses a non-compliant one before the provider makes it, and the
    stack rolls back with the rule's message; WARN lets it through with
    the verdict in the events (DescribeStackEvents' Hook* fields)."""
    with open("mode.guard", "w") as f:
        f.write(FILE_MODE_RULES)
    hook = ("Parameters:\n  Mode: {Type: String}\nResources:\n  FileMode:\n"
            "    Type: AWS::CloudFormation::GuardHook\n    Properties:\n"
            "      Alias: Private::Guard::FileMode\n"
            "      RuleLocation: {Uri: 'file://%s'}\n"
            "      FailureMode: !Ref Mode\n      TargetOperations: [RESOURCE]\n"
            "      TargetFilters: {Actions: [CREATE, UPDATE]}\n"
            "      ExecutionRole: arn:aws:iam::123456789012:role/hook\n"
            "Outputs:\n  Arn: {Value: !GetAtt FileMode.HookArn}\n") % os.path.abspath("mode.guard")
    mode = lambda m: [{"ParameterKey": "Mode", "ParameterValue": m}]
    cf.create_stack(StackName="guards", TemplateBody=hook, Parameters=mode("FAIL"))
    cf.get_waiter("stack_create_complete").wait(StackName="guards", WaiterConfig=FAST)
    arn = cf.describe_stacks(StackName="guards")["Stacks"][0]["Outputs"][0]["OutputValue"]
    assert arn == "arn:aws:cloudformation:us-east-1:123456789012:type/hook/Private-Guard-FileMode", arn
    secret = os.path.abspath("secret.txt")
    app = ("Resources:\n  Secret:\n    Type: Cairn::Local::File\n"
           "    Properties: {Path: '%s', Content: s3cret, Mode: '0644'}\n") % secret
    cf.create_stack(StackName="app", TemplateBody=app)
    try:
        cf.get_waiter("stack_create_complete").wait(StackName="app", WaiterConfig=FAST)
        raise AssertionError("a create the hook refused completed")
    except WaiterError:
        pass
    assert cf.describe_stacks(StackName="app")["Stacks"][0]["StackStatus"] == "ROLLBACK_COMPLETE"
    assert not os.path.exists(secret), "the provider made the file the hook refused"
    verdict = "rule FILE_MODE_0600: every Cairn::Local::File must have Mode 0600"
    hooked = [(e["ResourceStatus"], e["HookType"], e["HookStatus"], e.get("HookStatusReason"),
               e["HookInvocationPoint"], e["HookFailureMode"])
              for e in events("app") if "HookType" in e]
    assert hooked == [
        ("CREATE_IN_PROGRESS", "Private::Guard::FileMode", "HOOK_IN_PROGRESS", None, "PRE_PROVISION", "FAIL"),
        ("CREATE_IN_PROGRESS", "Private::Guard::FileMode", "HOOK_COMPLETE_FAILED", verdict, "PRE_PROVISION", "FAIL"),
    ], hooked
    failed = [e["ResourceStatusReason"] for e in events("app") if e["ResourceStatus"] == "CREATE_FAILED"]
    assert failed == ["The following hook(s) failed: [Private::Guard::FileMode]. Private::Guard::FileMode: " + verdict], failed
    cf.delete_stack(StackName="app")
    cf.get_waiter("stack_delete_complete").wait(StackName="app", WaiterConfig=FAST)
    # Under WARN the create goes on, the verdict in its events.
    cf.update_stack(StackName="guards", TemplateBody=hook, Parameters=mode("WARN"))
    cf.get_waiter("stack_update_complete").wait(StackName="guards", WaiterConfig=FAST)
    cf.create_stack(StackName="app", TemplateBody=app)
    cf.get_waiter("stack_create_complete").wait(StackName="app", WaiterConfig=FAST)
    assert os.path.exists(secret)
    warned = [(e["HookStatus"], e.get("HookStatusReason"), e["HookFailureMode"])
              for e in events("app") if "HookType" in e]
    assert warned == [
        ("HOOK_IN_PROGRESS", None, "WARN"),
        ("HOOK_COMPLETE_FAILED", verdict + " (failure mode WARN: the create goes on)", "WARN"),
    ], warned
    # The hook goes with its stack: nothing judges the next create.
    for stack in ["app", "guards"]:
        cf.delete_stack(StackName=stack)
        cf.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig=FAST)
    cf.create_stack(StackName="app", TemplateBody=app)
    cf.get_waiter("stack_create_complete").wait(StackName="app", WaiterConfig=FAST)
    assert not [e for e in events("app") if "HookType" in e]
    cf.delete_stack(StackName="app")
    cf.get_waiter("stack_delete_complete").wait(StackName="app", WaiterConfig=FAST)
    lambda_hooks()


def lambda_hooks():
    """A Lambda hook (AWS::CloudFormation::LambdaHook, its function a
    webhook): it answers IN_PROGRESS twice and is invoked again with its
    callbackContext and token, then refuses a non-compliant file."""
    import http.server
    import threading
    seen = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            event = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            ctx = event["requestContext"].get("callbackContext") or {}
            seen.append((event["clientRequestToken"], event["requestContext"]["invocation"], ctx))
            step = ctx.get("step", 0)
            props = event["requestData"]["targetModel"].get("resourceProperties", {})
            if step < 2:
                answer = {"hookStatus": "IN_PROGRESS", "callbackContext": {"step": step + 1},
                          "callbackDelaySeconds": 0}
            elif props.get("Mode") != "0600":
                answer = {"hookStatus": "FAILED", "errorCode": "NonCompliant",
                          "message": "Mode must be 0600"}
            else:
                answer = {"hookStatus": "SUCCESS"}
            answer["clientRequestToken"] = event["clientRequestToken"]
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/" % server.server_address[1]
    hook = ("Resources:\n  FileMode:\n    Type: AWS::CloudFormation::LambdaHook\n"
            "    Properties:\n      Alias: Private::Lambda::FileMode\n"
            "      LambdaFunction: '%s'\n      ExecutionRole: arn:aws:iam::123456789012:role/hook\n"
            "      FailureMode: FAIL\n      TargetOperations: [RESOURCE]\n"
            "      TargetFilters: {TargetNames: [Cairn::Local::File]}\n") % url
    cf.create_stack(StackName="lambdas", TemplateBody=hook)
    cf.get_waiter("stack_create_complete").wait(StackName="lambdas", WaiterConfig=FAST)
    secret = os.path.abspath("lambda-secret.txt")
    app = ("Resources:\n  Secret:\n    Type: Cairn::Local::File\n"
           "    Properties: {Path: '%s', Content: s3cret, Mode: '%s'}\n")
    cf.create_stack(StackName="judged", TemplateBody=app % (secret, "0600"))
    cf.get_waiter("stack_create_complete").wait(StackName="judged", WaiterConfig=FAST)
    assert [(n, c) for _, n, c in seen] == [(1, {}), (2, {"step": 1}), (3, {"step": 2})], seen
    assert len({t for t, _, _ in seen}) == 1, seen
    hooked = [(e["HookType"], e["HookStatus"]) for e in events("judged") if "HookType" in e]
    assert hooked == [("Private::Lambda::FileMode", "HOOK_IN_PROGRESS"),
                      ("Private::Lambda::FileMode", "HOOK_COMPLETE_SUCCEEDED")], hooked
    cf.create_stack(StackName="open", TemplateBody=app % (os.path.abspath("open.txt"), "0644"))
    try:
        cf.get_waiter("stack_create_complete").wait(StackName="open", WaiterConfig=FAST)
        raise AssertionError("a create the hook refused completed")
    except WaiterError:
        pass
    failed = [e["ResourceStatusReason"] for e in events("open") if e["ResourceStatus"] == "CREATE_FAILED"]
    assert failed == ["The following hook(s) failed: [Private::Lambda::FileMode]. "
                      "Private::Lambda::FileMode: Mode must be 0600"], failed
    assert not os.path.exists(os.path.abspath("open.txt"))
    for stack in ["judged", "open", "lambdas"]:
        cf.delete_stack(StackName=stack)
        cf.get_waiter("stack_delete_complete").wait(StackName=stack, WaiterConfig=FAST)
    server.shutdown()


def trail(**kw):
    return boto3.client(
        "cloudtrail",
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        config=Config(retries={"max_attempts": 1}),
        **kw,
    )


def audit():
    """The audit trail through CloudTrail's LookupEvents (the Rust test made
    the calls: mine created, updated and deleted from the console; theirs
    created and deleted)."""
    limited = dict(aws_access_key_id="AKIDLIMITED", aws_secret_access_key="limited-secret")
    code, msg, status = error(client(**limited).create_stack, StackName="other",
                              TemplateBody="Resources: {R: {Type: Cairn::Test::Resource}}")
    assert (code, status) == ("AccessDenied", 403), (code, msg)
    ct = trail()
    events = ct.lookup_events()["Events"]
    seen = [(e["EventName"], e["Resources"][0]["ResourceName"] if e["Resources"] else None) for e in events]
    assert seen == [("CreateStack", "other"), ("DeleteStack", "mine"), ("ConsoleLogin", None),
                    ("ConsoleLogin", None), ("DeleteStack", "theirs"), ("CreateStack", "theirs"),
                    ("UpdateStack", "mine"), ("CreateStack", "mine")], seen
    first = events[-1]
    assert first["AccessKeyId"] == "AKIDOPS" and first["Username"] == "ops", first
    assert first["EventSource"] == "cloudformation.amazonaws.com" and first["ReadOnly"] == "false", first
    assert first["Resources"][0]["ResourceType"] == "AWS::CloudFormation::Stack", first
    assert isinstance(first["EventTime"], datetime.datetime), first
    record = json.loads(first["CloudTrailEvent"])
    assert record["sourceIPAddress"] == "127.0.0.1", record
    assert record["requestParameters"]["parameters"] == [
        {"parameterKey": "Pw", "parameterValue": "HIDDEN_DUE_TO_SECURITY_REASONS"}], record
    assert record["eventID"] == first["EventId"], record
    # One attribute at a time, as CloudTrail takes them.
    only = ct.lookup_events(LookupAttributes=[{"AttributeKey": "ResourceName", "AttributeValue": "mine"}])
    assert [e["EventName"] for e in only["Events"]] == ["DeleteStack", "UpdateStack", "CreateStack"], only
    by_key = ct.lookup_events(LookupAttributes=[{"AttributeKey": "AccessKeyId", "AttributeValue": "AKIDLIMITED"}])
    assert [e["EventName"] for e in by_key["Events"]] == ["CreateStack"], by_key
    assert ct.lookup_events(LookupAttributes=[{"AttributeKey": "ReadOnly", "AttributeValue": "true"}])["Events"] == []
    by_id = ct.lookup_events(LookupAttributes=[{"AttributeKey": "EventId", "AttributeValue": first["EventId"]}])
    assert [e["EventId"] for e in by_id["Events"]] == [first["EventId"]], by_id
    # Pages, and boto3's paginator over them.
    page = ct.lookup_events(MaxResults=5)
    assert len(page["Events"]) == 5 and page["NextToken"], page
    rest = ct.lookup_events(MaxResults=5, NextToken=page["NextToken"])
    assert len(rest["Events"]) == 3 and "NextToken" not in rest, rest
    paged = [e["EventId"] for p in ct.get_paginator("lookup_events").paginate(PaginationConfig={"PageSize": 2})
             for e in p["Events"]]
    assert paged == [e["EventId"] for e in events], paged
    start = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    assert len(ct.lookup_events(StartTime=start)["Events"]) == 8
    later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)
    assert ct.lookup_events(StartTime=later)["Events"] == []
    # CloudTrail's errors.
    code, msg, status = error(ct.lookup_events, LookupAttributes=[
        {"AttributeKey": "EventName", "AttributeValue": "A"}, {"AttributeKey": "Username", "AttributeValue": "B"}])
    assert (code, status) == ("InvalidLookupAttributesException", 400), (code, msg)
    code, msg, status = error(ct.lookup_events, StartTime=later, EndTime=start)
    assert (code, msg) == ("InvalidTimeRangeException", "Start time must be less than or equal to end time"), msg
    # A key limited to `mine` reads only mine's records.
    mine = trail(**limited).lookup_events()["Events"]
    assert [(e["EventName"], e["Resources"][0]["ResourceName"]) for e in mine] == [
        ("DeleteStack", "mine"), ("UpdateStack", "mine"), ("CreateStack", "mine")], mine


if __name__ == "__main__":
    globals()[sys.argv[1]]()
    print("ok")
