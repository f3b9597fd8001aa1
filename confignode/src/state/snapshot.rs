//! The replicated state as a snapshot: encoded at the newest version, decoded from every
//! version a ConfigNode may have written.

use super::*;

impl MetadataState {
    /// Magic of the snapshot encoding (version 8).
    pub const SNAPSHOT_MAGIC: &'static [u8; 8] = b"FPCNSNP8";
    /// Magic of version 7, still read: tables without their incarnation (read as 0), no
    /// confirmed incarnations (0, none proved).
    pub const SNAPSHOT_MAGIC_V7: &'static [u8; 8] = b"FPCNSNP7";
    /// Magic of version 6, still read: no tables.
    pub const SNAPSHOT_MAGIC_V6: &'static [u8; 8] = b"FPCNSNP6";
    /// Magic of version 5, still read: no aliases, tags or attributes.
    pub const SNAPSHOT_MAGIC_V5: &'static [u8; 8] = b"FPCNSNP5";
    /// Magic of version 4, still read: no users (root alone, password root).
    pub const SNAPSHOT_MAGIC_V4: &'static [u8; 8] = b"FPCNSNP4";
    /// Magic of version 3, still read: no migrations.
    pub const SNAPSHOT_MAGIC_V3: &'static [u8; 8] = b"FPCNSNP3";
    /// Magic of version 2, still read: series without declared encodings.
    pub const SNAPSHOT_MAGIC_V2: &'static [u8; 8] = b"FPCNSNP2";
    /// Magic of version 1, still read: no TTL table, no operation kind 3.
    pub const SNAPSHOT_MAGIC_V1: &'static [u8; 8] = b"FPCNSNP1";

