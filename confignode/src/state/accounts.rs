//! Users in the replicated state: who exists, their stored passwords, the fingerprint
//! DataNodes compare to forget cached logins.

use super::*;

impl MetadataState {
    /// Whether `username` is a user (root always is).
    pub fn user_exists(&self, username: &str) -> bool {
        username == ROOT_USER || self.users.contains_key(username)
    }

    /// What `username`'s password is checked against; `None` when it is not a user.
    pub fn user_password(&self, username: &str) -> Option<StoredPassword> {
        match self.users.get(username) {
            Some(hash) => Some(StoredPassword::Hash(hash.clone())),
            None if username == ROOT_USER => Some(StoredPassword::RootInitial),
            None => None,
        }
    }

    /// A fingerprint of the users and their stored hashes: it changes whenever a user is
    /// created, dropped or given a new password (a new salt makes a new hash even for the same
    /// password). Heartbeats carry it, so DataNodes forget the passwords they remembered.
    pub fn users_fingerprint(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.users.hash(&mut hasher);
        hasher.finish()
    }

    /// Every user name, root included, sorted.
    pub fn user_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(String::as_str).collect();
        if !self.users.contains_key(ROOT_USER) {
            let at = names.partition_point(|n| *n < ROOT_USER);
            names.insert(at, ROOT_USER);
        }
        names
    }
}
