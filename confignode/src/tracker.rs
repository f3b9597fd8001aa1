//! The leader's record of when it last reached each DataNode, and what that means for the lease
//! (design §4). Pure: time is an argument.
//!
//! Architecture invariant: the tracker never believes a DataNode fenced earlier than the DataNode
//! can have fenced itself. Contacts are recorded at the time the reply *arrived* (the latest time
//! the DataNode can have processed the heartbeat), a new leader counts every DataNode as
//! contacted at its election (it has no history, so it assumes the worst), and a contact never
//! moves backwards. Every verdict is scoped to the term the tracker was told it leads in: a
//! tracker that does not lead (or leads another term than the caller's) calls nobody fenced.

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
    /// The latest contact with any older incarnation of this DataNode (0 if none was seen). An
    /// older incarnation may still be alive (paused, or on another host with the same data
    /// directory) and trust its caches until its own lease runs out.
    older_incarnations_last_contact_ms: u64,
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
    /// (term, election time) while this ConfigNode leads.
    leader_since: Option<(u64, u64)>,
    nodes: BTreeMap<u64, Contact>,
}

impl Contact {
    /// A newer incarnation took over: the old one's last contact is kept, since that process may
    /// still be alive until its own lease runs out.
    fn supersede(&mut self, epoch: u64) {
        debug_assert!(epoch > self.incarnation_epoch);
        self.older_incarnations_last_contact_ms = self
            .older_incarnations_last_contact_ms
            .max(self.last_contact_ms);
        self.incarnation_epoch = epoch;
    }
}

impl ContactTracker {
    /// A tracker of a ConfigNode that does not lead yet.
    pub fn new(timings: LeaseTimings) -> Self {
        ContactTracker {
            timings,
            leader_since: None,
            nodes: BTreeMap::new(),
        }
    }

    /// The timings.
    pub fn timings(&self) -> LeaseTimings {
        self.timings
    }

    /// This ConfigNode leads in `term` since `now_ms`: forget all history and count every
    /// DataNode (and every older incarnation of it) as contacted now. Idempotent within a term:
    /// whoever notices the leadership first (the leader loop or a fence operation) starts the
    /// clock, and a later call for the same term changes nothing.
    pub fn become_leader(&mut self, term: u64, now_ms: u64) {
        if self.leading_term() == Some(term) {
            return;
        }
        self.leader_since = Some((term, now_ms));
        for contact in self.nodes.values_mut() {
            contact.last_contact_ms = now_ms;
            contact.older_incarnations_last_contact_ms = now_ms;
        }
    }

    /// This ConfigNode stopped leading; its contact history is no evidence for a later term.
    pub fn step_down(&mut self) {
        self.leader_since = None;
    }

    /// When this ConfigNode became leader, if it leads.
    pub fn leader_since_ms(&self) -> Option<u64> {
        self.leader_since.map(|(_, since)| since)
    }

