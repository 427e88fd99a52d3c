"""A stand-in for a cloud's AWS::EC2::Instance provider, on Cairn's Python
SDK, for the end-to-end tests of Heat's AWS autoscaling groups: each
instance is kept in memory with the properties it was made with, gets the
id `i-<n>` and the public address 10.0.0.<n>."""

import threading

from cairn_provider import Json, List, Provider, ResourceType, Result, String, serve

INSTANCE = ResourceType(
    "AWS::EC2::Instance",
    attributes={"PublicIp": "its public address", "PrivateIp": "its private address",
                "Made": "the properties it was made with, as JSON"},
    properties={
        "ImageId": String(required=True, create_only=True),
        "InstanceType": String(create_only=True),
        "KeyName": String(create_only=True),
        "UserData": String(create_only=True),
        "SecurityGroups": List(String(), create_only=True),
        "BlockDeviceMappings": Json(create_only=True),
        "Tags": Json(),
    })


class Instances(Provider):
    types = [INSTANCE]

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0

    def create(self, request):
        import json
        with self.lock:
            self.count += 1
            n = self.count
        made = json.dumps(request.properties, sort_keys=True)
        return Result("i-%d" % n, {"PublicIp": "10.0.0.%d" % n, "PrivateIp": "192.168.0.%d" % n,
                                   "Made": made})

    def update(self, request):
        return Result(request.physical_id, {})

    def delete(self, request):
        pass


if __name__ == "__main__":
    serve(Instances())
