"""`AWS::Serverless-2016-10-31` as a Cairn macro: AWS's own SAM translator
(PyPI's `aws-sam-translator`, which runs offline) expands a SAM template's
`AWS::Serverless::*` resources into the CloudFormation resources they
stand for (functions, roles, APIs, tables, …). Serve it and name it in
Cairn's configuration:

    pip install aws-sam-translator
    python3 sam.py --listen 127.0.0.1:8091 --secret S

    [[macros]]
    name = "AWS::Serverless-2016-10-31"
    url = "http://127.0.0.1:8091/"

What the expanded template needs then is providers for the AWS types it
makes (`aws_echo.py` beside this file records them, for trying it out)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "sdk-python"))

from cairn_provider import Macro, serve_macro  # noqa: E402

SAM = "AWS::Serverless-2016-10-31"


class ManagedPolicies:
    """The AWS managed policies SAM's policy templates name, by ARN: the
    translator asks IAM for them, which a Cairn machine cannot reach."""

    def load(self):
        return {}


class Serverless(Macro):
    def transform(self, fragment, request):
        # The translator reads the region from the environment (boto3's).
        os.environ.setdefault("AWS_DEFAULT_REGION", request.region or "us-east-1")
        from samtranslator.translator.transform import transform
        template = dict(fragment, Transform=SAM)
        parameters = dict(request.template_parameter_values)
        parameters.update({"AWS::Region": request.region, "AWS::AccountId": request.account_id,
                           "AWS::Partition": "aws"})
        expanded = transform(template, parameters, ManagedPolicies())
        expanded.pop("Transform", None)
        return expanded


if __name__ == "__main__":
    serve_macro(Serverless())
