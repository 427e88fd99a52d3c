"""A Lambda handler for the end-to-end tests, written as handlers for
CloudFormation are: not idempotent by RequestId. Each Create makes a new
file `thing-<uuid>` in $THINGS_DIR (after `Sleep` seconds) and answers with
its name; Delete removes the file it names. `Fail: "true"` fails a Create;
`ReplaceOnUpdate: "true"` makes an Update make a new thing (after `Sleep`).
Every request is appended to $THINGS_DIR/../requests.jsonl."""

import json
import os
import time
import uuid

import cfnresponse


def make_thing(event, context, things):
    """Makes a new thing (after `Sleep` seconds) and answers with its name."""
    time.sleep(float(event["ResourceProperties"].get("Sleep", "0")))
    name = "thing-" + str(uuid.uuid4())
    with open(os.path.join(things, name), "w") as f:
        f.write(event["RequestId"])
    cfnresponse.send(event, context, cfnresponse.SUCCESS, {}, name)


def handler(event, context):
    things = os.environ["THINGS_DIR"]
    props = event["ResourceProperties"]
    with open(os.path.join(things, "..", "requests.jsonl"), "a") as log:
        log.write(json.dumps({k: event.get(k) for k in ("RequestType", "RequestId", "LogicalResourceId", "PhysicalResourceId")}) + "\n")
    if event["RequestType"] == "Delete":
        path = os.path.join(things, event["PhysicalResourceId"])
        if os.path.exists(path):
            os.remove(path)
        cfnresponse.send(event, context, cfnresponse.SUCCESS, {}, event["PhysicalResourceId"])
        return
    if event["RequestType"] == "Create":
        if props.get("Fail") == "true":
            cfnresponse.send(event, context, cfnresponse.FAILED, {}, None, reason="this thing refuses to be made")
            return
        make_thing(event, context, things)
        return
    if props.get("ReplaceOnUpdate") == "true":
        # A handler that replaces on Update: a new thing, a new physical id
        # (CloudFormation then deletes the old one in its cleanup).
        make_thing(event, context, things)
        return
    cfnresponse.send(event, context, cfnresponse.SUCCESS, {}, event["PhysicalResourceId"])
