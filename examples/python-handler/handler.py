"""A custom-resource handler written for AWS Lambda, unchanged: it answers
with the `cfnresponse` module from PyPI. It serves Custom::Greeting (Name,
Excited) with the attribute Message; a new Name is a new greeting (a new
PhysicalResourceId, so Cairn deletes the old one during cleanup)."""

import cfnresponse


def handler(event, context):
    props = event["ResourceProperties"]
    try:
        if event["RequestType"] == "Delete":
            cfnresponse.send(event, context, cfnresponse.SUCCESS, {}, event["PhysicalResourceId"])
            return
        name = props["Name"]
        # CloudFormation sends booleans as strings.
        excited = props.get("Excited", "false") == "true"
        message = "Hello, %s%s" % (name, "!" if excited else ".")
        cfnresponse.send(event, context, cfnresponse.SUCCESS, {"Message": message}, "py-greeting-" + name)
    except Exception as e:  # the reason becomes the resource's status reason
        cfnresponse.send(event, context, cfnresponse.FAILED, {}, event.get("PhysicalResourceId"), reason=str(e))
