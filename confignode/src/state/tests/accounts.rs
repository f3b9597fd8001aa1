//! Tests of users: creation, passwords, drops, the bound on their number, and the users table
//! of a snapshot.

use super::*;

const HASH_A: &str = "$argon2id$a";
const HASH_B: &str = "$argon2id$b";

#[test]
fn users_are_created_altered_and_dropped_and_refusals_change_nothing() {
    let mut h = Harness::new();
    assert_eq!(h.state.user_names(), ["root"]);
    assert!(h.state.user_exists("root"));
    let create = |username: &str, hash: &str| Command::CreateUser {
        username: username.into(),
        password_hash: hash.into(),
    };
    let set = |username: &str, hash: &str| Command::SetUserPassword {
        username: username.into(),
        password_hash: hash.into(),
    };
    let drop = |username: &str| Command::DropUser {
        username: username.into(),
    };
    let version = h.state.metadata_version();
    h.apply(create("bob", HASH_A)).unwrap();
    h.apply(create("alice", HASH_A)).unwrap();
    h.apply(create("zed_9", HASH_B)).unwrap();
    assert_eq!(h.state.user_names(), ["alice", "bob", "root", "zed_9"]);
    assert_eq!(
        h.state.user_password("bob"),
        Some(StoredPassword::Hash(HASH_A.into()))
    );
    assert_eq!(
        h.state.metadata_version(),
        version,
        "DataNodes cache no users"
    );

    let refusals = [
        (create("bob", HASH_B), StatusCode::UserAlreadyExist),
        (create("root", HASH_B), StatusCode::UserAlreadyExist),
        (create("b-b", HASH_B), StatusCode::IllegalParameter),
        (create("", HASH_B), StatusCode::IllegalParameter),
        (create("carol", "plain"), StatusCode::IllegalParameter),
        (create("carol", ""), StatusCode::IllegalParameter),
        (drop("root"), StatusCode::NoPermission),
        (drop("carol"), StatusCode::UserNotExist),
        (drop("x y"), StatusCode::IllegalParameter),
        (set("carol", HASH_B), StatusCode::UserNotExist),
        (set("bob", "$argon2i$x"), StatusCode::IllegalParameter),
    ];
    for (command, code) in refusals {
        let before = h.state.clone();
        let e = h.apply(command.clone()).unwrap_err();
        assert_eq!(e.status_code(), code, "{command:?}: {e}");
        let mut expected = before;
        expected.applied_index = h.index;
        assert_eq!(h.state, expected, "{command:?} changed the state");
    }
    assert_eq!(
        h.apply(drop("root")).unwrap_err().to_string(),
        "No permission: the root user cannot be dropped"
    );
    assert_eq!(
        h.apply(create("bob", HASH_B)).unwrap_err().to_string(),
        "user bob already exists"
    );
    assert_eq!(
        h.apply(drop("carol")).unwrap_err().to_string(),
        "user carol does not exist"
    );

    // root's password: implicit until set, then stored like anyone's.
    assert_eq!(
        h.state.user_password("root"),
        Some(StoredPassword::RootInitial)
    );
    h.apply(set("root", HASH_B)).unwrap();
    assert_eq!(
        h.state.user_password("root"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
    assert_eq!(h.state.user_names(), ["alice", "bob", "root", "zed_9"]);
    h.apply(set("bob", HASH_B)).unwrap();
    assert_eq!(
        h.state.user_password("bob"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
    h.apply(drop("bob")).unwrap();
    assert_eq!(h.state.user_password("bob"), None);
    assert!(
        h.apply(drop("root")).is_err(),
        "not even with a stored hash"
    );
    assert_eq!(h.state.user_names(), ["alice", "root", "zed_9"]);

    // The users survive a snapshot, root's stored hash included.
    let restored = MetadataState::decode_snapshot(&h.state.encode_snapshot()).unwrap();
    assert_eq!(restored, h.state);
    assert_eq!(restored.user_names(), ["alice", "root", "zed_9"]);
    assert_eq!(
        restored.user_password("root"),
        Some(StoredPassword::Hash(HASH_B.into()))
    );
}

#[test]
fn users_are_bounded_with_root_counted() {
    let mut h = Harness::new();
    for i in 0..USERS_MAX - 1 {
        h.apply(Command::CreateUser {
            username: format!("u{i}"),
            password_hash: HASH_A.into(),
        })
        .unwrap();
    }
    assert_eq!(h.state.user_names().len(), USERS_MAX);
    let full = h
        .apply(Command::CreateUser {
            username: "one_more".into(),
            password_hash: HASH_A.into(),
        })
        .unwrap_err();
    assert!(matches!(full, MetadataError::Limit(_)), "{full}");
    // Setting root's password stores it but adds no user.
    h.apply(Command::SetUserPassword {
        username: "root".into(),
        password_hash: HASH_A.into(),
    })
    .unwrap();
    assert_eq!(h.state.user_names().len(), USERS_MAX);
}

#[test]
fn a_snapshot_with_a_bad_user_does_not_decode() {
    for (name, hash, why) in [
        ("a b", HASH_A, "illegal user name"),
        ("al", "plain", "illegal password hash"),
    ] {
        // An empty state's snapshot less its empty users table and CRC, then the bad table
        // (as a writer without the encoder's checks would have left it).
        let empty = MetadataState::new().encode_snapshot();
        let mut bytes = empty[..empty.len() - 24].to_vec();
        let mut w = Writer::new();
        w.len32(1);
        w.str16(name);
        w.str16(hash);
        w.len32(0); // series meta
        w.len32(0); // tables
        w.len32(0); // confirmed incarnations
        w.len32(0); // table-model databases
        bytes.extend_from_slice(&w.into_bytes());
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let e = MetadataState::decode_snapshot(&bytes).unwrap_err();
        assert!(e.reason.contains(why), "{e}");
    }
}
