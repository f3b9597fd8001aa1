#!/usr/bin/env python3
"""Writes the points of `peerload --target file` into one TsFile, with Apache's `tsfile` wheel.

    tsfile_write.py IN_DIR OUT_FILE

Used by `scripts/bench.sh --storage` (which makes a virtualenv and installs the wheel): IoTDB's
file format, written by the TsFile project's own writer, as the reference the other systems'
bytes per point are held against. IN_DIR holds `client-<c>.bin` files of records (see the module
doc of benches/src/bin/peerload.rs): `u32` device name length, the name, `u32` rows, `u32`
measurements (`s0`, …), `rows × i64` timestamps, then per measurement `rows × f64` values, all
little-endian. Every record becomes one tablet of the tree model, non-aligned (IoTDB's default
for a device that was not created aligned: each series keeps its own time column), with the
library's default encodings and compression — read from its config, not chosen here (TS_2DIFF
time, GORILLA for DOUBLE, LZ4 in tsfile 2.x, as in IoTDB).

After closing the file it reads it back: the total of every series' row count must equal the
points written, and the first two devices of the input must read back bit for bit. It
prints one JSON object (points, series, bytes, the encodings, the points compared) and exits 1
on any mismatch.
"""

import glob
import json
import os
import struct
import sys
from array import array

import tsfile
from tsfile import Tablet, TimeseriesSchema, TSDataType, TsFileReader, TsFileWriter

# Devices read back and compared point by point after writing.
CHECKED_DEVICES = 2


def read_exact(f, n, path):
    data = f.read(n)
    if len(data) != n:
        raise ValueError(f"{path}: truncated record at offset {f.tell() - len(data)}")
    return data


def records(path):
    """(device, timestamps, [values per measurement]) for each record of one file."""
    with open(path, "rb") as f:
        while True:
            head = f.read(4)
            if not head:
                return
            if len(head) != 4:
                raise ValueError(f"{path}: truncated record at offset {f.tell() - len(head)}")
            (name_len,) = struct.unpack("<I", head)
            device = read_exact(f, name_len, path).decode("utf-8")
            rows, measurements = struct.unpack("<II", read_exact(f, 8, path))
            timestamps = array("q")
            timestamps.frombytes(read_exact(f, 8 * rows, path))
            columns = []
            for _ in range(measurements):
                column = array("d")
                column.frombytes(read_exact(f, 8 * rows, path))
                columns.append(column)
            if sys.byteorder != "little":
                timestamps.byteswap()
                for column in columns:
                    column.byteswap()
            yield device, timestamps, columns


def compare(reader, device, timestamps, columns):
    """(the first difference or None, points compared) between the file and what was written."""
    names = [f"s{m}" for m in range(len(columns))]
    result = reader.query_timeseries(device, names, 0, 2**63 - 1)
    try:
        row = 0
        while result.next():
            if row >= len(timestamps):
                return f"{device}: more rows than the {len(timestamps)} written", row * len(names)
            time = result.get_value_by_index(1)
            if time != timestamps[row]:
                return f"{device} row {row}: time {time}, wrote {timestamps[row]}", row * len(names)
            for m, column in enumerate(columns):
                got = result.get_value_by_index(2 + m)
                if struct.pack("<d", got) != struct.pack("<d", column[row]):
                    return f"{device}.s{m} row {row}: {got!r}, wrote {column[row]!r}", row * len(names)
            row += 1
        if row != len(timestamps):
            return f"{device}: {row} rows read back, {len(timestamps)} written", row * len(names)
        return None, row * len(names)
    finally:
        result.close()


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    in_dir, out_path = sys.argv[1], sys.argv[2]
    inputs = sorted(glob.glob(os.path.join(in_dir, "client-*.bin")))
    if not inputs:
        print(f"no client-*.bin files in {in_dir}", file=sys.stderr)
        return 2

    writer = TsFileWriter(out_path)
    # The writer initialises the library's config; its defaults are what IoTDB would use.
    config = tsfile.get_tsfile_config()
    encoding = config["double_encoding_type_"]
    compression = config["default_compression_type_"]
    registered = {}  # device → measurement count
    checked = {}  # device → (timestamps, columns) of the devices read back after writing
    points = 0
    for path in inputs:
        for device, timestamps, columns in records(path):
            names = [f"s{m}" for m in range(len(columns))]
            if device not in registered:
                for name in names:
                    writer.register_timeseries(
                        device, TimeseriesSchema(name, TSDataType.DOUBLE, encoding, compression)
                    )
                registered[device] = len(names)
                if len(checked) < CHECKED_DEVICES:
                    checked[device] = (array("q"), [array("d") for _ in names])
            elif registered[device] != len(names):
                raise ValueError(f"{device}: {len(names)} measurements, first {registered[device]}")
            rows = len(timestamps)
            tablet = Tablet(names, [TSDataType.DOUBLE] * len(names), rows)
            tablet.set_table_name(device)
            tablet.set_timestamp_list(timestamps.tolist())
            for m, column in enumerate(columns):
                for row, value in enumerate(column):
                    tablet.add_value_by_index(m, row, value)
            writer.write_tablet(tablet)
            points += rows * len(columns)
            if device in checked:
                kept_timestamps, kept_columns = checked[device]
                kept_timestamps.extend(timestamps)
                for kept, column in zip(kept_columns, columns):
                    kept.extend(column)
    writer.close()
    size = os.path.getsize(out_path)

    # Read back: every point is there, and two devices hold exactly what was written.
    reader = TsFileReader(out_path)
    stored = 0
    series = 0
    for group in reader.get_timeseries_metadata().values():
        for ts in group.timeseries:
            stored += ts.statistic.row_count
            series += 1
    failures = []
    if stored != points:
        failures.append(f"the file holds {stored} points, {points} were written")
    compared = 0
    for device, (timestamps, columns) in checked.items():
        failure, n = compare(reader, device, timestamps, columns)
        compared += n
        if failure:
            failures.append(failure)
    reader.close()
    print(
        json.dumps(
            {
                "points": points,
                "series": series,
                "bytes": size,
                "time_encoding": config["time_encoding_type_"].name,
                "time_compression": config["time_compress_type_"].name,
                "double_encoding": encoding.name,
                "compression": compression.name,
                "points_compared": compared,
                "failures": failures,
            },
            # Compact, like the loaders' reports: bench.sh reads fields with sed.
            separators=(",", ":"),
        )
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
