#!/usr/bin/env python3
"""Soak test of `hydra serve` (make soak).

Mixed load for SOAK_SECONDS (default 1800) against the release server and the
test HTTP server, on loopback only:
  * remote jobs against endpoints that answer, fail (503 with retries), reset
    the connection, or stall past the job's timeout; local jobs; nested graphs;
  * cancellations of running jobs;
  * subscribers that connect, read a little and drop;
  * `kill -9` of the server every SOAK_KILL_EVERY seconds (default 300), then a
    restart on the same state folder.
It ends by checking that every acknowledged job is final and has exactly one
final root event, that the server's RSS and open file descriptors are flat
after warm-up (the curve is printed and written to soak-curve.csv), and that
the server's stderr holds nothing unexpected. Exit status 0 when all held.
"""

import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HYDRA = os.environ.get("HYDRA_BIN", os.path.join(ROOT, ".build/release/hydra"))
SECONDS = int(os.environ.get("SOAK_SECONDS", "1800"))
KILL_EVERY = int(os.environ.get("SOAK_KILL_EVERY", "300"))
RATE = int(os.environ.get("SOAK_JOBS_PER_SECOND", "150"))
SAMPLE_EVERY = 5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client:
    """One JSON-RPC connection (line framing); notifications are skipped."""

    def __init__(self, port, timeout=30):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        self.next_id = 0

    def call(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.sock.sendall((json.dumps(message) + "\n").encode())
        while True:
            line = self.file.readline()
            if not line:
                raise ConnectionError("connection closed")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Server:
    """The hydra serve process: started, killed with -9, restarted on the same state."""

    def __init__(self, state, config, stderr_path):
        self.state, self.config = state, config
        self.stderr = open(stderr_path, "ab")
        self.process = None
        self.port = None
        self.starts = 0

    def start(self):
        self.port = free_port()
        self.process = subprocess.Popen(
            [HYDRA, "serve", "--config", self.config, "--state", self.state, "--listen", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=self.stderr, cwd=ROOT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                Client(self.port, timeout=2).call("hydra.ping")
                self.starts += 1
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("hydra serve did not start")

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def sample(self):
        pid = self.process.pid
        try:
            with open(f"/proc/{pid}/status") as f:
                rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            return rss, fds
        except (OSError, StopIteration):
            return None


def job_specs(rng):
    """One job spec of the mix."""
    remote = [
        {"type": "remote", "endpoint": "/items"},
        {"type": "remote", "endpoint": f"/delay/{rng.randint(1, 80)}"},
        {"type": "remote", "endpoint": "/status/503", "retry": {"maxAttempts": 2, "backoffMs": 10}},
        {"type": "remote", "endpoint": "/abort"},
        {"type": "remote", "endpoint": "/delay/3000", "timeoutMs": 200},
        {"type": "remote", "endpoint": "/flaky/soak/1000000", "retry": {"maxAttempts": 2, "backoffMs": 5}},
    ]
    local = [
        {"type": "local", "name": "echo", "input": rng.randint(0, 1000)},
        {"type": "local", "name": "delay", "input": {"ms": rng.randint(1, 50)}},
        {"type": "local", "name": "fail", "input": {"message": "planned"}},
    ]

    def leaf():
        return rng.choice(remote + local)

    def graph(depth):
        if depth >= 3 or rng.random() < 0.5:
            return leaf()
        steps = [graph(depth + 1) for _ in range(rng.randint(1, 4))]
        return {"type": rng.choice(["serial", "concurrent"]), "stopWhenFailed": rng.random() < 0.5, "steps": steps}

    return graph(0) if rng.random() < 0.4 else leaf()


class Soak:
    def __init__(self):
        self.work = tempfile.mkdtemp(prefix="hydra-soak-")
        self.acked = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors = []
        self.curve = []  # (seconds, start number, rss KiB, fds)

    def run(self):
        testserver = subprocess.Popen([sys.executable, os.path.join(ROOT, "Tests/Support/testserver.py")],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        port = int(testserver.stdout.readline().split()[1])
        config = os.path.join(self.work, "config.json")
        with open(config, "w") as f:
            json.dump({"servers": {"testsvr": f"http://127.0.0.1:{port}"},
                       "defaults": {"server": "testsvr", "timeoutMs": 5000}}, f)
        stderr_path = os.path.join(self.work, "server.stderr")
        self.server = Server(os.path.join(self.work, "state"), config, stderr_path)
        self.server.start()
        started = time.time()
        print(f"soak: {SECONDS} s, kill -9 every {KILL_EVERY} s, ~{RATE} jobs/s, work folder {self.work}", flush=True)

        threads = [threading.Thread(target=self.submitter, args=(i,), daemon=True) for i in range(2)]
        threads += [threading.Thread(target=self.canceller, daemon=True),
                    threading.Thread(target=self.subscribers, daemon=True)]
        for t in threads:
            t.start()
        next_kill = started + KILL_EVERY
        next_sample = started
        while time.time() - started < SECONDS:
            now = time.time()
            if now >= next_sample:
                sample = self.server.sample()
                if sample:
                    self.curve.append((round(now - started), self.server.starts, sample[0], sample[1]))
                next_sample = now + SAMPLE_EVERY
            if now >= next_kill and now - started < SECONDS - 30:
                self.server.kill9()
                self.server.start()
                print(f"soak: {round(now - started)} s: kill -9 and restart #{self.server.starts}, "
                      f"{len(self.acked)} jobs acknowledged so far", flush=True)
                next_kill = now + KILL_EVERY
            time.sleep(0.5)
        self.stop.set()
        for t in threads:
            t.join(timeout=30)
        ok = self.verify()
        status = self.server.stop()
        if status != 0:
            self.errors.append(f"hydra serve exited with {status} on SIGTERM")
        ok = self.check_stderr(stderr_path) and ok and status == 0
        testserver.stdin.close()
        testserver.wait(timeout=10)
        self.report()
        return ok and not self.errors

    def client(self):
        while not self.stop.is_set():
            try:
                return Client(self.server.port)
            except OSError:
                time.sleep(0.2)
        return None

    def submitter(self, number):
        rng = random.Random(number)
        client = self.client()
        per_batch = 10
        while not self.stop.is_set() and client:
            batch = [{"jsonrpc": "2.0", "id": i, "method": "job.submit", "params": {"job": job_specs(rng)}}
                     for i in range(per_batch)]
            try:
                client.sock.sendall((json.dumps(batch) + "\n").encode())
                line = client.file.readline()
                if not line:
                    raise ConnectionError
                for reply in json.loads(line):
                    if "result" in reply:
                        with self.lock:
                            self.acked.append(reply["result"]["jobId"])
                    elif reply["error"]["code"] not in (-32004, -32005):
                        self.errors.append(f"submit refused: {reply['error']}")
            except (OSError, ValueError, ConnectionError):
                client.close()
                client = self.client()  # the server was killed: what got no answer was not acknowledged
            time.sleep(per_batch / (RATE / 2))

    def canceller(self):
        rng = random.Random(99)
        client = self.client()
        while not self.stop.is_set() and client:
            with self.lock:
                recent = self.acked[-50:]
            if recent:
                try:
                    client.call("job.cancel", {"jobId": rng.choice(recent)})
                except RuntimeError:
                    pass  # already final: -32003
                except (OSError, ConnectionError, ValueError):
                    client.close()
                    client = self.client()
            time.sleep(0.05)

    def subscribers(self):
        rng = random.Random(7)
        while not self.stop.is_set():
            client = self.client()
            if not client:
                return
            try:
                filters = rng.choice([{}, {"events": ["job.failed"]}, {"jobId": "nomatch"}, {"fromSeq": 0}])
                client.call("events.subscribe", filters)
                client.sock.settimeout(0.2)
                end = time.time() + rng.uniform(0.1, 2)
                while time.time() < end:
                    try:
                        client.file.readline()
                    except OSError:
                        break
            except (OSError, RuntimeError, ValueError, ConnectionError):
                pass
            client.close()  # dropped mid-stream, as real clients do

    def verify(self):
        """Every acknowledged job final, with exactly one final root event."""
        print(f"soak: verifying {len(self.acked)} acknowledged jobs", flush=True)
        client = Client(self.server.port, timeout=120)
        pending = list(self.acked)
        deadline = time.time() + 300
        states = {}
        while pending and time.time() < deadline:
            job = pending.pop()
            result = client.call("job.result", {"jobId": job, "waitMs": 30000})
            if result["state"] in ("succeeded", "failed", "cancelled"):
                states[job] = result["state"]
            else:
                pending.insert(0, job)
        if pending:
            self.errors.append(f"{len(pending)} acknowledged jobs never finished, e.g. {pending[:3]}")
        finals = {}
        last = client.call("hydra.stats")["events"]["lastSeq"]
        acked = set(self.acked)
        seq, drops = 0, 0
        while seq < last:
            # A reader slower than the replay may be dropped (hydra.dropped): it
            # subscribes again from the last seq it saw, as a client should.
            watcher = Client(self.server.port, timeout=30)
            watcher.call("events.subscribe", {"fromSeq": seq, "events": ["job.succeeded", "job.failed", "job.cancelled"]})
            while seq < last:
                try:
                    line = watcher.file.readline()
                except OSError:
                    break
                if not line:
                    break
                note = json.loads(line)
                if note.get("method") == "hydra.dropped":
                    drops += 1
                    break
                params = note.get("params", {})
                if params.get("seq", 0) <= seq:
                    continue
                seq = params["seq"]
                if params.get("stepPath") == "" and params.get("jobId") in acked:
                    finals[params["jobId"]] = finals.get(params["jobId"], 0) + 1
            watcher.close()
            if drops > 100:
                self.errors.append("the event replay kept dropping the reader")
                break
        twice = [j for j, n in finals.items() if n != 1]
        missing = [j for j in acked if j not in finals]
        if twice:
            self.errors.append(f"{len(twice)} jobs with more than one final event, e.g. {twice[:3]}")
        if missing:
            self.errors.append(f"{len(missing)} jobs with no final event, e.g. {missing[:3]}")
        by_state = {}
        for s in states.values():
            by_state[s] = by_state.get(s, 0) + 1
        print(f"soak: final states {by_state}; final events read up to seq {seq} ({drops} resubscriptions)", flush=True)
        return not pending and not twice and not missing

    def check_stderr(self, path):
        expected = ("hydra:", "serving", "state", "resumed", "recovered", "config", "stopping", "stopped", "shutting")
        unexpected = []
        with open(path, errors="replace") as f:
            for line in f:
                lowered = line.lower()
                if any(word in lowered for word in ("fatal", "panic", "crash", "sanitizer", "assertion", "error")):
                    unexpected.append(line.rstrip())
                elif not any(word in lowered for word in expected):
                    unexpected.append(line.rstrip())
        if unexpected:
            self.errors.append(f"{len(unexpected)} unexpected stderr lines, e.g. {unexpected[:3]}")
        return not unexpected

    def report(self):
        csv = os.path.join(ROOT, "soak-curve.csv")
        with open(csv, "w") as f:
            f.write("seconds,start,rss_kib,fds\n")
            for row in self.curve:
                f.write(",".join(map(str, row)) + "\n")
        print("soak: RSS and open fds of the server (every minute; the full curve is in soak-curve.csv)")
        for row in self.curve[::max(1, 60 // SAMPLE_EVERY)]:
            print(f"  {row[0]:>6} s  run {row[1]}  RSS {row[2] / 1024:7.1f} MiB  fds {row[3]}")
        # Flat after warm-up: within each run of the server, the last third
        # against the middle third (a run is the time between two kills).
        for start in sorted({r[1] for r in self.curve}):
            rows = [r for r in self.curve if r[1] == start]
            if len(rows) < 24:  # under two minutes: all warm-up
                continue
            third = len(rows) // 3
            middle, last = rows[third:2 * third], rows[2 * third:]
            rss_growth = max(r[2] for r in last) / max(1, max(r[2] for r in middle))
            fd_growth = max(r[3] for r in last) - max(r[3] for r in middle)
            print(f"soak: run {start}: RSS last/middle third {rss_growth:.2f}, fds +{fd_growth}")
            if rss_growth > 1.25:
                self.errors.append(f"run {start}: RSS grew {rss_growth:.2f}x after warm-up")
            if fd_growth > 32:
                self.errors.append(f"run {start}: {fd_growth} more open fds after warm-up")
        for error in self.errors:
            print(f"soak: FAILED: {error}")
        if not self.errors:
            print(f"soak: passed: {len(self.acked)} acknowledged jobs, each final exactly once, "
                  f"{self.server.starts - 1} kill -9 restarts")


if __name__ == "__main__":
    sys.exit(0 if Soak().run() else 1)
