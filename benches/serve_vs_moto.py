"""The same boto3 script against `cairn serve` and against moto's server on
this machine: create a stack of N resources, wait, delete it, wait; for N =
500 and 5,000. Prints each time and the ratio (moto / Cairn: above 1 means
Cairn is faster).

    cargo build --release
    pip install boto3 'moto[server]'      # moto 5.2.1 was used for the README figures
    python3 benches/serve_vs_moto.py [--cairn target/release/cairn] [--runs 3]

The resources are of one type (--type; default AWS::Bench::Nothing, a type
moto does not know and skips with a warning, so it does nothing for them;
AWS::SQS::Queue makes moto create queues). Cairn's config aliases it to
--cairn-type: by default OS::Heat::None, whose provider keeps nothing either,
so both sides do the same work at the provider and what is compared is the
API path and the engine (Cairn still records each resource's row and three
events durably; moto records nothing). --cairn-type Cairn::Test::Resource
writes one file per resource as well (on a file system with many recent
deletes, ext4's inode allocator then dominates). Waiters poll every second
on both.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import boto3
from botocore.config import Config


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_cairn(binary, workdir, resource_type, cairn_type, max_concurrency):
    with open(os.path.join(workdir, "cairn.toml"), "w") as f:
        engine = f"[engine]\nmax_concurrency = {max_concurrency}\n\n" if max_concurrency else ""
        f.write(
            engine + '[server]\nauth = "none"\n\n[type_aliases]\n'
            f'"{resource_type}" = "{cairn_type}"\n'
        )
    proc = subprocess.Popen(
        [binary, "--config", "cairn.toml", "serve", "--listen", "127.0.0.1:0"],
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    line = proc.stdout.readline()
    match = re.match(r"listening on (\S+)", line)
    if not match:
        raise SystemExit(f"cairn serve did not start: {line!r}")
    return proc, match.group(1)


def start_moto():
    import logging
    import warnings
    from moto.server import ThreadedMotoServer
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, f"http://127.0.0.1:{port}"


def client(endpoint):
    return boto3.client(
        "cloudformation", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="AKIDBENCH", aws_secret_access_key="bench",
        config=Config(retries={"max_attempts": 1}, read_timeout=600),
    )


def template(n, resource_type):
    return "Resources:\n" + "".join(
        f"  R{i}:\n    Type: {resource_type}\n" for i in range(n)
    )


def run(cf, name, n, resource_type):
    """Seconds to create-and-wait and to delete-and-wait."""
    body = template(n, resource_type)
    fast = {"Delay": 1, "MaxAttempts": 1200}
    t0 = time.perf_counter()
    cf.create_stack(StackName=name, TemplateBody=body)
    cf.get_waiter("stack_create_complete").wait(StackName=name, WaiterConfig=fast)
    t1 = time.perf_counter()
    cf.delete_stack(StackName=name)
    cf.get_waiter("stack_delete_complete").wait(StackName=name, WaiterConfig=fast)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default=os.path.join(os.path.dirname(__file__), "..", "target", "release", "cairn"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--type", default="AWS::Bench::Nothing",
                    help="the resource type (moto's own; Cairn aliases it to --cairn-type)")
    ap.add_argument("--cairn-type", default="OS::Heat::None",
                    help="what Cairn serves --type with (OS::Heat::None keeps nothing; Cairn::Test::Resource writes a file per resource)")
    ap.add_argument("--max-concurrency", type=int, default=0,
                    help="Cairn's [engine] max_concurrency (default: Cairn's default, 64)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="cairn-bench-")
    cairn_proc, cairn_ep = start_cairn(os.path.abspath(args.cairn), work, args.type, args.cairn_type, args.max_concurrency)
    moto_server, moto_ep = start_moto()
    try:
        targets = [("cairn", client(cairn_ep)), ("moto", client(moto_ep))]
        for n in [int(x) for x in args.sizes.split(",")]:
            results = {}
            for label, cf in targets:
                creates, deletes = [], []
                for r in range(args.runs):
                    c, d = run(cf, f"bench-{n}-{r}", n, args.type)
                    creates.append(c)
                    deletes.append(d)
                results[label] = (statistics.median(creates), statistics.median(deletes))
                print(f"{n:>6} resources  {label:<6} create+wait {results[label][0]:7.2f} s   delete+wait {results[label][1]:7.2f} s   (median of {args.runs})", flush=True)
            (cc, cd), (mc, md) = results["cairn"], results["moto"]
            print(f"{n:>6} resources  ratio moto/cairn: create {mc / cc:5.2f}x  delete {md / cd:5.2f}x  total {(mc + md) / (cc + cd):5.2f}x", flush=True)
    finally:
        cairn_proc.terminate()
        cairn_proc.wait()
        moto_server.stop()


if __name__ == "__main__":
    sys.exit(main())
