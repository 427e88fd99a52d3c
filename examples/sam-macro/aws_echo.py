"""A provider that records the AWS resource types a SAM template expands
into, for trying SAM on Cairn without AWS: each resource is kept in memory
with its properties, and answers the attributes templates read of it
(`Arn`, and a REST API's `RootResourceId`). Serve it with the Python SDK:

    python3 aws_echo.py --listen 127.0.0.1:8092 --secret S

    [[providers]]
    kind = "webhook"
    url = "http://127.0.0.1:8092/"
    secret = "S"
"""

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk-python"))

from cairn_provider import Provider, ResourceType, Result, serve  # noqa: E402

TYPES = {
    "AWS::IAM::Role": ("iam", "role"),
    "AWS::Lambda::Function": ("lambda", "function"),
    "AWS::Lambda::Permission": ("lambda", "permission"),
    "AWS::ApiGateway::RestApi": ("apigateway", "restapis"),
    "AWS::ApiGateway::Deployment": ("apigateway", "deployments"),
    "AWS::ApiGateway::Stage": ("apigateway", "stages"),
    "AWS::DynamoDB::Table": ("dynamodb", "table"),
}


def attributes(request, physical):
    """The ARN in the stack's region and account, and a root resource id."""
    service, kind = TYPES[request.type_name]
    region, account = (request.stack_id or "").split(":")[3:5] or ("us-east-1", "123456789012")
    return {"Arn": "arn:aws:%s:%s:%s:%s/%s" % (service, region, account, kind, physical),
            "RootResourceId": "root"}


class AwsEcho(Provider):
    types = [
        ResourceType(name, additional_properties=True,
                     attributes={"Arn": "the resource's ARN", "RootResourceId": "a REST API's root"})
        for name in TYPES
    ]

    def __init__(self):
        self.made = {}

    def create(self, request):
        physical = "%s-%s" % (request.logical_id, uuid.uuid4().hex[:8])
        self.made[physical] = request.properties
        return Result(physical, attributes(request, physical))

    def update(self, request):
        self.made[request.physical_id] = request.properties
        return Result(request.physical_id, attributes(request, request.physical_id))

    def delete(self, request):
        self.made.pop(request.physical_id, None)


if __name__ == "__main__":
    serve(AwsEcho())
