//! The queries this DataNode runs (issue 40's governance): `SHOW QUERIES`, `KILL QUERY '<id>'`,
//! `KILL ALL QUERIES` and the Thrift `cancelOperation`.
//!
//! A statement registers when it starts and stays registered while its result is open (a
//! Thrift query's until its client read it to the end, closed or cancelled it): its
//! [`QueryTicket`] lives in its [`super::deadline::QueryDeadline`], and dropping the last copy
//! deregisters it. A kill marks the ticket and wakes the step the query waits in, which answers
//! 715 QUERY_WAS_KILLED; its owner then drops the query and, with it, the result's memory. A
//! statement that is not a query (a write, a schema change) is listed while it runs but never cut
//! off by a kill, as by a deadline.
//!
//! Ids are IoTDB's shape, `yyyyMMdd_HHmmss_<sequence>_<DataNode id>`, so a kill names the
//! DataNode running the query; another DataNode's queries are reached over the internal
//! service (`ListQueries`, `KillQuery`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use common::views::QueryView;
use common::{Status, StatusCode};
use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::parts::Shared;

/// The registry of one DataNode.
pub(crate) struct QueryRegistry {
    data_node: u64,
    sequence: AtomicU64,
    running: Mutex<BTreeMap<String, Weak<QueryTicket>>>,
}

/// A registered statement; dropping it deregisters it.
pub(crate) struct QueryTicket {
    id: String,
    statement: String,
    user: String,
    started_ms: i64,
    started: Instant,
    killed: AtomicBool,
    wake: Notify,
    registry: Weak<QueryRegistry>,
}

/// Bytes of a statement's text kept for `SHOW QUERIES`.
const STATEMENT_SHOWN_BYTES: usize = 1024;

impl QueryRegistry {
    pub(crate) fn new(data_node: u64) -> Arc<QueryRegistry> {
        Arc::new(QueryRegistry {
            data_node,
            sequence: AtomicU64::new(1),
            running: Mutex::new(BTreeMap::new()),
        })
    }

    /// Registers `statement`, sent by `user`, as running from now.
    pub(crate) fn register(self: &Arc<Self>, statement: &str, user: &str) -> Arc<QueryTicket> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}_{sequence:05}_{}", stamp(now), self.data_node);
        let ticket = Arc::new(QueryTicket {
            id: id.clone(),
            statement: shown(statement),
            user: user.to_string(),
            started_ms: now,
            started: Instant::now(),
            killed: AtomicBool::new(false),
            wake: Notify::new(),
            registry: Arc::downgrade(self),
        });
        self.running.lock().insert(id, Arc::downgrade(&ticket));
        ticket
    }

    /// The running statements `user` may see (root: all), oldest first.
    pub(crate) fn list(&self, user: &str) -> Vec<QueryView> {
        let running = self.running.lock();
        running
            .values()
            .filter_map(Weak::upgrade)
            .filter(|t| may_manage(user, t))
            .map(|t| QueryView {
                started_ms: t.started_ms,
                id: t.id.clone(),
                data_node: self.data_node,
                elapsed_secs: t.started.elapsed().as_secs_f32(),
                statement: t.statement.clone(),
                user: t.user.clone(),
            })
            .collect()
    }

    /// Kills the statement `id` (every one `user` may manage when `None`); how many were.
    pub(crate) fn kill(&self, id: Option<&str>, user: &str) -> usize {
        let running = self.running.lock();
        let tickets: Vec<Arc<QueryTicket>> = match id {
            Some(id) => running
                .get(id)
                .and_then(Weak::upgrade)
                .into_iter()
                .collect(),
            None => running.values().filter_map(Weak::upgrade).collect(),
        };
        drop(running);
        let mut killed = 0;
        for ticket in tickets.iter().filter(|t| may_manage(user, t)) {
            ticket.killed.store(true, Ordering::Release);
            ticket.wake.notify_waiters();
            killed += 1;
        }
        killed
    }

    /// The DataNode an id names (its last `_` field), if it is one of ours in shape.
    pub(crate) fn node_of(id: &str) -> Option<u64> {
        id.rsplit('_').next()?.parse().ok()
    }

    /// This DataNode's id.
    pub(crate) fn data_node(&self) -> u64 {
        self.data_node
    }
}

impl QueryTicket {
    /// True once killed.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// Resolves once killed (at once if already).
    pub(crate) async fn killed(&self) {
        loop {
            let woken = self.wake.notified();
            if self.is_killed() {
                return;
            }
            woken.await;
        }
    }

    /// Its id.
    #[cfg(test)]
    pub(crate) fn id(&self) -> &str {
        &self.id
    }
}

