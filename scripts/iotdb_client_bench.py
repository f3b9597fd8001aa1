"""Ingest through IoTDB's official Python client (apache-iotdb 2.0.11): the shape of
`fencepost bench`'s defaults (devices x DOUBLE measurements, tablets of rows 1 ms apart, one
connection per client thread, each client its own devices), as NumpyTablets (the client's fast
path), for --duration-s seconds. Prints one JSON object: points, tablets, elapsed_s, points_per_s,
errors. Run by `scripts/bench.sh --protocols` with the virtualenv of scripts/iotdb-client-tests.sh.

With --table, the same points go through the table model (`TableSession.insert`): table `bench`
of the table database named by --database without `root.`, a TAG column `device` and the
measurements as FIELD columns, one device per tablet (the tag column's values are not counted
as points).
"""

import argparse
import json
import sys
import threading
import time

import numpy as np
from iotdb.Session import Session
from iotdb.table_session import TableSession, TableSessionConfig
from iotdb.utils.IoTDBConstants import TSDataType
from iotdb.utils.NumpyTablet import NumpyTablet
from iotdb.utils.Tablet import ColumnType


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=6667)
    p.add_argument("--database", default="root.pybench")
    p.add_argument("--devices", type=int, default=100)
    p.add_argument("--measurements", type=int, default=10)
    p.add_argument("--rows-per-tablet", type=int, default=1000)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--duration-s", type=float, default=20)
    p.add_argument("--start-time", type=int, default=1_700_000_000_000)
    p.add_argument("--table", action="store_true", help="write through the table model")
    args = p.parse_args()
    table_database = args.database.removeprefix("root.")

    # Each model creates its own databases (they keep their namespaces apart).
    if args.table:
        setup = TableSession(TableSessionConfig(node_urls=[f"{args.host}:{args.port}"]))
        setup.execute_non_query_statement(f"CREATE DATABASE IF NOT EXISTS {table_database}")
    else:
        setup = Session(args.host, args.port, "root", "root")
        setup.open(False)
        try:
            setup.execute_non_query_statement(f"CREATE DATABASE {args.database}")
        except Exception:
            pass  # it exists
    setup.close()

    def open_session():
        if not args.table:
            session = Session(args.host, args.port, "root", "root")
            session.open(False)
            return session
        return TableSession(TableSessionConfig(
            node_urls=[f"{args.host}:{args.port}"], database=table_database,
        ))

    measurements = [f"s{i}" for i in range(args.measurements)]
    types = [TSDataType.DOUBLE] * args.measurements
    rows = args.rows_per_tablet
    rng = np.random.default_rng(1)
    # Values are generated once per client and reused: the client's encoding, not numpy's
    # random numbers, is what is measured.
    counts = [0] * args.clients
    errors = [0] * args.clients
    deadline = time.monotonic() + args.duration_s
    started = time.monotonic()

    def client(index):
        session = open_session()
        devices = [d for d in range(args.devices) if d % args.clients == index]
        values = [np.round(rng.uniform(0, 1000, rows), 2) for _ in measurements]
        round_ = 0
        while time.monotonic() < deadline:
            for d in devices:
                base = args.start_time + round_ * rows
                times = np.arange(base, base + rows, dtype=np.int64)
                try:
                    if args.table:
                        tags = np.array([f"d{d}"] * rows)
                        session.insert(NumpyTablet(
                            "bench", ["device"] + measurements, [TSDataType.STRING] + types,
                            [tags] + values, times,
                            column_types=[ColumnType.TAG] + [ColumnType.FIELD] * len(measurements),
                        ))
                    else:
                        session.insert_tablet(NumpyTablet(
                            f"{args.database}.d{d}", measurements, types, values, times
                        ))
                    counts[index] += rows * len(measurements)
                except Exception as e:  # counted, the run goes on
                    errors[index] += 1
                    if errors[index] <= 3:
                        print(f"client {index}: {e}", file=sys.stderr)
                if time.monotonic() >= deadline:
                    break
            round_ += 1
        session.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    points = sum(counts)
    print(
        json.dumps(
            {
                "system": "iotdb-python-table" if args.table else "iotdb-python",
                "points": points,
                "tablets": points // (rows * len(measurements)),
                "elapsed_s": round(elapsed, 3),
                "points_per_s": round(points / elapsed, 1),
                "errors": sum(errors),
            },
            separators=(",", ":"),
        )
    )
    return 1 if sum(errors) else 0


if __name__ == "__main__":
    sys.exit(main())
