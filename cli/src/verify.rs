//! `fencepost verify`: for every region, polls each replica's DataNode for its digest until all
//! replicas report the same applied index, then compares the digests there. A replica may
//! legitimately be briefly behind, so only a common applied index makes digests comparable;
//! under a steady stream of writes the replicas may never meet at one index and the region ends
//! as TIMEOUT.
//!
//! Verdicts: `OK` (one digest at one applied index), `MISMATCH` (different digests at one
//! applied index), `UNREACHABLE` (a replica's DataNode did not answer, or is not in the cluster,
//! when the time ran out), `TIMEOUT` (no common applied index in time, or a replica not
//! reported). The JSON report's status is 200 when every region is OK, else 305 for a mismatch,
//! 1007 for an unreachable replica, 712 for a timeout (in that order of precedence).
//!
//! A database with a TTL is compared above its read cutoff (now - ttl), fixed once at the start
//! for every replica and round: each replica's compaction removes expired points on its own
//! clock, so below the cutoff replicas may legitimately differ for a while.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{StatusCode, Value};
use serde_json::json;
use session::{RegionDigestView, RegionView, Session, SessionConfig};

use crate::exec;
use crate::output;

/// Pause between two polls of the replicas, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 100;
/// Longest `--timeout-s` accepted (one day).
pub const TIMEOUT_S_MAX: u64 = 86_400;

/// `fencepost verify` arguments.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Seconds to wait for every region's replicas to reach a common applied index and answer
    /// their digests (1..=86400); one digest may take up to all of it.
    #[arg(long = "timeout-s", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=TIMEOUT_S_MAX))]
    pub timeout_s: u64,
}

/// How one region came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Every replica has the same digest at the same applied index.
    Ok,
    /// No common applied index (or a replica not reported) before the deadline.
    Timeout,
    /// A replica's DataNode did not answer at the deadline, or is unknown.
    Unreachable,
    /// Replicas at the same applied index have different digests.
    Mismatch,
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "OK",
            Verdict::Timeout => "TIMEOUT",
            Verdict::Unreachable => "UNREACHABLE",
            Verdict::Mismatch => "MISMATCH",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Verdict::Ok => StatusCode::Success,
            Verdict::Timeout => StatusCode::InternalRequestTimeOut,
            Verdict::Unreachable => StatusCode::CanNotConnectDatanode,
            Verdict::Mismatch => StatusCode::InternalServerError,
        }
    }
}

/// What one replica last said.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Reply {
    /// Its digest.
    Digest(RegionDigestView),
    /// Its DataNode answered without this region.
    Missing,
    /// Its DataNode did not answer (or has no known endpoint).
    Failed(String),
}

/// One region's replicas and what each said last.
struct RegionCheck {
    region: RegionView,
    replies: BTreeMap<u64, Reply>,
    verdict: Option<Verdict>,
}

impl RegionCheck {
    /// Settles the region when every replica reported one applied index.
    fn settle(&mut self) {
        let digests: Vec<&RegionDigestView> = self
            .replies
            .values()
            .filter_map(|r| match r {
                Reply::Digest(d) => Some(d),
                _ => None,
            })
            .collect();
        if digests.len() != self.region.data_node_ids.len() {
            return;
        }
        let indexes: BTreeSet<u64> = digests.iter().map(|d| d.applied_index).collect();
        if indexes.len() != 1 {
            return;
        }
        let values: BTreeSet<u64> = digests.iter().map(|d| d.digest).collect();
        self.verdict = Some(if values.len() == 1 {
            Verdict::Ok
        } else {
            Verdict::Mismatch
        });
    }

    /// The verdict of a region the deadline caught unsettled.
    fn give_up(&mut self) {
        let failed = self.replies.values().any(|r| matches!(r, Reply::Failed(_)));
        self.verdict = Some(if failed {
            Verdict::Unreachable
        } else {
            Verdict::Timeout
        });
    }

    fn verdict(&self) -> Verdict {
        self.verdict
            .expect("every region is settled before the report")
    }
}