impl Drop for QueryTicket {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.running.lock().remove(&self.id);
        }
    }
}

/// root manages every statement, another user its own.
fn may_manage(user: &str, ticket: &QueryTicket) -> bool {
    user == ROOT_USER || ticket.user == user
}

/// The user who manages every other.
const ROOT_USER: &str = "root";

/// At most [`STATEMENT_SHOWN_BYTES`] of `statement`, cut at a character boundary.
fn shown(statement: &str) -> String {
    let mut end = statement.len().min(STATEMENT_SHOWN_BYTES);
    while !statement.is_char_boundary(end) {
        end -= 1;
    }
    statement[..end].trim().to_string()
}

/// `yyyyMMdd_HHmmss` of `ms` since the epoch, UTC.
fn stamp(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, of_day) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = sql::time::civil_from_days(days);
    format!(
        "{year:04}{month:02}{day:02}_{:02}{:02}{:02}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// `SHOW QUERIES` for `user`: this DataNode's statements, then every other known DataNode's
/// (`ListQueries`); a DataNode that cannot be reached is left out.
pub(crate) async fn show(shared: &Shared, user: &str) -> Vec<QueryView> {
    let mut all = shared.queries.list(user);
    for node in shared.peers.others() {
        let Some(address) = shared.peers.address(node) else {
            continue;
        };
        match shared.peers.rpc().list_queries(&address, user).await {
            Ok(queries) => all.extend(queries),
            Err(status) => {
                tracing::warn!(node, %status, "SHOW QUERIES left out a DataNode");
            }
        }
    }
    all.sort_by(|a, b| (a.started_ms, &a.id).cmp(&(b.started_ms, &b.id)));
    all
}

/// `KILL QUERY`: the statement `id` on the DataNode its id names, or (`None`) every statement
/// `user` may manage on every DataNode that can be reached; how many were killed.
pub(crate) async fn kill(shared: &Shared, id: Option<&str>, user: &str) -> Result<usize, Status> {
    let here = shared.queries.data_node();
    let Some(id) = id else {
        let mut killed = shared.queries.kill(None, user);
        for node in shared.peers.others() {
            let Some(address) = shared.peers.address(node) else {
                continue;
            };
            match shared.peers.rpc().kill_query(&address, None, user).await {
                Ok(n) => killed += n,
                Err(status) => {
                    tracing::warn!(node, %status, "KILL ALL QUERIES left out a DataNode")
                }
            }
        }
        return Ok(killed);
    };
    match QueryRegistry::node_of(id) {
        Some(node) if node != here => {
            let address = shared.peers.address(node).ok_or_else(|| {
                Status::new(
                    StatusCode::NoSuchQuery,
                    format!("query {id} names DataNode {node}, which this DataNode does not know"),
                )
            })?;
            shared
                .peers
                .rpc()
                .kill_query(&address, Some(id), user)
                .await
        }
        _ => Ok(shared.queries.kill(Some(id), user)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_listed_while_held_and_names_its_data_node() {
        let registry = QueryRegistry::new(7);
        let ticket = registry.register("  select * from root.sg.d1  ", "alice");
        assert_eq!(QueryRegistry::node_of(ticket.id()), Some(7));
        let listed = registry.list("root");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].statement, "select * from root.sg.d1");
        assert_eq!(listed[0].user, "alice");
        assert!(
            registry.list("bob").is_empty(),
            "another user's query is not bob's to see"
        );
        assert_eq!(registry.list("alice").len(), 1);
        drop(ticket);
        assert!(registry.list("root").is_empty());
    }

    #[tokio::test]
    async fn a_kill_wakes_the_waiting_step_and_only_the_owner_or_root_may_kill() {
        let registry = QueryRegistry::new(1);
        let ticket = registry.register("select 1", "alice");
        assert_eq!(registry.kill(Some(ticket.id()), "bob"), 0);
        assert!(!ticket.is_killed());
        let waiting = tokio::spawn({
            let ticket = ticket.clone();
            async move { ticket.killed().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(registry.kill(Some(ticket.id()), "alice"), 1);
        waiting.await.unwrap();
        assert!(ticket.is_killed());
        let other = registry.register("select 2", "carol");
        assert_eq!(registry.kill(None, "root"), 2);
        assert!(other.is_killed());
        assert_eq!(registry.kill(Some("20240101_000000_00009_1"), "root"), 0);
    }

    #[test]
    fn ids_have_iotdbs_shape() {
        assert_eq!(stamp(0), "19700101_000000");
        assert_eq!(stamp(1_704_164_645_000), "20240102_030405");
        assert_eq!(shown(&"é".repeat(1000)).len(), 1024);
    }
}
