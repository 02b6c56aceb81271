"""Everything a request handler may touch, built once per server from the data directory."""

from __future__ import annotations

from dataclasses import dataclass

from ._auth import Authenticator
from ._datadir import DataDir
from ._db import Database
from ._faults import ConnectionRegistry, FaultBook
from ._hub import EnvironmentHub
from ._inspection import RunIndex
from ._objects import ObjectStore, UrlSigner
from ._ratelimit import RateLimiter
from ._recorder import RequestLog
from ._runs import RunStore
from ._settings import Settings, SettingsHolder
from ._tables import MetricTable, SampleTable
from ._traces import TraceStore


@dataclass(frozen=True)
class Platform:
    api_key: str
    settings: SettingsHolder
    runs: RunStore
    hub: EnvironmentHub
    samples: SampleTable
    metrics: MetricTable
    objects: ObjectStore
    traces: TraceStore
    requests: RequestLog
    faults: FaultBook
    connections: ConnectionRegistry
    limiter: RateLimiter
    auth: Authenticator
    index: RunIndex

    @classmethod
    def open(cls, data: DataDir, api_key: str, settings: Settings) -> Platform:
        db = Database(data.database)
        runs = RunStore(db)
        return cls(
            api_key=api_key,
            settings=SettingsHolder(settings),
            runs=runs,
            hub=EnvironmentHub(db),
            samples=SampleTable(db),
            metrics=MetricTable(db),
            objects=ObjectStore(db, data.objects, UrlSigner(data.signing_secret())),
            traces=TraceStore(db),
            requests=RequestLog(db),
            faults=FaultBook(),
            connections=ConnectionRegistry(),
            limiter=RateLimiter(),
            auth=Authenticator(api_key, runs.hosted_run_for_token),
            index=RunIndex(db),
        )
