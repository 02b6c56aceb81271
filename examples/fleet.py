"""``make fleet``: the Collector route end to end on this machine, as an operator would set it up.

    producers (transport="otlp") ──► agent Collector (load_balancing on run.id) ─┬─► gateway-1 ─┬─► local platform
                                                                                 └─► gateway-2 ─┘

Everything listens on 127.0.0.1 and lives in one folder (a temporary one, or ``PRIME_OTEL_FLEET_DATA``): the local
Prime platform (``prime-otel local``), two ``prime-otel gateway`` processes sharing one generated bearer token (a
0600 token file, never on a command line, shown only as its fingerprint) with a ``--state-dir`` each, the agent
Collector (``collector-config/agent.yaml``, the binary ``make collector`` builds), then two ranks of one eval run
and a small training run. Once the gateways closed both runs it prints which gateway held each run (their
``GET /runs``), what each sink delivered, the run's status on the platform and a viewer link (the same facts, with
the ids of the episodes logged and the pid of every process it started, in ``fleet-summary.json``); then it stops
every process it started, on every way out (Ctrl-C and SIGTERM too). The same fleet by hand, and what to check
when it misbehaves: docs/fleet.md.

Environment: ``PRIME_OTEL_FLEET_DATA`` (keep everything in this folder), ``PRIME_OTEL_FLEET_SERVE=1`` (keep the
platform serving the viewer until Ctrl-C even without a terminal; it does with one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from prime_otel.testing import Inspector

HERE = Path(__file__).resolve().parent
COLLECTOR = HERE.parent / "collector-config" / "dist" / "otelcol-prime"
AGENT_CONFIG = HERE.parent / "collector-config" / "agent.yaml"
# The lease spans several heartbeats: a live producer beats every 10 s, so only a dead one is closed (at 60 s).
LEASE_SECONDS = 60
HEARTBEAT_SECONDS = 10
EVAL_EPISODES_PER_RANK = (24, 16)
TRAINING_STEPS = 4
START_SECONDS = 60.0
RUN_SECONDS = 120.0
STOP_SECONDS = 30.0

T = TypeVar("T")


def wait_until(check: Callable[[], T | None], what: str, timeout: float) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def inherited_env() -> dict[str, str]:
    """This process's environment without Prime and OpenTelemetry settings: the fleet sets its own."""
    return {name: value for name, value in os.environ.items() if not name.startswith(("PRIME_", "OTEL_"))}


class Processes:
    """Every child started here, stopped in reverse order on the way out: the producers, then the Collector (it
    flushes what it holds to the gateways), the gateways (they drain to the platform), the platform. SIGTERM, and
    SIGKILL only for one not gone in time. Each child has its own process group, so a Ctrl-C reaches only this
    script, which stops them in that order (else the Collector and the platform would quit first)."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self._started: list[tuple[str, subprocess.Popen[str]]] = []
        #: Every child's pid by name, stopped or not.
        self.pids: dict[str, int] = {}

    def start(
        self, name: str, command: list[str], env: dict[str, str], *, stdout_pipe: bool = False
    ) -> subprocess.Popen[str]:
        with (self.logs / f"{name}.log").open("a") as log:
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout_pipe else log,
                stderr=log,
                text=True,
                start_new_session=True,
            )
        self._started.append((name, process))
        self.pids[name] = process.pid
        return process

    def start_server(self, name: str, command: list[str], env: dict[str, str], ready: Path) -> dict[str, Any]:
        """A server that writes ``--ready-file`` once it listens; what it wrote there."""
        ready.unlink(missing_ok=True)
        process = self.start(name, [*command, "--ready-file", str(ready)], env)
        wait_until(lambda: ready.exists() or process.poll() is not None, f"{name} to listen", START_SECONDS)
        if process.poll() is not None:
            raise RuntimeError(f"{name} did not start; see {self.logs / name}.log")
        return dict(json.loads(ready.read_text()))

    def stop_all(self, keep: Collection[str] = ()) -> None:
        """Stops every child but those named in ``keep``, the last started first."""
        stopping = [(name, process) for name, process in self._started if name not in keep]
        self._started = [(name, process) for name, process in self._started if name in keep]
        try:
            while stopping:
                _, process = stopping[-1]
                if process.poll() is None:
                    process.terminate()
                    try:
                        process.wait(STOP_SECONDS)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
                stopping.pop()
        except KeyboardInterrupt:  # interrupted again while stopping: no more waiting
            for _, process in stopping:
                process.kill()
                process.wait()
            raise


@dataclass(frozen=True)
class Platform:
    url: str
    api_key: str

    @property
    def env(self) -> dict[str, str]:
        """What points the SDK (and a gateway) at this platform."""
        names = ("PRIME_API_BASE_URL", "PRIME_TRACES_URL", "PRIME_FRONTEND_URL")
        return {"PRIME_API_KEY": self.api_key, **dict.fromkeys(names, self.url)}

    def inspect(self) -> Inspector:
        """The local platform's inspection API (``/_local/...``): what it stored."""
        return Inspector(self.url, self.api_key)


