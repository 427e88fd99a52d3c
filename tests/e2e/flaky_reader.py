"""A webhook provider of `Test::Flaky::Thing` (identified by its Name):
records made elsewhere, every name exists. With READS_BEFORE_GONE=N in
the environment a record is gone after N reads: the import's check finds
it, the import itself then does not (its rollback is what is tested)."""

import os
import threading

from cairn_provider import NotFound, Provider, ResourceType, String, found, serve

THING = ResourceType("Test::Flaky::Thing", properties={"Name": String(required=True, create_only=True)},
                     primary_identifier=["Name"])


class Flaky(Provider):
    types = [THING]

    def __init__(self):
        self.lock = threading.Lock()
        self.reads = {}

    def create(self, request):
        raise NotFound("this provider only holds records made elsewhere")

    def update(self, request):
        raise NotFound("this provider only holds records made elsewhere")

    def delete(self, request):
        pass

    def read(self, request):
        with self.lock:
            self.reads[request.physical_id] = self.reads.get(request.physical_id, 0) + 1
            seen = self.reads[request.physical_id]
        limit = int(os.environ.get("READS_BEFORE_GONE", "0"))
        if limit and seen > limit:
            raise NotFound("record %s is gone since it was checked" % request.physical_id)
        return found({"Name": request.physical_id})


if __name__ == "__main__":
    serve(Flaky())