    /// The term this tracker leads in, if any.
    pub fn leading_term(&self) -> Option<u64> {
        self.leader_since.map(|(term, _)| term)
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
                older_incarnations_last_contact_ms: 0,
            });
            if contact.incarnation_epoch < epoch {
                contact.supersede(epoch);
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
            contact.supersede(epoch);
        }
        contact.last_contact_ms = contact.last_contact_ms.max(now_ms);
        Ok(())
    }

    /// The incarnation epoch tracked for `id`.
    pub fn epoch(&self, id: u64) -> Option<u64> {
        self.nodes.get(&id).map(|c| c.incarnation_epoch)
    }

    /// Milliseconds since the last contact with `id` (since the election if never reached).
    /// An untracked node is as old as the leadership. A tracker that does not lead knows nothing
    /// and assumes the worst: age 0, so nobody counts as fenced (C1 in REVIEW-2026-12).
    pub fn age_ms(&self, id: u64, now_ms: u64) -> u64 {
        let Some((_, leader_since)) = self.leader_since else {
            return 0;
        };
        let since = self
            .nodes
            .get(&id)
            .map_or(leader_since, |c| c.last_contact_ms.max(leader_since));
        now_ms.saturating_sub(since)
    }

    /// Like [`ContactTracker::is_fenced`], for a caller acting in `term`: false unless this
    /// tracker leads in exactly that term. A fence operation captured its term when it began; a
    /// verdict from a tracker that has not (yet, or any more) started that term's clock is no
    /// evidence.
    pub fn is_fenced_in(&self, term: u64, id: u64, now_ms: u64) -> bool {
        self.leading_term() == Some(term) && self.is_fenced(id, now_ms)
    }

    /// Every incarnation of `id` older than `epoch` has certainly fenced itself, as seen by a
    /// caller acting in `term`: `fence + margin` has passed since the last contact with any of
    /// them (or since this leader's election). A reply from a newer incarnation proves nothing
    /// about an older process that may still be alive.
    pub fn older_incarnations_fenced_in(
        &self,
        term: u64,
        id: u64,
        epoch: u64,
        now_ms: u64,
    ) -> bool {
        self.leading_term() == Some(term)
            && now_ms.saturating_sub(self.older_incarnations_since(id, epoch))
                > self.timings.fence_ms + self.timings.proceed_margin_ms
    }

    /// When every incarnation of `id` older than `epoch` counts as fenced, if nothing older is
    /// heard from again (for a tracker that does not lead: a full `fence + margin` from now).
    pub fn older_incarnations_fenced_at_ms(&self, id: u64, epoch: u64, now_ms: u64) -> u64 {
        let since = match self.leader_since {
            Some(_) => self.older_incarnations_since(id, epoch),
            None => now_ms,
        };
        since + self.timings.fence_ms + self.timings.proceed_margin_ms + 1
    }

    /// The last contact with any incarnation of `id` older than `epoch`, never before this
    /// leader's election (a tracker that does not lead: 0; its verdicts check the term).
    fn older_incarnations_since(&self, id: u64, epoch: u64) -> u64 {
        let leader_since = self.leader_since_ms().unwrap_or(0);
        match self.nodes.get(&id) {
            // The tracked incarnation is itself older than `epoch`: its contacts count too.
            Some(c) if c.incarnation_epoch < epoch => {
                c.last_contact_ms.max(c.older_incarnations_last_contact_ms)
            }
            Some(c) => c.older_incarnations_last_contact_ms,
            None => leader_since,
        }
        .max(leader_since)
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

    /// The first time at which `id` counts as fenced, if it stays unreachable (for a tracker
    /// that does not lead: a full `fence + margin` from now).
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
        t.become_leader(1, 0);
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
        t.become_leader(1, 0);
        t.sync_registry(&[(1, 1), (2, 1)], 0);
        t.step_down();
        // Long silence while another node led; then this node is elected again at 100 s.
        t.become_leader(2, 100_000);
        assert_eq!(t.age_ms(1, 100_000), 0);
        assert!(!t.is_fenced(2, 125_000));
        assert!(t.is_fenced(2, 125_001));
        // A node registered later is unknown to the tracker: as old as the leadership.
        assert_eq!(t.age_ms(3, 110_000), 10_000);
    }

    #[test]
    fn an_older_incarnation_is_refused_and_contacts_never_move_back() {
        let mut t = ContactTracker::new(T);
        t.become_leader(1, 0);
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

    #[test]
    fn a_tracker_that_does_not_lead_calls_nobody_fenced() {
        // C1: a ConfigNode that never led (or stepped down) has no history; before this fix an
        // untracked node read as infinitely old, i.e. fenced, on such a tracker.
        let mut t = ContactTracker::new(T);
        assert!(!t.is_fenced(1, 1_000_000));
        assert!(!t.is_fenced_in(1, 1, 1_000_000));
        t.become_leader(3, 0);
        t.sync_registry(&[(1, 1)], 0);
        assert!(t.is_fenced_in(3, 1, 25_001));
        assert!(
            !t.is_fenced_in(4, 1, 25_001),
            "another term's clock is no evidence"
        );
        t.step_down();
        assert!(!t.is_fenced(1, 1_000_000));
        assert!(!t.is_fenced_in(3, 1, 1_000_000));
    }

    #[test]
    fn become_leader_is_idempotent_within_a_term() {
        let mut t = ContactTracker::new(T);
        t.become_leader(5, 1000);
        t.sync_registry(&[(1, 1)], 1000);
        // The leader loop noticing the same term later must not restart the clock.
        t.become_leader(5, 9000);
        assert_eq!(t.leader_since_ms(), Some(1000));
        assert!(t.is_fenced_in(5, 1, 26_001));
    }

    #[test]
    fn an_older_incarnation_counts_as_fenced_only_fence_plus_margin_after_its_last_contact() {
        // M4: the old process may still be alive and trusting its caches.
        let mut t = ContactTracker::new(T);
        t.become_leader(1, 0);
        t.sync_registry(&[(1, 1)], 0);
        t.record_contact(1, 1, 4000).unwrap();
        t.sync_registry(&[(1, 2)], 5000);
        t.record_contact(1, 2, 6000).unwrap();
        assert!(!t.older_incarnations_fenced_in(1, 1, 2, 29_000));
        assert!(t.older_incarnations_fenced_in(1, 1, 2, 29_001));
        assert_eq!(t.older_incarnations_fenced_at_ms(1, 2, 6000), 29_001);
        assert!(!t.older_incarnations_fenced_in(2, 1, 2, 29_001));
    }
}
