//! A small client of IoTDB's client RPC (`IClientRPCService`, Thrift binary protocol, framed) for
//! the load generators: one connection to a DataNode's session port, logged in as root. It sends
//! calls with `thrift-codec` and the request structs of `iotdb-rpc`, and reads only the reply
//! fields the benches need (field ids of IoTDB's `client.thrift`).

use anyhow::Context as _;
use common::Tablet;
use iotdb_rpc::messages::{read_status, read_struct, InsertTabletReq, OpenSessionReq, Status};
use thrift_codec::{MessageType, Protocol, Reader, TType, Writer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest reply frame read, in bytes: above the DataNode's default `dn_rpc_max_message_bytes`
/// (64 MiB), which bounds what it sends.
pub const REPLY_FRAME_BYTES_MAX: usize = 256 << 20;

/// One Thrift connection to a DataNode, logged in.
pub struct ThriftConnection {
    stream: TcpStream,
    /// The session id `openSession` answered.
    pub session_id: i64,
    frame: Vec<u8>,
}

/// What `executeQueryStatementV2` or `fetchResultsV2` answered, as far as a bench reads it.
#[derive(Clone, Debug, Default)]
pub struct QueryPage {
    /// The outcome.
    pub status: Status,
    /// The query's id, for fetches (a fetch's reply has none).
    pub query_id: Option<i64>,
    /// Rows in the page's TsBlocks.
    pub rows: u64,
    /// Bytes of the page's TsBlocks.
    pub bytes: u64,
    /// More rows may be fetched.
    pub more: bool,
}

impl ThriftConnection {
    /// Connects to `address` (`host:port`) and logs in as root (tree dialect).
    pub async fn connect(address: &str) -> anyhow::Result<ThriftConnection> {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        let mut c = ThriftConnection {
            stream,
            session_id: 0,
            frame: Vec::new(),
        };
        let open = OpenSessionReq {
            client_protocol: 2,
            zone_id: "UTC".into(),
            username: "root".into(),
            password: Some("root".into()),
            configuration: [("sql_dialect".to_string(), "tree".to_string())].into(),
        };
        c.call("openSession", |w| open.write(w))
            .await
            .with_context(|| format!("openSession on {address}"))?;
        let mut status = Status::default();
        let mut session_id = 0;
        c.read_result(|r, h| match (h.id, h.ttype) {
            (1, TType::Struct) => {
                status = read_status(r)?;
                Ok(true)
            }
            (3, TType::I64) => {
                session_id = r.i64()?;
                Ok(true)
            }
            _ => Ok(false),
        })
        .with_context(|| format!("openSession on {address}"))?;
        anyhow::ensure!(
            status.code == 200,
            "openSession on {address}: {} {}",
            status.code,
            status.message.unwrap_or_default()
        );
        c.session_id = session_id;
        Ok(c)
    }

    /// Sends one call (its `_args` struct's field 1 written by `request`) and reads the reply
    /// frame.
    pub async fn call(
        &mut self,
        method: &str,
        request: impl FnOnce(&mut Writer),
    ) -> std::io::Result<()> {
        let mut w = Writer::new(Protocol::Binary);
        w.message_begin(method, MessageType::Call, 0);
        w.struct_begin();
        w.field_begin(TType::Struct, 1);
        request(&mut w);
        w.field_stop();
        w.struct_end();
        let frame = thrift_codec::frame(&w.into_bytes()).map_err(std::io::Error::other)?;
        self.stream.write_all(&frame).await?;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await?;
        let length = thrift_codec::frame_length(prefix, REPLY_FRAME_BYTES_MAX)
            .map_err(|e| std::io::Error::other(format!("the reply to {method}: {e}")))?;
        self.frame.resize(length, 0);
        self.stream.read_exact(&mut self.frame).await?;
        Ok(())
    }

    /// Reads the reply frame's success struct (field 0 of the result), handing each of its
    /// fields to `field`; a Thrift exception is an error carrying its message.
    fn read_result(
        &self,
        mut field: impl FnMut(&mut Reader, thrift_codec::FieldHeader) -> thrift_codec::Result<bool>,
    ) -> anyhow::Result<()> {
        let mut r = Reader::new(&self.frame, Protocol::Binary);
        let header = r.message_begin()?;
        if header.kind == MessageType::Exception {
            let mut message = String::new();
            let mut kind = 0;
            read_struct(&mut r, |r, h| match (h.id, h.ttype) {
                (1, TType::String) => {
                    message = r.string()?;
                    Ok(true)
                }
                (2, TType::I32) => {
                    kind = r.i32()?;
                    Ok(true)
                }
                _ => Ok(false),
            })?;
            anyhow::bail!("{}: Thrift exception {kind}: {message}", header.name);
        }
        anyhow::ensure!(
            header.kind == MessageType::Reply,
            "{}: a {:?} where a reply was expected",
            header.name,
            header.kind
        );
        let mut found = false;
        read_struct(&mut r, |r, h| {
            if h.id == 0 && h.ttype == TType::Struct {
                found = true;
                read_struct(r, &mut field)?;
                return Ok(true);
            }
            Ok(false)
        })?;
        anyhow::ensure!(found, "{}: a reply without a result", header.name);
        Ok(())
    }

    /// The status in a reply of a call that returns a `TSStatus`.
    pub fn reply_status(&self) -> anyhow::Result<Status> {
        let mut r = Reader::new(&self.frame, Protocol::Binary);
        let header = r.message_begin()?;
        anyhow::ensure!(
            header.kind == MessageType::Reply,
            "{}: a Thrift exception",
            header.name
        );
        let mut status = None;
        read_struct(&mut r, |r, h| {
            if h.id == 0 && h.ttype == TType::Struct {
                status = Some(read_status(r)?);
                return Ok(true);
            }
            Ok(false)
        })?;
        status.context("a reply without a status")
    }

    /// `insertTablet` of `tablet` (tree model, not aligned); the status it answered.
    pub async fn insert_tablet(&mut self, tablet: &Tablet) -> anyhow::Result<Status> {
        let req = insert_tablet_req(self.session_id, tablet);
        self.call("insertTablet", |w| req.write(w)).await?;
        self.reply_status()
    }

    /// `executeUpdateStatementV2` of `statement`; the status it answered.
    pub async fn execute_update(&mut self, statement: &str) -> anyhow::Result<Status> {
        let session_id = self.session_id;
        self.call("executeUpdateStatementV2", |w| {
            write_execute_statement_req(w, session_id, statement, 0)
        })
        .await?;
        Ok(self.read_page(1, 2, 13, 14)?.status)
    }

    /// `executeQueryStatementV2` of `statement` asking `fetch_size` rows a page: the first page.
    pub async fn execute_query(
        &mut self,
        statement: &str,
        fetch_size: i32,
    ) -> anyhow::Result<QueryPage> {
        let session_id = self.session_id;
        self.call("executeQueryStatementV2", |w| {
            write_execute_statement_req(w, session_id, statement, fetch_size)
        })
        .await?;
        self.read_page(1, 2, 13, 14)
    }

    /// `fetchResultsV2` of the next page of `query_id`.
    pub async fn fetch(&mut self, query_id: i64, fetch_size: i32) -> anyhow::Result<QueryPage> {
        let session_id = self.session_id;
        self.call("fetchResultsV2", |w| {
            w.struct_begin();
            w.field_begin(TType::I64, 1);
            w.i64(session_id);
            w.field_begin(TType::String, 2);
            w.string("");
            w.field_begin(TType::I32, 3);
            w.i32(fetch_size);
            w.field_begin(TType::I64, 4);
            w.i64(query_id);
            w.field_begin(TType::Bool, 5);
            w.bool(true);
            w.field_stop();
            w.struct_end();
        })
        .await?;
        // `TSFetchResultsResp`: no query id (field 2 is `hasResultSet`, a bool).
        self.read_page(1, -1, 6, 7)
    }

    /// A `TSExecuteStatementResp` (status 1, query id 2, TsBlocks 13, more 14) or a
    /// `TSFetchResultsResp` (status 1, TsBlocks 6, more 7) from the reply frame.
    fn read_page(
        &self,
        status_id: i16,
        query_id: i16,
        blocks_id: i16,
        more_id: i16,
    ) -> anyhow::Result<QueryPage> {
        let mut page = QueryPage::default();
        self.read_result(|r, h| {
            if h.id == status_id && h.ttype == TType::Struct {
                page.status = read_status(r)?;
            } else if h.id == query_id && h.ttype == TType::I64 {
                page.query_id = Some(r.i64()?);
            } else if h.id == more_id && h.ttype == TType::Bool {
                page.more = r.bool()?;
            } else if h.id == blocks_id && h.ttype == TType::List {
                let (element, n) = r.list_begin()?;
                for _ in 0..n {
                    if element != TType::String {
                        r.skip(element)?;
                        continue;
                    }
                    let block = r.binary()?;
                    page.bytes += block.len() as u64;
                    page.rows += tsblock_rows(block).ok_or_else(|| {
                        thrift_codec::Error::BadFrame(format!(
                            "a TsBlock of {} bytes without a row count",
                            block.len()
                        ))
                    })?;
                }
                r.container_end();
            } else {
                return Ok(false);
            }
            Ok(true)
        })?;
        Ok(page)
    }
}

/// Rows of one TsBlock (`i32` value columns N, N type bytes, `i32` rows, big-endian), `None`
/// when it is too short to say.
pub fn tsblock_rows(block: &[u8]) -> Option<u64> {
    let columns = i32::from_be_bytes(block.get(0..4)?.try_into().ok()?);
    let at = 4 + usize::try_from(columns).ok()?;
    let rows = i32::from_be_bytes(block.get(at..at + 4)?.try_into().ok()?);
    u64::try_from(rows).ok()
}

/// Writes a `TSExecuteStatementReq` (statement id 1; `fetch_size` 0 for the server's default).
fn write_execute_statement_req(w: &mut Writer, session_id: i64, statement: &str, fetch_size: i32) {
    w.struct_begin();
    w.field_begin(TType::I64, 1);
    w.i64(session_id);
    w.field_begin(TType::String, 2);
    w.string(statement);
    w.field_begin(TType::I64, 3);
    w.i64(1);
    if fetch_size > 0 {
        w.field_begin(TType::I32, 4);
        w.i32(fetch_size);
    }
    w.field_stop();
    w.struct_end();
}

/// The `insertTablet` request of `tablet` in session `session_id` (tree model, not aligned).
pub fn insert_tablet_req(session_id: i64, tablet: &Tablet) -> InsertTabletReq {
    InsertTabletReq {
        session_id,
        prefix_path: tablet.device.clone(),
        measurements: tablet.measurements.clone(),
        values: iotdb_rpc::values::encode_tablet_columns(&tablet.columns, &tablet.bitmaps),
        timestamps: iotdb_rpc::values::encode_timestamps(&tablet.timestamps),
        types: tablet
            .data_types
            .iter()
            .map(|t| i32::from(t.code()))
            .collect(),
        size: tablet.timestamps.len() as i32,
        is_aligned: false,
        write_to_table: false,
        column_categories: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsblock_says_its_rows() {
        let times = [1i64, 2, 3];
        let column = common::Column::Double(vec![1.0, 2.0, 3.0]);
        let block = iotdb_rpc::tsblock::encode(&times, &[(column, None)]);
        assert_eq!(tsblock_rows(&block), Some(3));
        assert_eq!(tsblock_rows(&block[..6]), None);
        assert_eq!(tsblock_rows(&[]), None);
    }
}
