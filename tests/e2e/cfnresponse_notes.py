"""The handler of crhelper_notes.py written with AWS's cfnresponse module,
as it would be deployed on Lambda."""

import os

import cfnresponse


def handler(event, context):
    props = event["ResourceProperties"]
    notes = os.environ["NOTES_DIR"]
    try:
        kind = event["RequestType"]
        if kind == "Delete":
            pid = event["PhysicalResourceId"]
            path = os.path.join(notes, pid[len("note-"):])
            if pid.startswith("note-") and os.path.exists(path):
                os.remove(path)
            cfnresponse.send(event, context, cfnresponse.SUCCESS, {}, pid)
            return
        if props.get("Fail") == kind.lower():
            raise ValueError("told to fail on " + kind.lower())
        with open(os.path.join(notes, props["Name"]), "w") as f:
            f.write(props.get("Text", ""))
        data = {"Text": props.get("Text", "")}
        if kind == "Update":
            data["Old"] = event["OldResourceProperties"].get("Text", "")
        cfnresponse.send(event, context, cfnresponse.SUCCESS, data, "note-" + props["Name"])
    except Exception as e:
        cfnresponse.send(event, context, cfnresponse.FAILED, {}, event.get("PhysicalResourceId"),
                         reason=str(e))