@dataclass(frozen=True)
class Gateway:
    name: str
    http_url: str
    grpc_port: int
    pid: int

    def runs(self, token: str) -> dict[str, dict[str, Any]]:
        """This gateway's runs as ``GET /runs`` shows them to the token's holder."""
        answer = httpx.get(f"{self.http_url}/runs", headers={"authorization": f"Bearer {token}"}, timeout=10)
        answer.raise_for_status()
        return {run["run_id"]: run for run in answer.json()}


def write_token(path: Path) -> str:
    """A fresh bearer token in a file only this user can read (the gateways' ``--token-file``)."""
    token = secrets.token_urlsafe(32)
    path.unlink(missing_ok=True)
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
        file.write(token + "\n")
    return token


def fingerprint(token: str) -> str:
    """How the gateways name the token's sender (the token itself is never shown)."""
    return "token-" + hashlib.sha256(token.encode()).hexdigest()[:12]


def start_platform(processes: Processes, folder: Path) -> Platform:
    command = [sys.executable, "-m", "prime_otel.cli", "local", "--port", "0", "--data", str(folder / "platform")]
    info = processes.start_server("platform", command, inherited_env(), folder / "platform.ready.json")
    return Platform(info["url"], info["api_key"])


def start_gateway(processes: Processes, name: str, folder: Path, token_file: Path, platform: Platform) -> Gateway:
    command = [
        *(sys.executable, "-m", "prime_otel.cli", "gateway"),  # `prime-otel gateway`, from this interpreter
        *("--http-port", "0", "--grpc-port", "0"),
        *("--token-file", str(token_file)),
        *("--state-dir", str(folder / f"{name}-state")),
        *("--lease-seconds", str(LEASE_SECONDS)),
        *("--samples-step-interval", "1"),  # every training step's samples in the viewer
    ]
    env = {**inherited_env(), **platform.env, "HOME": str(folder)}  # the gateway's own platform key
    info = processes.start_server(name, command, env, folder / f"{name}.ready.json")
    return Gateway(name, info["http_url"], info["grpc_port"], info["pid"])


def start_collector(processes: Processes, gateways: list[Gateway], token: str) -> str:
    """The agent Collector in front of the gateways: its OTLP/gRPC endpoint."""
    port = free_port()
    env = {
        **inherited_env(),
        "GATEWAY_GRPC_ENDPOINTS": "[" + ", ".join(f"127.0.0.1:{g.grpc_port}" for g in gateways) + "]",
        "GATEWAY_TOKEN": token,  # agent.yaml sends it as `authorization: Bearer ...`
        "AGENT_OTLP_GRPC_PORT": str(port),
        "AGENT_OTLP_HTTP_PORT": str(free_port()),
        "AGENT_METRICS_PORT": str(free_port()),
    }
    process = processes.start("collector", [str(COLLECTOR), f"--config={AGENT_CONFIG}"], env)
    wait_until(lambda: listening(port) or process.poll() is not None, "the Collector to listen", START_SECONDS)
    if process.poll() is not None:
        raise RuntimeError(f"the Collector did not start; see {processes.logs / 'collector'}.log")
    return f"http://127.0.0.1:{port}"