    /// The snapshot encoding, version 8: version 7 with each table's incarnation (`u64
    /// created_version`) after its name, followed by the DataNodes' confirmed incarnations
    /// (`u64 id, u64 confirmed epoch`, a u32 count then items, by id; only those above 0) before
    /// the CRC.
    ///
    /// Version 7: version 6 followed by the tables of the table model
    /// (`str16 database, str16 table, i64 ttl_ms (0: none), u32 columns × { str16 name, u8
    /// category, u8 type }, u32 devices × { u32 tags × { bool present, [str16 value] }, u32
    /// attributes × { str16 name, str16 value } }`, a u32 count then items, by database and
    /// name) before the CRC.
    ///
    /// Version 6: version 5 followed by the series' aliases, tags and
    /// attributes (`str16 device, str16 measurement, str16 alias (empty: none), u32 tags ×
    /// { str16 key, str16 value }, u32 attributes × { same }`, a u32 count then items, in path
    /// order; only series that declared any) before the CRC.
    ///
    /// Version 5: version 4 followed by the users table (`str16 user,
    /// str16 password hash`, a u32 count then items, by name; root only once its password was
    /// set) before the CRC.
    ///
    /// Version 4: version 3 followed by the migrations in progress (`u64 region, u64 from, u64
    /// to`, a u32 count then items) before the CRC.
    ///
    /// Version 3: magic `FPCNSNP3`, u64 applied index, u64 metadata
    /// version, u64 next ids (DataNode, region, operation), then the registry, databases, series
    /// (`str16 device, str16 measurement, u8 type, bool pending delete, str16 encoding, str16
    /// compressor`, the names empty when undeclared), partitions, regions, operations (kind 3 =
    /// SetTtl, str16 database) and TTLs (`str16 database, i64 ttl_ms`), each a u32 count then
    /// items, then CRC32 of all preceding bytes. Version 2 (`FPCNSNP2`) is version 3 without the
    /// two names; version 1 (`FPCNSNP1`) is version 2 without the TTL table.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        // The index is not encoded (decoding rebuilds it); what is encoded must obey its rules.
        debug_assert_eq!(self.check_index(), Ok(()));
        debug_assert_eq!(self.check_operations(), Ok(()));
        envelope::seal(Self::SNAPSHOT_MAGIC, |w| self.encode_snapshot_body(w))
    }

    pub(super) fn encode_snapshot_body(&self, w: &mut Writer) {
        w.u64(self.applied_index);
        w.u64(self.metadata_version);
        w.u64(self.next_data_node_id);
        w.u64(self.next_region_id);
        w.u64(self.next_operation_id);
        w.len32(self.data_nodes.len());
        for n in self.data_nodes.values() {
            w.u64(n.id);
            w.str16(&n.internal_address);
            w.str16(&n.rpc_address);
            w.u64(n.incarnation_epoch);
            w.u8(n.status.code());
        }
        w.len32(self.databases.len());
        for (db, pending) in &self.databases {
            w.str16(db);
            w.bool(*pending);
        }
        w.len32(self.series.len());
        for ((device, measurement), r) in &self.series {
            w.str16(device);
            w.str16(measurement);
            w.u8(r.data_type.code());
            w.bool(r.pending_delete);
            w.str16(r.codec.encoding_name());
            w.str16(r.codec.compressor_name());
        }
        w.len32(self.partitions.len());
        for ((db, s, t), r) in &self.partitions {
            w.str16(db);
            w.u32(*s);
            w.i64(*t);
            w.u64(*r);
        }
        w.len32(self.regions.len());
        for r in self.regions.values() {
            w.u64(r.id);
            w.str16(&r.database);
            w.len32(r.replicas.len());
            r.replicas.iter().for_each(|n| w.u64(*n));
            w.u64(r.preferred_leader);
        }
        w.len32(self.operations.len());
        for (id, kind) in &self.operations {
            w.u64(*id);
            match kind {
                OperationKind::DeleteTimeseries(series) => {
                    w.u8(1);
                    encode_series_keys(w, series);
                }
                OperationKind::DropDatabase(db) => {
                    w.u8(2);
                    w.str16(db);
                }
                OperationKind::SetTtl(db) => {
                    w.u8(3);
                    w.str16(db);
                }
                OperationKind::DropTable {
                    database,
                    table,
                    series,
                } => {
                    w.u8(4);
                    w.str16(database);
                    w.str16(table);
                    encode_series_keys(w, series);
                }
            }
        }
        w.len32(self.ttls.len());
        for (db, ttl_ms) in &self.ttls {
            assert!(*ttl_ms > 0, "TTL {ttl_ms} of {db} in the state");
            w.str16(db);
            w.i64(*ttl_ms);
        }
        w.len32(self.migrations.len());
        for (region, (from, to)) in &self.migrations {
            w.u64(*region);
            w.u64(*from);
            w.u64(*to);
        }
        w.len32(self.users.len());
        for (username, hash) in &self.users {
            assert!(
                check_user(username, Some(hash)).is_ok(),
                "user {username:?} with hash {hash:?} in the state"
            );
            w.str16(username);
            w.str16(hash);
        }
        w.len32(self.series_meta.len());
        for ((device, measurement), meta) in &self.series_meta {
            w.str16(device);
            w.str16(measurement);
            crate::command::encode_meta(w, meta);
        }
        w.len32(self.tables.len());
        for ((db, name), t) in &self.tables {
            w.str16(db);
            w.str16(name);
            w.u64(t.created_version);
            w.i64(t.schema.ttl_ms.unwrap_or(0));
            crate::command::encode_table_columns(w, &t.schema.columns);
            w.len32(t.devices.len());
            for (tags, attributes) in &t.devices {
                crate::command::encode_device(w, tags, attributes);
            }
        }
        registry::encode_confirmed(w, &self.data_nodes);
    }

    /// Inverse of [`MetadataState::encode_snapshot`]; checks magic and CRC first.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataState, DecodeError> {
        let (magic, mut r) = envelope::open(
            bytes,
            &[
                Self::SNAPSHOT_MAGIC,
                Self::SNAPSHOT_MAGIC_V7,
                Self::SNAPSHOT_MAGIC_V6,
                Self::SNAPSHOT_MAGIC_V5,
                Self::SNAPSHOT_MAGIC_V4,
                Self::SNAPSHOT_MAGIC_V3,
                Self::SNAPSHOT_MAGIC_V2,
                Self::SNAPSHOT_MAGIC_V1,
            ],
        )
        .map_err(|e| DecodeError {
            reason: format!("ConfigNode snapshot: {}", e.reason),
            ..e
        })?;
        let mut s = MetadataState {
            applied_index: r.u64()?,
            metadata_version: r.u64()?,
            next_data_node_id: r.u64()?,
            next_region_id: r.u64()?,
            next_operation_id: r.u64()?,
            ..MetadataState::default()
        };
        for _ in 0..r.count(21)? {
            let id = r.u64()?;
            let internal_address = r.str16()?;
            let rpc_address = r.str16()?;
            let incarnation_epoch = r.u64()?;
            let code = r.u8()?;
            let Some(status) = NodeStatus::from_code(code) else {
                return r.error(format!("node status {code}"));
            };
            s.data_nodes.insert(
                id,
                DataNodeRecord {
                    id,
                    internal_address,
                    rpc_address,
                    incarnation_epoch,
                    confirmed_epoch: 0,
                    status,
                },
            );
        }
        for _ in 0..r.count(3)? {
            let db = r.str16()?;
            s.databases.insert(db, r.bool()?);
        }
        for _ in 0..r.count(6)? {
            let key = (r.str16()?, r.str16()?);
            let data_type = r.data_type()?;
            let pending_delete = r.bool()?;
            let codec = if magic <= 5 {
                let encoding = r.str16()?;
                let compressor = r.str16()?;
                match SeriesCodec::parse(data_type, Some(&encoding), Some(&compressor)) {
                    Ok(codec) => codec,
                    Err(e) => return r.error(format!("series {}.{}: {e}", key.0, key.1)),
                }
            } else {
                SeriesCodec::default()
            };
            if codec.is_declared() {
                s.declared_codecs.insert(key.clone());
            }
            s.series.insert(
                key,
                SeriesRecord {
                    data_type,
                    pending_delete,
                    codec,
                },
            );
        }
        for _ in 0..r.count(22)? {
            let key = (r.str16()?, r.u32()?, r.i64()?);
            s.partitions.insert(key, r.u64()?);
        }
        for _ in 0..r.count(22)? {
            let id = r.u64()?;
            let database = r.str16()?;
            let n = r.count(8)?;
            let mut replicas = Vec::with_capacity(n);
            for _ in 0..n {
                replicas.push(r.u64()?);
            }
            let preferred_leader = r.u64()?;
            s.regions.insert(
                id,
                RegionGroup {
                    id,
                    database,
                    replicas,
                    preferred_leader,
                },
            );
        }
        for _ in 0..r.count(11)? {
            let id = r.u64()?;
            let kind = match r.u8()? {
                1 => OperationKind::DeleteTimeseries(decode_series_keys(&mut r)?),
                2 => OperationKind::DropDatabase(r.str16()?),
                3 if magic <= 6 => OperationKind::SetTtl(r.str16()?),
                4 if magic <= 1 => OperationKind::DropTable {
                    database: r.str16()?,
                    table: r.str16()?,
                    series: decode_series_keys(&mut r)?,
                },
                tag => return r.error(format!("operation kind {tag}")),
            };
            s.operations.insert(id, kind);
        }
        // Magic 0 is version 8, 1 version 7, 2 version 6, 3 version 5, 4 version 4, 5 version 3,
        // 6 version 2; version 1 has no TTL table.
        if magic <= 6 {
            for _ in 0..r.count(10)? {
                let db = r.str16()?;
                let ttl_ms = r.i64()?;
                if ttl_ms <= 0 || !s.databases.contains_key(&db) {
                    return r.error(format!("TTL {ttl_ms} of database {db:?}"));
                }
                s.ttls.insert(db, ttl_ms);
            }
        }
        if magic <= 4 {
            for _ in 0..r.count(24)? {
                let region = r.u64()?;
                let (from, to) = (r.u64()?, r.u64()?);
                if !s.regions.contains_key(&region) {
                    return r.error(format!("migration of unknown region {region}"));
                }
                s.migrations.insert(region, (from, to));
            }
        }
        // Versions before 5 knew no users: root alone, with its initial password.
        if magic <= 3 {
            for _ in 0..r.count(4)? {
                let username = r.str16()?;
                let hash = r.str16()?;
                if let Err(e) = check_user(&username, Some(&hash)) {
                    return r.error(format!("user {username:?}: {e}"));
                }
                if s.users.insert(username.clone(), hash).is_some() {
                    return r.error(format!("user {username:?} appears twice"));
                }
            }
            if s.users.len() > USERS_MAX {
                return r.error(format!("{} users; at most {USERS_MAX}", s.users.len()));
            }
        }
        // Versions before 6 knew no aliases, tags or attributes.
        if magic <= 2 {
            for _ in 0..r.count(14)? {
                let key = (r.str16()?, r.str16()?);
                let meta = crate::command::decode_meta(&mut r)?;
                if !s.series.contains_key(&key) || meta.is_empty() {
                    return r.error(format!(
                        "meta of {}.{}: no such series, or empty",
                        key.0, key.1
                    ));
                }
                s.series_meta.insert(key, meta);
            }
        }
        // Versions before 7 knew no tables, version 7 no incarnations (read as 0).
        if magic <= 1 {
            for _ in 0..r.count(20)? {
                let key = (r.str16()?, r.str16()?);
                let created_version = if magic == 0 { r.u64()? } else { 0 };
                if created_version > s.metadata_version {
                    return r.error(format!(
                        "table {}.{} created at version {created_version}, after the state's {}",
                        key.0, key.1, s.metadata_version
                    ));
                }
                let ttl_ms = r.i64()?;
                let columns = crate::command::decode_table_columns(&mut r)?;
                let mut devices = BTreeMap::new();
                for _ in 0..r.count(8)? {
                    let (tags, attributes) = crate::command::decode_device(&mut r)?;
                    devices.insert(tags, attributes);
                }
                if !s.databases.contains_key(&key.0) {
                    return r.error(format!("table {}.{} of no database", key.0, key.1));
                }
                let schema = TableSchema {
                    name: key.1.clone(),
                    columns,
                    ttl_ms: (ttl_ms != 0).then_some(ttl_ms),
                };
                s.tables.insert(
                    key,
                    TableRecord {
                        schema,
                        created_version,
                        devices,
                    },
                );
            }
        }
        // Versions before 8 knew no confirmed incarnations.
        if magic == 0 {
            registry::decode_confirmed(&mut r, &mut s.data_nodes)?;
        }
        r.finish()?;
        // The allocation index is derived, so it is rebuilt here, never read from the bytes.
        s.index = match PartitionIndex::build(&s.partitions, &s.regions) {
            Ok(index) => index,
            Err(e) => return r.error(format!("partition table: {e}")),
        };
        // Earlier versions left an overtaken delete's removed series in its list.
        s.forget_vanished_deletions();
        if let Err(e) = s.check_operations() {
            return r.error(format!("pending operations: {e}"));
        }
        Ok(s)
    }
}
