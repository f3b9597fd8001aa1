//! The leader's record of when it last reached each DataNode, and what that means for the lease
//! (DESIGN §4). Pure: time is an argument.
//!
//! Architecture invariant: the tracker never believes a DataNode fenced earlier than the DataNode
//! can have fenced itself. Contacts are recorded at the time the reply *arrived* (the latest time
//! the DataNode can have processed the heartbeat), a new leader counts every DataNode as
//! contacted at its election (it has no history, so it assumes the worst), and a contact never
//! moves backwards.

use std::collections::BTreeMap;

/// The lease timings of the cluster, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    /// `metadata_lease_fence_ms`.
    pub fence_ms: u64,
    /// `lease_proceed_margin_ms`.
    pub proceed_margin_ms: u64,
    /// `failure_detector_threshold_ms`.
    pub failure_detector_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Contact {
    incarnation_epoch: u64,
    last_contact_ms: u64,
}

/// Why a contact was not recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContactRefused {
    /// The reply came from an incarnation older than the registered one.
    StaleIncarnation {
        /// The epoch in the reply.
        got: u64,
        /// The registered epoch.
        current: u64,
    },
    /// The DataNode is not tracked (not registered, or this node is not the leader).
    UnknownNode,
}

/// Contact times per DataNode, valid only while this ConfigNode leads.
#[derive(Clone, Debug)]
pub struct ContactTracker {
    timings: LeaseTimings,
    leader_since_ms: Option<u64>,
    nodes: BTreeMap<u64, Contact>,
}

impl ContactTracker {
    /// A tracker of a ConfigNode that does not lead yet.
    pub fn new(timings: LeaseTimings) -> Self {
        ContactTracker {
            timings,
            leader_since_ms: None,
            nodes: BTreeMap::new(),
        }
    }

    /// The timings.
    pub fn timings(&self) -> LeaseTimings {
        self.timings
    }

    /// This ConfigNode became leader at `now_ms`: forget all history and count every DataNode
    /// as contacted now.
    pub fn become_leader(&mut self, now_ms: u64) {
        self.leader_since_ms = Some(now_ms);
        for contact in self.nodes.values_mut() {
            contact.last_contact_ms = now_ms;
        }
    }

    /// This ConfigNode stopped leading; its contact history is no evidence for a later term.
    pub fn step_down(&mut self) {
        self.leader_since_ms = None;
    }

    /// When this ConfigNode became leader, if it leads.
    pub fn leader_since_ms(&self) -> Option<u64> {
        self.leader_since_ms
    }

    /// Aligns the tracked set with the registry: new DataNodes and new incarnations (a
    /// registration is itself a contact) count as contacted now; removed ones are forgotten.
    pub fn sync_registry(&mut self, registry: &[(u64, u64)], now_ms: u64) {
        self.nodes
            .retain(|id, _| registry.iter().any(|(other, _)| other == id));
        for &(id, epoch) in registry {
            let contact = self.nodes.entry(id).or_insert(Contact {
                incarnation_epoch: epoch,
                last_contact_ms: now_ms,
            });
            if contact.incarnation_epoch < epoch {
                contact.incarnation_epoch = epoch;
                contact.last_contact_ms = contact.last_contact_ms.max(now_ms);
            }
        }
    }

    /// Records a successful reply from `id` (incarnation `epoch`) that arrived at `now_ms`.
    pub fn record_contact(
        &mut self,
        id: u64,
        epoch: u64,
        now_ms: u64,
    ) -> Result<(), ContactRefused> {
        let contact = self.nodes.get_mut(&id).ok_or(ContactRefused::UnknownNode)?;
        if epoch < contact.incarnation_epoch {
            return Err(ContactRefused::StaleIncarnation {
                got: epoch,
                current: contact.incarnation_epoch,
            });
        }
        if epoch > contact.incarnation_epoch {
            // The registry has not told us yet, but the DataNode can only hold an epoch the
            // registry minted; adopt it.
            contact.incarnation_epoch = epoch;
        }
        contact.last_contact_ms = contact.last_contact_ms.max(now_ms);
        Ok(())
    }

    /// The incarnation epoch tracked for `id`.
    pub fn epoch(&self, id: u64) -> Option<u64> {
        self.nodes.get(&id).map(|c| c.incarnation_epoch)
    }

