"""Custom::Greeting on Cairn's Python SDK: the provider of
examples/webhook_handler.rs, in Python. `Name` (CreateOnly: a new name is a
new greeting), `Excited` (Boolean, in place); attribute `Message`; drift
against what it holds (in memory: a restart forgets every greeting).

    pip install ./sdk-python
    python3 examples/python-provider/greetings.py --listen 127.0.0.1:8082 --secret s3cret
    cairn provider test --webhook http://127.0.0.1:8082/ --secret s3cret --drift --read
"""

import threading

from cairn_provider import (Boolean, NotFound, Provider, ResourceType, Result, String, compare,
                            deleted, found, serve)

GREETING = ResourceType("Custom::Greeting", attributes={"Message": "the greeting"}, properties={
    "Name": String(required=True, create_only=True), "Excited": Boolean()})


def message(props):
    return "Hello, %s%s" % (props["Name"], "!" if props.get("Excited") else ".")


class Greetings(Provider):
    types = [GREETING]

    def __init__(self):
        self.lock = threading.Lock()
        self.made = {}

    def create(self, request):
        pid, text = "py-greeting-" + request.properties["Name"], message(request.properties)
        with self.lock:
            self.made[pid] = text
        return Result(pid, {"Message": text})

    def update(self, request):
        return self.create(request)

    def delete(self, request):
        with self.lock:
            self.made.pop(request.physical_id, None)

    def check_drift(self, request):
        with self.lock:
            held = self.made.get(request.physical_id)
        if held is None:
            return deleted()
        return compare({"Message": message(request.properties)}, {"Message": held})

    def read(self, request):
        with self.lock:
            held = self.made.get(request.physical_id)
        if held is None or not request.physical_id.startswith("py-greeting-"):
            raise NotFound("no greeting %s" % request.physical_id)
        name = request.physical_id[len("py-greeting-"):]
        return found({"Name": name, "Excited": held.endswith("!")}, {"Message": held})


if __name__ == "__main__":
    serve(Greetings())
