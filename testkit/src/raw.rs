//! Raw `SessionService` calls for tests that look at statuses as the DataNode answers them
//! (the session crate would retry or translate them).

use std::time::{Duration, Instant};

use crate::{RawClient, DEADLINE};
use common::{StatusCode, Tablet};

/// One InsertTablet RPC. A 400 REDIRECTION_RECOMMEND (written; the leader is elsewhere) is
/// answered as 200 so tests assert on the outcome; [`insert_raw`] keeps the hint.
pub async fn insert(client: &mut RawClient, t: &Tablet) -> proto::Status {
    let mut s = insert_raw(client, t).await;
    if s.is(StatusCode::RedirectionRecommend) {
        s.code = StatusCode::Success.wire();
        s.redirect = None;
    }
    s
}

/// One InsertTablet RPC, the status as answered.
pub async fn insert_raw(client: &mut RawClient, t: &Tablet) -> proto::Status {
    client
        .insert_tablet(proto::InsertTabletReq {
            session_id: 1,
            tablet: Some(datanode::convert::tablet_to_wire(t)),
        })
        .await
        .expect("InsertTablet RPC")
        .into_inner()
}

/// Inserts until the answer is not a retryable one (as a session does with 536 and leader
/// changes), within [`DEADLINE`]; returns the last status.
pub async fn insert_retrying(client: &mut RawClient, t: &Tablet) -> proto::Status {
    let start = Instant::now();
    loop {
        let s = insert(client, t).await;
        if s.code == 200 || !s.need_retry || start.elapsed() > DEADLINE {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Queries until the answer is 200 (a node may be fenced for a moment on a slow machine; reads
/// fail closed and the client tries again), within [`DEADLINE`]; returns the last answer.
pub async fn query_ok(
    client: &mut RawClient,
    device: &str,
    from: i64,
    to: i64,
) -> proto::QueryRawResp {
    let start = Instant::now();
    loop {
        let r = query(client, device, from, to).await;
        if code(&r.status) == 200 || start.elapsed() > DEADLINE {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of a counter on a `/metrics` page.
pub fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in\n{page}"))
}

/// A series path.
pub fn path(device: &str, measurement: &str) -> proto::SeriesPath {
    proto::SeriesPath {
        device: device.into(),
        measurement: measurement.into(),
    }
}

/// QueryRaw of s1 and s2 of `device` in `[from, to)`.
pub async fn query(
    client: &mut RawClient,
    device: &str,
    from: i64,
    to: i64,
) -> proto::QueryRawResp {
    client
        .query_raw(proto::QueryRawReq {
            session_id: 1,
            paths: vec![path(device, "s1"), path(device, "s2")],
            start_time: from,
            end_time: to,
            points_limit: 0,
        })
        .await
        .expect("QueryRaw RPC")
        .into_inner()
}

/// The code of an optional status (-1 when absent).
pub fn code(status: &Option<proto::Status>) -> i32 {
    status.as_ref().map_or(-1, |s| s.code)
}

/// Asserts that the query returned exactly the tablet's points for s1.
pub fn assert_s1_matches(resp: &proto::QueryRawResp, expected: &Tablet) {
    assert_eq!(code(&resp.status), 200, "{:?}", resp.status);
    let s1 = resp
        .series
        .iter()
        .find(|s| s.path.as_ref().is_some_and(|p| p.measurement == "s1"))
        .expect("s1 is returned");
    assert_eq!(s1.timestamps, expected.timestamps);
    let column = s1.values.clone().expect("s1 has values");
    let (values, _) = proto::column_from_wire(column, common::DataType::Int64, s1.timestamps.len())
        .expect("s1 holds INT64 values");
    let want: Vec<i64> = expected.timestamps.iter().map(|t| t * 10).collect();
    assert_eq!(values, common::Column::Int64(want));
}
