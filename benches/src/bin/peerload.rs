//! `peerload`: writes the points of `fencepost bench` (the same [`fencepost_cli::loadgen`] spec:
//! devices, measurements, timestamps, values) to InfluxDB 1.x or VictoriaMetrics, and prints the
//! same report.
//!
//! Both peers take InfluxDB line protocol on `POST /write?db=<db>&precision=ms` (VictoriaMetrics
//! serves the same endpoint), so the client does identical work for either and only the server
//! differs. One tablet is one request: one line per row, `measurement = device`, fields
//! `s0`…`s<n>`, e.g. `root.bench.d7 s0=130.28,s1=873.02 1764509999000`. Each client keeps one
//! HTTP/1.1 keep-alive connection (a small client over tokio's `TcpStream`: no HTTP dependency).
//! A response other than 204/200 counts as an error under `http <status>`; a broken connection
//! under `io`, after one reconnect when a kept-alive connection had gone stale.
//!
//! A third target, `iotdb`, is Fencepost itself over IoTDB's client RPC (Thrift, binary protocol)
//! instead of gRPC, to measure what the protocol layer costs: each client holds one connection per
//! DataNode it writes to, logs in as root, and sends every tablet as one `insertTablet`, following
//! the 400 redirect hints to the region leader as IoTDB's clients do (the gRPC session does the
//! same with its redirect cache).
//!
//! A fourth target, `file`, is for writers that are not servers (the TsFile writer of
//! `scripts/bench.sh --storage`, `scripts/tsfile_write.py`): client `c` appends every tablet to
//! `<out>/client-<c>.bin`, DOUBLE only, one record per tablet, all integers little-endian:
//! `u32` device name length, the name (UTF-8), `u32` rows, `u32` measurements (named `s0`…),
//! `rows × i64` timestamps, then per measurement `rows × f64` values (IEEE 754 bits).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use common::{Column, Tablet};
use fencepost_benches::http::{query_escape, HttpConnection};
use fencepost_benches::thrift::{insert_tablet_req, ThriftConnection};
use fencepost_cli::loadgen::{self, LoadArgs, Sink, WriteFailure};

/// Largest response body accepted, in bytes (errors are short JSON messages).
const RESPONSE_BODY_BYTES_MAX: usize = 1024 * 1024;
/// Characters of an error body kept in a failure message.
const ERROR_MESSAGE_CHARS_MAX: usize = 300;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Target {
    /// InfluxDB 1.x: `/write?db=…&precision=ms`; the database is created first.
    Influxdb,
    /// VictoriaMetrics single node: its InfluxDB line-protocol endpoint `/write`.
    Victoriametrics,
    /// Fencepost over IoTDB's client RPC (Thrift) on a DataNode's session port.
    Iotdb,
    /// Binary files under `--out`, one per client (see the module doc).
    File,
}

