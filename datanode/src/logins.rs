//! The passwords the ConfigNode accepted lately, by user, as salted digests: a login within
//! `dn_login_cache_ms` of the last accepted one is answered here.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Users whose last accepted password a DataNode remembers; past it the oldest is forgotten.
const CACHED_USERS_MAX: usize = 10_000;

/// Passwords the ConfigNode accepted lately, by user.
pub(crate) struct Logins {
    digests: Mutex<HashMap<String, (u64, Instant)>>,
    /// The users' fingerprint the last heartbeat carried; a change forgets every digest.
    users_fingerprint: Mutex<Option<u64>>,
    key: std::collections::hash_map::RandomState,
    fresh_for: Duration,
}

impl Logins {
    pub(crate) fn new(fresh_for: Duration) -> Logins {
        Logins {
            digests: Mutex::new(HashMap::new()),
            users_fingerprint: Mutex::new(None),
            key: std::collections::hash_map::RandomState::new(),
            fresh_for,
        }
    }

    fn digest(&self, user: &str, password: &str) -> u64 {
        self.key.hash_one((user, password))
    }

    /// True when the ConfigNode accepted exactly this password for `user` within the window.
    pub(crate) fn fresh(&self, user: &str, password: &str) -> bool {
        let digest = self.digest(user, password);
        self.digests
            .lock()
            .get(user)
            .is_some_and(|(d, at)| *d == digest && at.elapsed() < self.fresh_for)
    }

    pub(crate) fn remember(&self, user: &str, password: &str) {
        let digest = self.digest(user, password);
        let mut digests = self.digests.lock();
        if digests.len() >= CACHED_USERS_MAX && !digests.contains_key(user) {
            let oldest = digests
                .iter()
                .min_by_key(|(_, (_, at))| *at)
                .map(|(u, _)| u.clone());
            if let Some(oldest) = oldest {
                digests.remove(&oldest);
            }
        }
        digests.insert(user.to_string(), (digest, Instant::now()));
    }

    pub(crate) fn forget(&self, user: &str) {
        self.digests.lock().remove(user);
    }

    /// A heartbeat's users fingerprint: when it differs from the last one seen (a user was
    /// created, dropped or given a new password, or another ConfigNode leads), every remembered
    /// password is forgotten, so a changed one stops working within a heartbeat.
    pub(crate) fn users_changed_to(&self, fingerprint: u64) {
        let mut last = self.users_fingerprint.lock();
        if *last != Some(fingerprint) {
            if last.is_some() {
                self.digests.lock().clear();
            }
            *last = Some(fingerprint);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_passwords_match_exactly_expire_and_go_when_the_users_change() {
        let logins = Logins::new(Duration::from_secs(60));
        logins.users_changed_to(1);
        logins.remember("ops", "pw-1");
        assert!(logins.fresh("ops", "pw-1"));
        assert!(!logins.fresh("ops", "pw-2"));
        assert!(!logins.fresh("root", "pw-1"));
        // The same fingerprint again changes nothing; another forgets every password.
        logins.users_changed_to(1);
        assert!(logins.fresh("ops", "pw-1"));
        logins.users_changed_to(2);
        assert!(!logins.fresh("ops", "pw-1"));
        // A window of nothing remembers nothing.
        let forgetful = Logins::new(Duration::ZERO);
        forgetful.remember("ops", "pw-1");
        assert!(!forgetful.fresh("ops", "pw-1"));
    }
}