    /// Milliseconds since the last contact with `id` (since the election if never reached).
    /// An untracked node is as old as the leadership (or, not leading, infinitely old).
    pub fn age_ms(&self, id: u64, now_ms: u64) -> u64 {
        let since = match (self.nodes.get(&id), self.leader_since_ms) {
            (Some(c), _) => c.last_contact_ms,
            (None, Some(leader_since)) => leader_since,
            (None, None) => return u64::MAX,
        };
        now_ms.saturating_sub(since)
    }

    /// The DataNode's lease is live as far as this leader can tell.
    pub fn holds_lease(&self, id: u64, now_ms: u64) -> bool {
        self.age_ms(id, now_ms) < self.timings.fence_ms
    }

    /// The DataNode has certainly fenced itself: `now − last contact > fence + margin`.
    pub fn is_fenced(&self, id: u64, now_ms: u64) -> bool {
        self.age_ms(id, now_ms) > self.timings.fence_ms + self.timings.proceed_margin_ms
    }

    /// The failure detector's verdict: Unknown after the threshold.
    pub fn is_unresponsive(&self, id: u64, now_ms: u64) -> bool {
        self.age_ms(id, now_ms) > self.timings.failure_detector_ms
    }

    /// The first time at which `id` counts as fenced, if it stays unreachable.
    pub fn fenced_at_ms(&self, id: u64, now_ms: u64) -> u64 {
        let age = self.age_ms(id, now_ms);
        let threshold = self.timings.fence_ms + self.timings.proceed_margin_ms;
        if age > threshold {
            now_ms
        } else {
            now_ms + (threshold - age) + 1
        }
    }

    /// DataNodes whose lease is live.
    pub fn lease_holders(&self, now_ms: u64) -> Vec<u64> {
        self.nodes
            .keys()
            .copied()
            .filter(|id| self.holds_lease(*id, now_ms))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: LeaseTimings = LeaseTimings {
        fence_ms: 20_000,
        proceed_margin_ms: 5000,
        failure_detector_ms: 20_000,
    };

    #[test]
    fn a_contact_keeps_the_lease_and_its_absence_fences_after_fence_plus_margin() {
        let mut t = ContactTracker::new(T);
        t.become_leader(0);
        t.sync_registry(&[(1, 1)], 0);
        t.record_contact(1, 1, 1000).unwrap();
        assert!(t.holds_lease(1, 20_999));
        assert!(!t.holds_lease(1, 21_000));
        assert!(!t.is_fenced(1, 26_000), "fence + margin not exceeded yet");
        assert!(t.is_fenced(1, 26_001));
        assert_eq!(t.fenced_at_ms(1, 1000), 26_001);
        assert!(t.is_unresponsive(1, 21_001));
        assert_eq!(t.lease_holders(5000), vec![1]);
        assert_eq!(t.lease_holders(21_000), Vec::<u64>::new());
    }

    #[test]
    fn a_new_leader_counts_everyone_as_contacted_at_its_election() {
        let mut t = ContactTracker::new(T);
        t.become_leader(0);
        t.sync_registry(&[(1, 1), (2, 1)], 0);
        t.step_down();
        // Long silence while another node led; then this node is elected again at 100 s.
        t.become_leader(100_000);
        assert_eq!(t.age_ms(1, 100_000), 0);
        assert!(!t.is_fenced(2, 125_000));
        assert!(t.is_fenced(2, 125_001));
        // A node registered later is unknown to the tracker: as old as the leadership.
        assert_eq!(t.age_ms(3, 110_000), 10_000);
    }

    #[test]
    fn an_older_incarnation_is_refused_and_contacts_never_move_back() {
        let mut t = ContactTracker::new(T);
        t.become_leader(0);
        t.sync_registry(&[(1, 1)], 0);
        t.sync_registry(&[(1, 2)], 500);
        assert_eq!(
            t.record_contact(1, 1, 1000),
            Err(ContactRefused::StaleIncarnation { got: 1, current: 2 })
        );
        assert_eq!(t.age_ms(1, 1000), 500);
        t.record_contact(1, 2, 3000).unwrap();
        t.record_contact(1, 2, 2000).unwrap();
        assert_eq!(
            t.age_ms(1, 3000),
            0,
            "a late reply does not move the contact back"
        );
        assert_eq!(t.record_contact(9, 1, 0), Err(ContactRefused::UnknownNode));
    }
}