impl Target {
    fn name(self) -> &'static str {
        match self {
            Target::Influxdb => "influxdb",
            Target::Victoriametrics => "victoriametrics",
            Target::Iotdb => "fencepost-thrift",
            Target::File => "file",
        }
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "peerload",
    about = "Write fencepost bench's points to InfluxDB 1.x or VictoriaMetrics"
)]
struct Cli {
    /// The system to write to.
    #[arg(long, value_enum)]
    target: Target,
    /// Its address, host:port (InfluxDB and VictoriaMetrics over HTTP; a DataNode's session
    /// port for `iotdb`).
    #[arg(long, required_if_eq_any([("target", "influxdb"), ("target", "victoriametrics"), ("target", "iotdb")]))]
    address: Option<String>,
    /// Directory of the `file` target's files (created if missing).
    #[arg(long, required_if_eq("target", "file"))]
    out: Option<std::path::PathBuf>,
    /// InfluxDB database (`db=`); VictoriaMetrics takes it as a label.
    #[arg(long, default_value = "bench")]
    db: String,
    /// One JSON object instead of the text report.
    #[arg(long)]
    json: bool,
    /// Write a device as its peers' users would: a tag of one measurement rather than a
    /// measurement of its own (`bench,host=d7 s0=…` for `root.bench.d7`, as TSBS's devops data
    /// is `cpu,hostname=host_7 usage_user=…`). For `scripts/bench.sh --query`.
    #[arg(long)]
    tag_devices: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// Appends `tablet` as line protocol: one line per row, every column a field; its device is the
/// measurement, or with `tag_devices` the device's last node is the tag `host` of a measurement
/// named by the node before it.
fn encode_line_protocol(tablet: &Tablet, tag_devices: bool, out: &mut Vec<u8>) {
    let w = out;
    let key = match tablet.device.rsplit_once('.') {
        Some((parent, host)) if tag_devices => {
            let measurement = parent.rsplit('.').next().unwrap_or(parent);
            format!("{measurement},host={host}")
        }
        _ => tablet.device.clone(),
    };
    for row in 0..tablet.row_count() {
        w.extend_from_slice(key.as_bytes());
        for (m, (name, column)) in tablet.measurements.iter().zip(&tablet.columns).enumerate() {
            assert!(!tablet.is_null(row, m), "the generator writes no nulls");
            w.push(if m == 0 { b' ' } else { b',' });
            w.extend_from_slice(name.as_bytes());
            w.push(b'=');
            let r = match column {
                Column::Double(v) => write!(w, "{}", v[row]),
                Column::Float(v) => write!(w, "{}", v[row]),
                Column::Int64(v) | Column::Timestamp(v) => write!(w, "{}i", v[row]),
                Column::Int32(v) | Column::Date(v) => write!(w, "{}i", v[row]),
                Column::Boolean(v) => write!(w, "{}", v[row]),
                Column::Blob(_) => panic!("line protocol has no bytes field"),
                Column::Text(v) | Column::String(v) => write!(
                    w,
                    "\"{}\"",
                    v[row].replace('\\', "\\\\").replace('"', "\\\"")
                ),
            };
            r.expect("writing to a Vec cannot fail");
        }
        writeln!(w, " {}", tablet.timestamps[row]).expect("writing to a Vec cannot fail");
    }
}

/// One peer client.
struct HttpSink {
    connection: HttpConnection,
    path: String,
    tag_devices: bool,
    body: Vec<u8>,
    reconnects: u64,
}

impl Sink for HttpSink {
    async fn write(&mut self, tablet: &Tablet) -> Result<(), WriteFailure> {
        self.body.clear();
        encode_line_protocol(tablet, self.tag_devices, &mut self.body);
        match self.connection.post(&self.path, &self.body).await {
            Ok((response, reconnected)) => {
                self.reconnects += u64::from(reconnected);
                if response.status == 204 || response.status == 200 {
                    Ok(())
                } else {
                    let text = String::from_utf8_lossy(&response.body);
                    Err(WriteFailure {
                        code: format!("http {}", response.status),
                        message: text.chars().take(ERROR_MESSAGE_CHARS_MAX).collect(),
                    })
                }
            }
            Err(e) => Err(WriteFailure {
                code: "io".into(),
                message: e.to_string(),
            }),
        }
    }

    fn retries_by_code(&self) -> BTreeMap<String, u64> {
        if self.reconnects == 0 {
            BTreeMap::new()
        } else {
            BTreeMap::from([("reconnect".to_string(), self.reconnects)])
        }
    }
}

/// Appends `tablet` as one record of the `file` target (see the module doc).
fn encode_record(tablet: &Tablet, out: &mut Vec<u8>) -> Result<(), WriteFailure> {
    let unsupported = |what: String| WriteFailure {
        code: "unsupported".into(),
        message: what,
    };
    let len = |n: usize, what: &str| {
        u32::try_from(n).map_err(|_| unsupported(format!("{n} {what} do not fit a u32")))
    };
    out.extend_from_slice(&len(tablet.device.len(), "name bytes")?.to_le_bytes());
    out.extend_from_slice(tablet.device.as_bytes());
    out.extend_from_slice(&len(tablet.row_count(), "rows")?.to_le_bytes());
    out.extend_from_slice(&len(tablet.columns.len(), "measurements")?.to_le_bytes());
    for t in &tablet.timestamps {
        out.extend_from_slice(&t.to_le_bytes());
    }
    for (m, (name, column)) in tablet.measurements.iter().zip(&tablet.columns).enumerate() {
        // The reader names the measurements by position.
        assert_eq!(
            *name,
            format!("s{m}"),
            "the generator names measurements s0, s1, …"
        );
        let Column::Double(values) = column else {
            return Err(unsupported(format!(
                "the file target writes DOUBLE only, not {}",
                column.data_type()
            )));
        };
        assert_eq!(values.len(), tablet.row_count(), "a column of every row");
        for (row, value) in values.iter().enumerate() {
            assert!(!tablet.is_null(row, m), "the generator writes no nulls");
            out.extend_from_slice(&value.to_le_bytes());
        }
    }
    Ok(())
}

/// One client of the `file` target: its own file, one `write_all` per tablet, so nothing is
/// left in a buffer to be lost at drop.
struct FileSink {
    file: std::fs::File,
    path: std::path::PathBuf,
    record: Vec<u8>,
}

impl Sink for FileSink {
    async fn write(&mut self, tablet: &Tablet) -> Result<(), WriteFailure> {
        use std::io::Write as _;
        self.record.clear();
        encode_record(tablet, &mut self.record)?;
        // A blocking write on the runtime's thread: this target measures no time.
        self.file.write_all(&self.record).map_err(|e| WriteFailure {
            code: "io".into(),
            message: format!("{}: {e}", self.path.display()),
        })
    }

