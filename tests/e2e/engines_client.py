"""boto3 against several `cairn serve` engines behind one address, for the
several-engines tests:

    python3 engines_client.py create ENDPOINT COUNT TEMPLATE
    python3 engines_client.py wait ENDPOINT COUNT STATUS [--lost-creates-roll-back]
    python3 engines_client.py delete ENDPOINT COUNT

`create` starts stacks s0..s<COUNT-1> (all at once, from threads, as many
teams would); `wait` waits until each is out of *_IN_PROGRESS, checks that
its status is STATUS and that its events are exactly one stack
CREATE_IN_PROGRESS first, one CREATE_COMPLETE last and, for every
resource, CREATE_IN_PROGRESS, CREATE_IN_PROGRESS "Resource creation
Initiated", CREATE_COMPLETE (no duplicate, no gap, distinct event ids), and
prints {"done": {stack: {logical id: [type, physical id]}}, "lost": {}} as
JSON. With --lost-creates-roll-back a stack may instead be ROLLBACK_COMPLETE
when a custom-resource Create timed out without a response ("lost": {stack:
{logical id: request id}}); `delete` deletes
them all and waits for DELETE_COMPLETE. Exit status 0 means every check held.
"""

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
from botocore.config import Config

ACTION, ENDPOINT, COUNT = sys.argv[1], sys.argv[2], int(sys.argv[3])
NAMES = [f"s{i}" for i in range(COUNT)]
cf = boto3.client(
    "cloudformation",
    endpoint_url=ENDPOINT,
    region_name="us-east-1",
    # Reads and deletes are retried (standard mode: on a 502 when an engine
    # dies mid-request); creates are sent before any engine is killed.
    config=Config(retries={"max_attempts": 4, "mode": "standard"}, max_pool_connections=COUNT),
)


def events(stack):
    pages = cf.get_paginator("describe_stack_events").paginate(StackName=stack)
    out = [e for p in pages for e in p["StackEvents"]]
    out.reverse()
    return out


def status(stack):
    return cf.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]


def wait_all(done, seconds=240):
    deadline = time.time() + seconds
    left = list(NAMES)
    while left and time.time() < deadline:
        left = [n for n in left if not done(n)]
        if left:
            time.sleep(0.5)
    assert not left, f"still in progress after {seconds} s: {[(n, status(n)) for n in left]}"


def check_events(stack):
    evs = events(stack)
    ids = [e["EventId"] for e in evs]
    assert len(ids) == len(set(ids)), f"{stack}: duplicate event ids"
    seq = [(e["LogicalResourceId"], e["ResourceStatus"], e.get("ResourceStatusReason")) for e in evs]
    assert seq[0] == (stack, "CREATE_IN_PROGRESS", "User Initiated"), f"{stack}: {seq[0]}"
    assert seq[-1][:2] == (stack, "CREATE_COMPLETE"), f"{stack}: {seq[-1]}"
    per = {}
    for logical, st, reason in seq[1:-1]:
        assert logical != stack, f"{stack}: a stack event in the middle: {st} {reason}"
        per.setdefault(logical, []).append((st, reason))
    resources = cf.describe_stack_resources(StackName=stack)["StackResources"]
    assert sorted(per) == sorted(r["LogicalResourceId"] for r in resources), f"{stack}: {sorted(per)}"
    for logical, got in per.items():
        want = [
            ("CREATE_IN_PROGRESS", None),
            ("CREATE_IN_PROGRESS", "Resource creation Initiated"),
            ("CREATE_COMPLETE", None),
        ]
        assert got == want, f"{stack}/{logical}: {got}"
    return {r["LogicalResourceId"]: [r["ResourceType"], r["PhysicalResourceId"]] for r in resources}


LOST = "CloudFormation did not receive a response from your Custom Resource. Please check your logs for requestId ["


def lost_creates(stack):
    """A stack rolled back because a Create the killed engine recorded as
    sent never reached the handler (the engine that took over cannot send it
    again, and waits for its ServiceTimeout): {logical id: request id} of
    those Creates. Any other failure fails the check."""
    out = {}
    for e in events(stack):
        if e["ResourceStatus"] != "CREATE_FAILED" or e["LogicalResourceId"] == stack:
            continue
        reason = e.get("ResourceStatusReason") or ""
        if reason.startswith(LOST):
            out[e["LogicalResourceId"]] = reason[len(LOST):].split("]", 1)[0]
        elif reason != "Resource creation cancelled":
            raise AssertionError(f"{stack}/{e['LogicalResourceId']} failed otherwise: {reason}")
    assert out, f"{stack} rolled back with no lost Create"
    return out


def main():
    if ACTION == "create":
        body = open(sys.argv[4]).read()
        with ThreadPoolExecutor(COUNT) as pool:
            ids = list(pool.map(lambda n: cf.create_stack(StackName=n, TemplateBody=body)["StackId"], NAMES))
        assert len(set(ids)) == COUNT
        print(json.dumps(ids))
    elif ACTION == "wait":
        want = sys.argv[4]
        wait_all(lambda n: not status(n).endswith("_IN_PROGRESS"))
        lost = {}
        if "--lost-creates-roll-back" in sys.argv[5:]:
            for n in NAMES:
                if status(n) == "ROLLBACK_COMPLETE":
                    lost[n] = lost_creates(n)
        wrong = [(n, status(n)) for n in NAMES if status(n) != want and n not in lost]
        assert not wrong, f"not {want}: {wrong}"
        done = {n: check_events(n) for n in NAMES if n not in lost}
        print(json.dumps({"done": done, "lost": lost}))
    elif ACTION == "delete":
        ids = {n: cf.describe_stacks(StackName=n)["Stacks"][0]["StackId"] for n in NAMES}
        # From threads: each answer may wait for its operation ([server]
        # answer_within_ms), as the creates do.
        with ThreadPoolExecutor(COUNT) as pool:
            list(pool.map(lambda n: cf.delete_stack(StackName=n), NAMES))
        # Deleted stacks are found by id only.
        wait_all(lambda n: cf.describe_stacks(StackName=ids[n])["Stacks"][0]["StackStatus"] == "DELETE_COMPLETE")
        print("deleted")
    else:
        raise SystemExit(f"unknown action {ACTION}")


main()
