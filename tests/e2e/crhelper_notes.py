"""A custom-resource handler written for AWS Lambda with crhelper, as it
would be deployed there (crhelper's defaults, sleep_on_delete 120 s
included). Custom::Note: a file per note in $NOTES_DIR named by Name, holding
Text. A new Name is a new note (a new PhysicalResourceId, the old one
deleted by the stack's cleanup); an update answers the previous Text (from
OldResourceProperties) as the attribute Old; Fail: create|update makes that
request fail."""

import os

from crhelper import CfnResource

helper = CfnResource()


def _write(props):
    with open(os.path.join(os.environ["NOTES_DIR"], props["Name"]), "w") as f:
        f.write(props.get("Text", ""))
    helper.Data["Text"] = props.get("Text", "")
    return "note-" + props["Name"]


@helper.create
def create(event, context):
    if event["ResourceProperties"].get("Fail") == "create":
        raise ValueError("told to fail on create")
    return _write(event["ResourceProperties"])


@helper.update
def update(event, context):
    props = event["ResourceProperties"]
    if props.get("Fail") == "update":
        raise ValueError("told to fail on update")
    helper.Data["Old"] = event["OldResourceProperties"].get("Text", "")
    return _write(props)


@helper.delete
def delete(event, context):
    name = event["PhysicalResourceId"][len("note-"):]
    path = os.path.join(os.environ["NOTES_DIR"], name)
    if event["PhysicalResourceId"].startswith("note-") and os.path.exists(path):
        os.remove(path)


def handler(event, context):
    helper(event, context)