    fn retries_by_code(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
}

fn print_report(report: &loadgen::Report, json: bool) -> anyhow::Result<u8> {
    if json {
        println!("{}", serde_json::to_string(report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(u8::from(report.errors > 0))
}

async fn run_file(cli: Cli, spec: loadgen::LoadSpec) -> anyhow::Result<u8> {
    let out = cli.out.expect("clap requires --out with --target file");
    anyhow::ensure!(
        spec.data_type == common::DataType::Double,
        "--target file writes DOUBLE only, not {}",
        spec.data_type
    );
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = &out;
    let report = loadgen::drive(cli.target.name(), spec, |client| async move {
        let path = out.join(format!("client-{client}.bin"));
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(FileSink {
            file,
            path,
            record: Vec::new(),
        })
    })
    .await?;
    print_report(&report, cli.json)
}

/// Fencepost over IoTDB's client RPC: a connection per DataNode, tablets sent where the last
/// redirect hint for their device points.
struct ThriftSink {
    first: String,
    connections: BTreeMap<String, ThriftConnection>,
    leaders: std::collections::HashMap<String, String>,
    retries: BTreeMap<String, u64>,
}

impl Sink for ThriftSink {
    async fn write(&mut self, tablet: &Tablet) -> Result<(), WriteFailure> {
        let failure = |code: &str, message: String| WriteFailure {
            code: code.to_string(),
            message,
        };
        let endpoint = self
            .leaders
            .get(&tablet.device)
            .cloned()
            .unwrap_or_else(|| self.first.clone());
        if !self.connections.contains_key(&endpoint) {
            let c = ThriftConnection::connect(&endpoint)
                .await
                .map_err(|e| failure("io", format!("{e:#}")))?;
            self.connections.insert(endpoint.clone(), c);
        }
        let c = self
            .connections
            .get_mut(&endpoint)
            .expect("connected above");
        let req = insert_tablet_req(c.session_id, tablet);
        if let Err(e) = c.call("insertTablet", |w| req.write(w)).await {
            self.connections.remove(&endpoint);
            return Err(failure("io", e.to_string()));
        }
        let status = c
            .reply_status()
            .map_err(|e| failure("thrift", format!("{e:#}")))?;
        match status.code {
            200 => Ok(()),
            400 => {
                if let Some((host, port)) = status.redirect_node {
                    self.leaders
                        .insert(tablet.device.clone(), format!("{host}:{port}"));
                }
                Ok(())
            }
            code => Err(failure(
                &code.to_string(),
                status.message.unwrap_or_default(),
            )),
        }
    }

    fn retries_by_code(&self) -> BTreeMap<String, u64> {
        self.retries.clone()
    }
}

async fn run_thrift(cli: Cli, spec: loadgen::LoadSpec) -> anyhow::Result<u8> {
    let first = cli
        .address
        .clone()
        .expect("clap requires --address with --target iotdb");
    // The database first, as `fencepost bench` creates it; its status is not looked at (an
    // existing database answers an error, and is fine).
    let mut c = ThriftConnection::connect(&first).await?;
    c.execute_update(&format!("CREATE DATABASE {}", spec.database))
        .await?;
    let first = first.as_str();
    let report = loadgen::drive(cli.target.name(), spec, |_client| async move {
        Ok(ThriftSink {
            first: first.to_string(),
            connections: BTreeMap::new(),
            leaders: std::collections::HashMap::new(),
            retries: BTreeMap::new(),
        })
    })
    .await?;
    print_report(&report, cli.json)
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let spec = cli.load.to_spec(loadgen::now_ms())?;
    if cli.target == Target::File {
        return run_file(cli, spec).await;
    }
    if cli.target == Target::Iotdb {
        return run_thrift(cli, spec).await;
    }
    let address = cli
        .address
        .clone()
        .expect("clap requires --address with an HTTP target");
    let db = query_escape(&cli.db);
    if cli.target == Target::Influxdb {
        let mut c = HttpConnection::connect(&address, RESPONSE_BODY_BYTES_MAX)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        let q = query_escape(&format!("CREATE DATABASE \"{}\"", cli.db));
        let (r, _) = c.post(&format!("/query?q={q}"), b"").await?;
        anyhow::ensure!(
            r.status == 200,
            "CREATE DATABASE: HTTP {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    let path = format!("/write?db={db}&precision=ms");
    let address = address.as_str();
    let tag_devices = cli.tag_devices;
    let report = loadgen::drive(cli.target.name(), spec, |_client| {
        let path = path.clone();
        async move {
            Ok(HttpSink {
                connection: HttpConnection::connect(address, RESPONSE_BODY_BYTES_MAX)
                    .await
                    .with_context(|| format!("connecting to {address}"))?,
                path,
                tag_devices,
                body: Vec::new(),
                reconnects: 0,
            })
        }
    })
    .await?;
    print_report(&report, cli.json)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("peerload: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("peerload: {e:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::DataType;
    use fencepost_cli::loadgen::{Generator, LoadSpec, StopAfter, ValueShape};

    fn generator(t: DataType) -> Generator {
        Generator::new(LoadSpec {
            devices: 2,
            measurements: 2,
            rows_per_tablet: 2,
            clients: 1,
            data_type: t,
            database: "root.bench".into(),
            start_time_ms: 1_700_000_000_000,
            step_ms: 1,
            seed: 7,
            values: ValueShape::Uniform2dp,
            stop: StopAfter::Tablets(1),
            rate_pts_per_s: None,
        })
    }

    #[test]
    fn line_protocol_has_one_line_per_row_and_every_point() {
        let g = generator(DataType::Double);
        let tablet = g.tablet(1, 0);
        let mut out = Vec::new();
        encode_line_protocol(&tablet, false, &mut out);
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for (row, line) in lines.iter().enumerate() {
            let t = tablet.timestamps[row];
            let expected = format!(
                "root.bench.d1 s0={},s1={} {t}",
                tablet.columns[0].value(row),
                tablet.columns[1].value(row)
            );
            assert_eq!(*line, expected);
        }
        let mut ints = Vec::new();
        encode_line_protocol(&generator(DataType::Int32).tablet(0, 0), false, &mut ints);
        let ints = String::from_utf8(ints).expect("utf-8");
        assert!(ints.lines().all(|l| l.matches("i,").count() == 1), "{ints}");
        let mut text = Vec::new();
        encode_line_protocol(&generator(DataType::Text).tablet(0, 0), false, &mut text);
        let text = String::from_utf8(text).expect("utf-8");
        assert!(text.contains("s0=\"v"), "{text}");
        let mut tagged = Vec::new();
        encode_line_protocol(&tablet, true, &mut tagged);
        let tagged = String::from_utf8(tagged).expect("utf-8");
        assert!(tagged.starts_with("bench,host=d1 s0="), "{tagged}");
        assert_eq!(tagged.lines().count(), 2, "{tagged}");
    }

    #[test]
    fn line_protocol_carries_every_double_bit_for_bit() {
        // Rust prints the shortest text that parses back to the same f64, so the peers (which
        // parse with a correctly rounded parser) store exactly the generated values; `noise`
        // uses all 53 bits of the mantissa.
        for values in [ValueShape::Noise, ValueShape::Walk2dp] {
            let g = Generator::new(LoadSpec {
                rows_per_tablet: 100,
                measurements: 3,
                values,
                ..generator(DataType::Double).spec().clone()
            });
            let tablet = g.tablet(1, 2);
            let mut out = Vec::new();
            encode_line_protocol(&tablet, false, &mut out);
            let text = String::from_utf8(out).expect("utf-8");
            for (row, line) in text.lines().enumerate() {
                let fields = line.split(' ').nth(1).expect("a field set");
                for (m, field) in fields.split(',').enumerate() {
                    let (_, number) = field.split_once('=').expect("name=value");
                    let parsed: f64 = number.parse().expect("a number");
                    let Column::Double(v) = &tablet.columns[m] else {
                        panic!("DOUBLE")
                    };
                    assert_eq!(parsed.to_bits(), v[row].to_bits(), "{values:?} {line}");
                }
            }
        }
    }

    #[test]
    fn a_file_record_holds_the_tablet_little_endian() {
        let tablet = generator(DataType::Double).tablet(1, 0);
        let mut out = Vec::new();
        encode_record(&tablet, &mut out).expect("DOUBLE is written");
        let name = b"root.bench.d1";
        let mut expected = Vec::new();
        expected.extend_from_slice(&(name.len() as u32).to_le_bytes());
        expected.extend_from_slice(name);
        expected.extend_from_slice(&2u32.to_le_bytes());
        expected.extend_from_slice(&2u32.to_le_bytes());
        for t in &tablet.timestamps {
            expected.extend_from_slice(&t.to_le_bytes());
        }
        for column in &tablet.columns {
            let Column::Double(v) = column else {
                panic!("DOUBLE")
            };
            for x in v {
                expected.extend_from_slice(&x.to_bits().to_le_bytes());
            }
        }
        assert_eq!(out, expected);
        assert_eq!(out.len(), 4 + name.len() + 8 + 2 * 8 + 2 * 2 * 8);
        let mut ints = Vec::new();
        let refused = encode_record(&generator(DataType::Int64).tablet(0, 0), &mut ints);
        assert_eq!(refused.map_err(|f| f.code), Err("unsupported".to_string()));
    }
}