/// Runs the check and prints the report; 0 when every region is OK, 1 otherwise.
pub async fn run(
    endpoints: &[String],
    json: bool,
    config: SessionConfig,
    args: VerifyArgs,
) -> anyhow::Result<u8> {
    let session = Arc::new(exec::connect(endpoints, config).await?);
    let regions = session.show_regions().await?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let visible_from: BTreeMap<String, i64> = session
        .show_databases_with_ttl()
        .await?
        .into_iter()
        .filter_map(|(database, ttl)| Some((database, now_ms.saturating_sub(ttl?))))
        .collect();
    let addresses: BTreeMap<u64, String> = session
        .show_cluster()
        .await?
        .data_nodes
        .into_iter()
        .map(|d| (d.data_node_id, d.rpc_endpoint))
        .collect();
    let mut checks: Vec<RegionCheck> = regions
        .into_iter()
        .map(|region| RegionCheck {
            region,
            replies: BTreeMap::new(),
            verdict: None,
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(args.timeout_s);
    poll(&session, &addresses, &visible_from, &mut checks, deadline).await;
    let worst = checks
        .iter()
        .map(RegionCheck::verdict)
        .max()
        .unwrap_or(Verdict::Ok);
    if json {
        println!("{}", json_report(&checks, worst));
    } else {
        print!("{}", table_report(&checks));
    }
    Ok(u8::from(worst != Verdict::Ok))
}

/// Polls every DataNode holding an unsettled replica, once per round, until every region is
/// settled or the deadline passes. Each replica's digest is asked of its own (one region per
/// request) and may take until the deadline: a digest reads every point of the region, which for
/// a region of hundreds of millions of points takes longer than any request timeout. The
/// DataNodes are asked at once, each one's regions in turn (a DataNode computes one digest at a
/// time); a request given up on stops the digest it started.
async fn poll(
    session: &Arc<Session>,
    addresses: &BTreeMap<u64, String>,
    visible_from: &BTreeMap<String, i64>,
    checks: &mut [RegionCheck],
    deadline: Instant,
) {
    loop {
        let mut asked: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for c in checks.iter().filter(|c| c.verdict.is_none()) {
            for &node in &c.region.data_node_ids {
                asked.entry(node).or_default().push(c.region.region_id);
            }
        }
        if asked.is_empty() {
            return;
        }
        let mut calls = tokio::task::JoinSet::new();
        for (node, regions) in asked {
            let endpoint = addresses.get(&node).cloned();
            let (session, visible_from) = (session.clone(), visible_from.clone());
            calls.spawn(async move {
                let mut answers = BTreeMap::new();
                for region in regions {
                    let answer = match &endpoint {
                        Some(endpoint) => {
                            let left = deadline
                                .saturating_duration_since(Instant::now())
                                .max(Duration::from_secs(1));
                            session
                                .region_digest_of(endpoint, region, &visible_from, left)
                                .await
                                .map_err(|e| e.to_string())
                        }
                        None => Err(format!("DataNode {node} is not in SHOW CLUSTER")),
                    };
                    answers.insert(region, answer);
                }
                (node, answers)
            });
        }
        let mut answers = BTreeMap::new();
        while let Some(joined) = calls.join_next().await {
            let (node, by_region) = joined.expect("a digest task panicked");
            answers.insert(node, by_region);
        }
        for check in checks.iter_mut().filter(|c| c.verdict.is_none()) {
            record(check, &answers);
            check.settle();
        }
        if Instant::now() >= deadline {
            for check in checks.iter_mut().filter(|c| c.verdict.is_none()) {
                check.give_up();
            }
            return;
        }
        tokio::time::sleep(Duration::from_millis(POLL_INTERVAL_MS)).await;
    }
}

/// What each DataNode answered, per region asked.
type Answers = BTreeMap<u64, BTreeMap<u64, Result<Option<RegionDigestView>, String>>>;

/// Stores what each replica's DataNode said about this region.
fn record(check: &mut RegionCheck, answers: &Answers) {
    let region_id = check.region.region_id;
    for &node in &check.region.data_node_ids {
        let answer = answers.get(&node).and_then(|a| a.get(&region_id));
        let reply = match answer {
            Some(Ok(Some(digest))) => Reply::Digest(*digest),
            Some(Ok(None)) => Reply::Missing,
            Some(Err(e)) => Reply::Failed(e.clone()),
            None => unreachable!("DataNode {node} of region {region_id} was polled"),
        };
        check.replies.insert(node, reply);
    }
}

fn hex(digest: u64) -> String {
    format!("{digest:016x}")
}

/// The common applied index, or each replica's, for the report.
fn applied_indexes(check: &RegionCheck) -> BTreeSet<u64> {
    check
        .replies
        .values()
        .filter_map(|r| match r {
            Reply::Digest(d) => Some(d.applied_index),
            _ => None,
        })
        .collect()
}

fn digests(check: &RegionCheck) -> BTreeSet<u64> {
    check
        .replies
        .values()
        .filter_map(|r| match r {
            Reply::Digest(d) => Some(d.digest),
            _ => None,
        })
        .collect()
}

fn joined<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// One line per region in a boxed table, then a summary line.
fn table_report(checks: &[RegionCheck]) -> String {
    let columns: Vec<String> = [
        "RegionId",
        "Database",
        "Replicas",
        "AppliedIndex",
        "Digests",
        "Verdict",
        "Detail",
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    let rows: Vec<Vec<Option<Value>>> = checks
        .iter()
        .map(|c| {
            let text = |s: String| Some(Value::Text(s));
            vec![
                Some(Value::Int64(
                    i64::try_from(c.region.region_id).unwrap_or(i64::MAX),
                )),
                text(c.region.database.clone()),
                text(joined(&c.region.data_node_ids)),
                text(joined(applied_indexes(c))),
                text(joined(digests(c).into_iter().map(hex))),
                text(c.verdict().name().to_string()),
                text(detail(c)),
            ]
        })
        .collect();
    let mismatches = checks
        .iter()
        .filter(|c| c.verdict() == Verdict::Mismatch)
        .count();
    let bad = checks.iter().filter(|c| c.verdict() != Verdict::Ok).count();
    format!(
        "{}{} regions checked, {bad} not OK, {mismatches} mismatches\n",
        output::table(&columns, &rows),
        checks.len()
    )
}

/// Why a replica is not counted: its DataNode's error, or the region missing there.
fn detail(check: &RegionCheck) -> String {
    let notes: Vec<String> = check
        .replies
        .iter()
        .filter_map(|(node, reply)| match reply {
            Reply::Digest(_) => None,
            Reply::Missing => Some(format!("DataNode {node}: region not reported")),
            Reply::Failed(e) => Some(format!("DataNode {node}: {e}")),
        })
        .collect();
    notes.join("; ")
}

fn json_report(checks: &[RegionCheck], worst: Verdict) -> serde_json::Value {
    let regions: Vec<serde_json::Value> = checks.iter().map(json_region).collect();
    let mismatches = checks
        .iter()
        .filter(|c| c.verdict() == Verdict::Mismatch)
        .count();
    json!({
        "status": worst.status().code(),
        "message": format!("{} regions checked, worst verdict {}", checks.len(), worst.name()),
        "regions": regions,
        "mismatches": mismatches,
    })
}

fn json_region(check: &RegionCheck) -> serde_json::Value {
    let replicas: Vec<serde_json::Value> = check
        .region
        .data_node_ids
        .iter()
        .map(|node| match check.replies.get(node) {
            Some(Reply::Digest(d)) => json!({
                "data_node_id": node,
                "applied_index": d.applied_index,
                "digest": hex(d.digest),
                "is_leader": d.is_leader,
            }),
            Some(Reply::Missing) => json!({"data_node_id": node, "error": "region not reported"}),
            Some(Reply::Failed(e)) => json!({"data_node_id": node, "error": e}),
            None => json!({"data_node_id": node, "error": "not polled"}),
        })
        .collect();
    let indexes = applied_indexes(check);
    let common_index = (indexes.len() == 1)
        .then(|| indexes.first().copied())
        .flatten();
    json!({
        "region_id": check.region.region_id,
        "database": check.region.database,
        "verdict": check.verdict().name(),
        "applied_index": common_index,
        "digests": digests(check).into_iter().map(hex).collect::<Vec<_>>(),
        "replicas": replicas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(nodes: &[u64]) -> RegionCheck {
        RegionCheck {
            region: RegionView {
                region_id: 7,
                database: "root.sg".into(),
                data_node_ids: nodes.to_vec(),
                preferred_leader_id: nodes[0],
                leader_id: 0,
                migration: None,
            },
            replies: BTreeMap::new(),
            verdict: None,
        }
    }

    fn digest(node: u64, applied_index: u64, digest: u64) -> Reply {
        Reply::Digest(RegionDigestView {
            region_id: 7,
            data_node_id: node,
            applied_index,
            digest,
            is_leader: node == 1,
        })
    }

    #[test]
    fn settles_only_at_a_common_applied_index() {
        let mut check = region(&[1, 2]);
        check.replies.insert(1, digest(1, 5, 0xa));
        check.replies.insert(2, digest(2, 4, 0xb));
        check.settle();
        assert_eq!(check.verdict, None, "a replica behind is not compared");
        check.replies.insert(2, digest(2, 5, 0xa));
        check.settle();
        assert_eq!(check.verdict, Some(Verdict::Ok));
    }

    #[test]
    fn different_digests_at_one_index_mismatch() {
        let mut check = region(&[1, 2, 3]);
        for node in 1..=3 {
            check
                .replies
                .insert(node, digest(node, 9, 0xa + u64::from(node == 3)));
        }
        check.settle();
        assert_eq!(check.verdict, Some(Verdict::Mismatch));
        assert_eq!(
            json_region(&check)["digests"],
            json!(["000000000000000a", "000000000000000b"])
        );
    }

    #[test]
    fn giving_up_tells_unreachable_from_timeout() {
        let mut check = region(&[1, 2]);
        check.replies.insert(1, digest(1, 5, 0xa));
        check.replies.insert(2, Reply::Missing);
        check.settle();
        assert_eq!(check.verdict, None);
        check.give_up();
        assert_eq!(check.verdict, Some(Verdict::Timeout));
        let mut check = region(&[1, 2]);
        check.replies.insert(1, digest(1, 5, 0xa));
        check.replies.insert(2, Reply::Failed("refused".into()));
        check.give_up();
        assert_eq!(check.verdict, Some(Verdict::Unreachable));
        assert_eq!(detail(&check), "DataNode 2: refused");
    }

    #[test]
    fn the_worst_verdict_decides_the_status() {
        assert!(
            Verdict::Mismatch > Verdict::Unreachable && Verdict::Unreachable > Verdict::Timeout
        );
        assert_eq!(Verdict::Mismatch.status().code(), 305);
        assert_eq!(Verdict::Ok.status().code(), 200);
    }
}