class Producer:
    """One producer process (examples/_fleet_rank.py): its run id once it opened its run, then its report."""

    def __init__(self, processes: Processes, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        command = [sys.executable, str(HERE / "_fleet_rank.py"), *args]
        self.process = processes.start(name, command, env, stdout_pipe=True)
        self._run_id: str | None = None

    @property
    def run_id(self) -> str:
        if self._run_id is None:
            assert self.process.stdout is not None
            said, _, value = self.process.stdout.readline().partition(" ")
            if said != "RUN":
                raise RuntimeError(f"{self.name} opened no run; see its log")
            self._run_id = str(json.loads(value))
        return self._run_id

    def report(self) -> dict[str, Any]:
        """``{"report": the run's delivery report, "episode_ids": [...]}`` once the process ended."""
        self.run_id  # noqa: B018  (its line comes first)
        assert self.process.stdout is not None
        self.process.wait(RUN_SECONDS)  # its one REPORT line fits in the pipe
        lines = [line for line in self.process.stdout.read().splitlines() if line.startswith("REPORT ")]
        if self.process.returncode != 0 or not lines:
            raise RuntimeError(f"{self.name} exited {self.process.returncode}; see its log")
        return dict(json.loads(lines[-1].partition(" ")[2]))


def producer_env(platform: Platform, folder: Path, collector: str, node: str) -> dict[str, str]:
    """A producer's environment: the platform (it registers its run there) and the standard OTLP variables."""
    home = folder / node
    home.mkdir(exist_ok=True)
    return {
        **inherited_env(),
        **platform.env,
        "HOME": str(home),  # never a real ~/.prime/config.json
        "PRIME_RUNS_DIR": str(home / "prime-runs"),
        "PRIME_TEAM_ID": "team_local",
        "PRIME_OTEL_TRANSPORT": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "PRIME_OTEL_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
    }


def run_producers(processes: Processes, platform: Platform, folder: Path, collector: str) -> dict[str, Any]:
    """Two ranks of one eval run (as on two nodes) and a training run; run id -> kind and the ranks' reports."""
    first, second = EVAL_EPISODES_PER_RANK
    node_a, node_b = (producer_env(platform, folder, collector, node) for node in ("node-a", "node-b"))
    rank0 = Producer(processes, "eval-rank0", ["eval", str(first)], {**node_a, "RANK": "0", "WORLD_SIZE": "2"})
    training = Producer(processes, "train", ["train", str(TRAINING_STEPS)], node_a)
    # A launcher hands rank 0's run id to the other ranks: they join the run instead of opening their own.
    joining = {"RANK": "1", "WORLD_SIZE": "2", "PRIME_RUN_ID": rank0.run_id, "PRIME_RUN_KIND": "eval"}
    rank1 = Producer(processes, "eval-rank1", ["eval", str(second)], {**node_b, **joining})
    eval_reports = [rank0.report(), rank1.report()]
    return {
        rank0.run_id: {"kind": "eval", "reports": eval_reports},
        training.run_id: {"kind": "train", "reports": [training.report()]},
    }


def where_closed(gateways: list[Gateway], token: str, run_id: str) -> tuple[Gateway, dict[str, Any]] | None:
    """The gateway that closed the run and its ``/runs`` entry, or None while it is open."""
    for gateway in gateways:
        run = gateway.runs(token).get(run_id)
        if run is not None and run["state"] == "closed":
            return gateway, run
    return None


def final_status(inspector: Inspector, run_id: str) -> str | None:
    """The run's status on the platform once it is final (an eval is PROCESSING a moment before COMPLETED)."""
    status = str(inspector.run(run_id)["status"])
    return None if status in ("PENDING", "RUNNING", "PROCESSING") else status


def summarize(runs: dict[str, Any], gateways: list[Gateway], token: str, inspector: Inspector) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for run_id, produced in runs.items():
        closed = partial(where_closed, gateways, token, run_id)
        holder, status = wait_until(closed, f"a gateway to close {run_id}", RUN_SECONDS)
        problems = {name: status[name] for name in ("invalid", "foreign", "rejected", "dropped", "missing")}
        reports = produced["reports"]
        summary[run_id] = {
            "kind": produced["kind"],
            "gateway": holder.name,
            "gateway_status": status["status"],
            "problems": {name: count for name, count in problems.items() if count},
            "sinks": {name: counts["delivered"] for name, counts in status["sinks"].items()},
            "episode_ids": [episode for report in reports for episode in report["episode_ids"]],
            "closures": [report["report"]["closure"] for report in reports],
            "platform_status": wait_until(partial(final_status, inspector, run_id), f"{run_id} final", RUN_SECONDS),
            "url": reports[0]["report"]["url"],
        }
    return summary


def print_summary(summary: dict[str, Any], gateways: list[Gateway], sign_in: str) -> None:
    print("\nWhat happened")
    for gateway in gateways:
        print(f"  {gateway.name}: {gateway.http_url} (pid {gateway.pid})")
    for run_id, run in summary.items():
        ranks = ", ".join(f"rank {rank}: {closure}" for rank, closure in enumerate(run["closures"]))
        print(f"  {run['kind']} run {run_id}: {len(run['episode_ids'])} episodes logged ({ranks})")
        print(
            f"    held by {run['gateway']}, closed {run['gateway_status']}; on the platform: {run['platform_status']}"
        )
        print("    delivered: " + ", ".join(f"{sink} {count}" for sink, count in run["sinks"].items()))
        print(f"    problems: {run['problems'] or 'none'}")
        print(f"    viewer: {run['url']}")
    print(f"Sign your browser in to the viewer once with: {sign_in}")


@contextlib.contextmanager
def fleet_folder() -> Iterator[Path]:
    given = os.environ.get("PRIME_OTEL_FLEET_DATA")
    if given:
        folder = Path(given).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
    else:
        with tempfile.TemporaryDirectory(prefix="prime-otel-fleet-") as temporary:
            yield Path(temporary)


def fleet(processes: Processes, folder: Path) -> int:
    platform = start_platform(processes, folder)
    token_file = folder / "gateway-token"
    token = write_token(token_file)
    print(f"Local platform: {platform.url}")
    print(f"Gateway token: {token_file} (mode 0600), sender {fingerprint(token)}")
    gateways = [start_gateway(processes, f"gateway-{n}", folder, token_file, platform) for n in (1, 2)]
    collector = start_collector(processes, gateways, token)
    print(f"Agent Collector: {collector} -> " + ", ".join(f"127.0.0.1:{g.grpc_port}" for g in gateways))

    print("Producing: two ranks of an eval run and a training run, over OTLP ...", flush=True)
    with contextlib.closing(platform.inspect()) as inspector:
        summary = summarize(run_producers(processes, platform, folder, collector), gateways, token, inspector)
        print_summary(summary, gateways, platform.url + inspector.viewer_login_path())
    (folder / "fleet-summary.json").write_text(json.dumps({"runs": summary, "pids": processes.pids}, indent=1))

    if sys.stdin.isatty() or os.environ.get("PRIME_OTEL_FLEET_SERVE") == "1":
        processes.stop_all(keep=["platform"])
        print(f"\nThe producers, Collector and gateways stopped; the viewer stays at {platform.url}/ until Ctrl-C")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
    completed = all(run["platform_status"] == "COMPLETED" and not run["problems"] for run in summary.values())
    return 0 if completed else 1


def main() -> int:
    if not COLLECTOR.is_file():
        print(f"The Collector is not built ({COLLECTOR}): run `make collector` first.", file=sys.stderr)
        return 2
    # A supervisor's SIGTERM, or a closed terminal, stops the fleet the way Ctrl-C does: through the finally.
    for stop_signal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(stop_signal, signal.default_int_handler)
    with fleet_folder() as folder:
        logs = folder / "logs"
        logs.mkdir(exist_ok=True)
        kept = "" if os.environ.get("PRIME_OTEL_FLEET_DATA") else "; removed at exit, PRIME_OTEL_FLEET_DATA keeps it"
        print(f"Everything is under {folder} (logs in {logs}{kept})")
        processes = Processes(logs)
        try:
            return fleet(processes, folder)
        except KeyboardInterrupt:
            print("\nInterrupted: stopping the fleet.", file=sys.stderr)
            return 130
        except RuntimeError as problem:  # a part did not start or a run did not end in time: its log says why
            print(f"\nThe fleet stops: {problem}", file=sys.stderr)
            return 1
        finally:
            processes.stop_all()


if __name__ == "__main__":
    sys.exit(main())
