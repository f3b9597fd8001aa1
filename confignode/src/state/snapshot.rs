//! The replicated state as a snapshot: encoded at the newest version, decoded from every
//! version a ConfigNode may have written.

use common::codec::{DecodeResult, Reader};

use super::*;

impl MetadataState {
    /// Magic of the snapshot encoding (version 9).
    pub const SNAPSHOT_MAGIC: &'static [u8; 8] = b"FPCNSNP9";
    /// Magic of version 8, still read: no table-model databases (every database the tree's).
    pub const SNAPSHOT_MAGIC_V8: &'static [u8; 8] = b"FPCNSNP8";
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
    /// Every magic still read, newest first: the one at index `i` is version `9 - i`.
    const SNAPSHOT_MAGICS: [&'static [u8; 8]; 9] = [
        Self::SNAPSHOT_MAGIC,
        Self::SNAPSHOT_MAGIC_V8,
        Self::SNAPSHOT_MAGIC_V7,
        Self::SNAPSHOT_MAGIC_V6,
        Self::SNAPSHOT_MAGIC_V5,
        Self::SNAPSHOT_MAGIC_V4,
        Self::SNAPSHOT_MAGIC_V3,
        Self::SNAPSHOT_MAGIC_V2,
        Self::SNAPSHOT_MAGIC_V1,
    ];

    /// The snapshot encoding, version 9: version 8 followed by the table-model databases
    /// (`str16 database`, a u32 count then items, by name) before the CRC.
    ///
    /// Version 8: version 7 with each table's incarnation (`u64
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

    /// The body between magic and CRC: the header, then the sections in the order the
    /// versions added them, each a u32 count then items.
    pub(super) fn encode_snapshot_body(&self, w: &mut Writer) {
        w.u64(self.applied_index);
        w.u64(self.metadata_version);
        w.u64(self.ids.next_data_node_id);
        w.u64(self.ids.next_region_id);
        w.u64(self.ids.next_operation_id);
        self.encode_data_nodes(w);
        self.encode_databases(w);
        self.encode_series(w);
        self.encode_partitions(w);
        self.encode_regions(w);
        self.encode_operations(w);
        self.encode_ttls(w);
        self.encode_migrations(w);
        self.encode_users(w);
        self.encode_series_meta(w);
        self.encode_tables(w);
        registry::encode_confirmed(w, &self.data_nodes);
        w.len32(self.table_databases.len());
        for db in &self.table_databases {
            w.str16(db);
        }
    }

    /// Inverse of [`MetadataState::encode_snapshot`]; checks magic and CRC first.
    pub fn decode_snapshot(bytes: &[u8]) -> Result<MetadataState, DecodeError> {
        let (magic, mut r) =
            envelope::open(bytes, &Self::SNAPSHOT_MAGICS).map_err(|e| DecodeError {
                reason: format!("ConfigNode snapshot: {}", e.reason),
                ..e
            })?;
        let version = Self::SNAPSHOT_MAGICS.len() - magic;
        debug_assert!((1..=9).contains(&version), "snapshot version {version}");
        let mut s = MetadataState {
            applied_index: r.u64()?,
            metadata_version: r.u64()?,
            ids: IdCounters {
                next_data_node_id: r.u64()?,
                next_region_id: r.u64()?,
                next_operation_id: r.u64()?,
            },
            ..MetadataState::default()
        };
        debug_assert_eq!(r.position(), 5 * 8, "the header is five u64");
        s.decode_data_nodes(&mut r)?;
        s.decode_databases(&mut r)?;
        s.decode_series(&mut r, version)?;
        s.decode_partitions(&mut r)?;
        s.decode_regions(&mut r)?;
        s.decode_operations(&mut r, version)?;
        // Each later section came with a version; an older snapshot has none of it.
        if version >= 2 {
            s.decode_ttls(&mut r)?;
        }
        if version >= 4 {
            s.decode_migrations(&mut r)?;
        }
        // Versions before 5 knew no users: root alone, with its initial password.
        if version >= 5 {
            s.decode_users(&mut r)?;
        }
        if version >= 6 {
            s.decode_series_meta(&mut r)?;
        }
        if version >= 7 {
            s.decode_tables(&mut r, version)?;
        }
        if version >= 8 {
            registry::decode_confirmed(&mut r, &mut s.data_nodes)?;
        }
        if version >= 9 {
            for_each_item(&mut r, 2, |r| {
                let db = r.str16()?;
                if !s.databases.contains_key(&db) {
                    return r.error(format!("table-model database {db} is no database"));
                }
                s.table_databases.insert(db);
                Ok(())
            })?;
        }
        r.finish()?;
        // The allocation index is derived, so it is rebuilt here, never read from the bytes.
        s.placement.index =
            match PartitionIndex::build(&s.placement.partitions, &s.placement.regions) {
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

    // The sections, each encoder beside its decoder.

    /// `u64 id, str16 internal, str16 rpc, u64 incarnation epoch, u8 status` by id (the
    /// confirmed incarnations follow at the end, version 8).
    fn encode_data_nodes(&self, w: &mut Writer) {
        w.len32(self.data_nodes.len());
        for n in self.data_nodes.values() {
            w.u64(n.id);
            w.str16(&n.internal_address);
            w.str16(&n.rpc_address);
            w.u64(n.incarnation_epoch);
            w.u8(n.status.code());
        }
    }

    fn decode_data_nodes(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 21, |r| {
            let id = r.u64()?;
            let internal_address = r.str16()?;
            let rpc_address = r.str16()?;
            let incarnation_epoch = r.u64()?;
            let code = r.u8()?;
            let Some(status) = NodeStatus::from_code(code) else {
                return r.error(format!("node status {code}"));
            };
            self.data_nodes.insert(
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
            Ok(())
        })
    }

    /// `str16 database, bool pending delete`.
    fn encode_databases(&self, w: &mut Writer) {
        w.len32(self.databases.len());
        for (db, pending) in &self.databases {
            w.str16(db);
            w.bool(*pending);
        }
    }

    fn decode_databases(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 3, |r| {
            let db = r.str16()?;
            self.databases.insert(db, r.bool()?);
            Ok(())
        })
    }

    /// `str16 device, str16 measurement, u8 type, bool pending delete, str16 encoding, str16
    /// compressor` in path order, the names empty when undeclared (version 3; before, no names).
    fn encode_series(&self, w: &mut Writer) {
        w.len32(self.series.records.len());
        for ((device, measurement), r) in &self.series.records {
            w.str16(device);
            w.str16(measurement);
            w.u8(r.data_type.code());
            w.bool(r.pending_delete);
            w.str16(r.codec.encoding_name());
            w.str16(r.codec.compressor_name());
        }
    }

    fn decode_series(&mut self, r: &mut Reader<'_>, version: usize) -> DecodeResult<()> {
        for_each_item(r, 6, |r| {
            let key = (r.str16()?, r.str16()?);
            let data_type = r.data_type()?;
            let pending_delete = r.bool()?;
            let codec = if version >= 3 {
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
                self.series.declared_codecs.insert(key.clone());
            }
            self.series.records.insert(
                key,
                SeriesRecord {
                    data_type,
                    pending_delete,
                    codec,
                },
            );
            Ok(())
        })
    }

    /// `str16 database, u32 series slot, i64 time slot, u64 region`.
    fn encode_partitions(&self, w: &mut Writer) {
        w.len32(self.placement.partitions.len());
        for ((db, s, t), r) in &self.placement.partitions {
            w.str16(db);
            w.u32(*s);
            w.i64(*t);
            w.u64(*r);
        }
    }

    fn decode_partitions(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 22, |r| {
            let key = (r.str16()?, r.u32()?, r.i64()?);
            self.placement.partitions.insert(key, r.u64()?);
            Ok(())
        })
    }

    /// `u64 id, str16 database, u32 replicas × u64, u64 preferred leader`.
    fn encode_regions(&self, w: &mut Writer) {
        w.len32(self.placement.regions.len());
        for r in self.placement.regions.values() {
            w.u64(r.id);
            w.str16(&r.database);
            w.len32(r.replicas.len());
            r.replicas.iter().for_each(|n| w.u64(*n));
            w.u64(r.preferred_leader);
        }
    }

    fn decode_regions(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 22, |r| {
            let id = r.u64()?;
            let database = r.str16()?;
            let n = r.count(8)?;
            let mut replicas = Vec::with_capacity(n);
            for _ in 0..n {
                replicas.push(r.u64()?);
            }
            let preferred_leader = r.u64()?;
            self.placement.regions.insert(
                id,
                RegionGroup {
                    id,
                    database,
                    replicas,
                    preferred_leader,
                },
            );
            Ok(())
        })
    }

    /// `u64 id, u8 kind`, then the kind's fields: 1 DeleteTimeseries (the series keys), 2
    /// DropDatabase (`str16 database`), 3 SetTtl (the same; version 2), 4 DropTable (`str16
    /// database, str16 table`, the series keys; version 7).
    fn encode_operations(&self, w: &mut Writer) {
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
    }

    fn decode_operations(&mut self, r: &mut Reader<'_>, version: usize) -> DecodeResult<()> {
        for_each_item(r, 11, |r| {
            let id = r.u64()?;
            let kind = match r.u8()? {
                1 => OperationKind::DeleteTimeseries(decode_series_keys(r)?),
                2 => OperationKind::DropDatabase(r.str16()?),
                3 if version >= 2 => OperationKind::SetTtl(r.str16()?),
                4 if version >= 7 => OperationKind::DropTable {
                    database: r.str16()?,
                    table: r.str16()?,
                    series: decode_series_keys(r)?,
                },
                tag => return r.error(format!("operation kind {tag}")),
            };
            self.operations.insert(id, kind);
            Ok(())
        })
    }

    /// `str16 database, i64 ttl_ms` (version 2).
    fn encode_ttls(&self, w: &mut Writer) {
        w.len32(self.ttls.len());
        for (db, ttl_ms) in &self.ttls {
            assert!(*ttl_ms > 0, "TTL {ttl_ms} of {db} in the state");
            w.str16(db);
            w.i64(*ttl_ms);
        }
    }

    fn decode_ttls(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 10, |r| {
            let db = r.str16()?;
            let ttl_ms = r.i64()?;
            if ttl_ms <= 0 || !self.databases.contains_key(&db) {
                return r.error(format!("TTL {ttl_ms} of database {db:?}"));
            }
            self.ttls.insert(db, ttl_ms);
            Ok(())
        })
    }

    /// `u64 region, u64 from, u64 to` (version 4).
    fn encode_migrations(&self, w: &mut Writer) {
        w.len32(self.placement.migrations.len());
        for (region, (from, to)) in &self.placement.migrations {
            w.u64(*region);
            w.u64(*from);
            w.u64(*to);
        }
    }

    fn decode_migrations(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 24, |r| {
            let region = r.u64()?;
            let (from, to) = (r.u64()?, r.u64()?);
            if !self.placement.regions.contains_key(&region) {
                return r.error(format!("migration of unknown region {region}"));
            }
            self.placement.migrations.insert(region, (from, to));
            Ok(())
        })
    }

    /// `str16 user, str16 password hash` by name; root only once its password was set
    /// (version 5).
    fn encode_users(&self, w: &mut Writer) {
        w.len32(self.users.len());
        for (username, hash) in &self.users {
            assert!(
                check_user(username, Some(hash)).is_ok(),
                "user {username:?} with hash {hash:?} in the state"
            );
            w.str16(username);
            w.str16(hash);
        }
    }

    fn decode_users(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 4, |r| {
            let username = r.str16()?;
            let hash = r.str16()?;
            if let Err(e) = check_user(&username, Some(&hash)) {
                return r.error(format!("user {username:?}: {e}"));
            }
            if self.users.insert(username.clone(), hash).is_some() {
                return r.error(format!("user {username:?} appears twice"));
            }
            Ok(())
        })?;
        if self.users.len() > USERS_MAX {
            return r.error(format!("{} users; at most {USERS_MAX}", self.users.len()));
        }
        Ok(())
    }

    /// `str16 device, str16 measurement`, then the meta (`str16 alias (empty: none), u32 tags ×
    /// { str16 key, str16 value }, u32 attributes × { same }`), in path order; only series
    /// that declared any (version 6).
    fn encode_series_meta(&self, w: &mut Writer) {
        w.len32(self.series.meta.len());
        for ((device, measurement), meta) in &self.series.meta {
            w.str16(device);
            w.str16(measurement);
            crate::command::encode_meta(w, meta);
        }
    }

    fn decode_series_meta(&mut self, r: &mut Reader<'_>) -> DecodeResult<()> {
        for_each_item(r, 14, |r| {
            let key = (r.str16()?, r.str16()?);
            let meta = crate::command::decode_meta(r)?;
            if !self.series.records.contains_key(&key) || meta.is_empty() {
                return r.error(format!(
                    "meta of {}.{}: no such series, or empty",
                    key.0, key.1
                ));
            }
            self.series.meta.insert(key, meta);
            Ok(())
        })
    }

    /// `str16 database, str16 table, u64 created_version (version 8), i64 ttl_ms (0: none)`,
    /// the columns, `u32 devices ×` device, by database and name (version 7).
    fn encode_tables(&self, w: &mut Writer) {
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
    }

    /// Version 7 knew no incarnations: they read as 0.
    fn decode_tables(&mut self, r: &mut Reader<'_>, version: usize) -> DecodeResult<()> {
        for_each_item(r, 20, |r| {
            let key = (r.str16()?, r.str16()?);
            let created_version = if version >= 8 { r.u64()? } else { 0 };
            if created_version > self.metadata_version {
                return r.error(format!(
                    "table {}.{} created at version {created_version}, after the state's {}",
                    key.0, key.1, self.metadata_version
                ));
            }
            let ttl_ms = r.i64()?;
            let columns = crate::command::decode_table_columns(r)?;
            let mut devices = BTreeMap::new();
            for _ in 0..r.count(8)? {
                let (tags, attributes) = crate::command::decode_device(r)?;
                devices.insert(tags, attributes);
            }
            if !self.databases.contains_key(&key.0) {
                return r.error(format!("table {}.{} of no database", key.0, key.1));
            }
            let schema = TableSchema {
                name: key.1.clone(),
                columns,
                ttl_ms: (ttl_ms != 0).then_some(ttl_ms),
            };
            self.tables.insert(
                key,
                TableRecord {
                    schema,
                    created_version,
                    devices,
                },
            );
            Ok(())
        })
    }
}

/// A section's items: a u32 count, then each item read by `item`. [`Reader::count`] refuses a
/// count the bytes left cannot hold at `item_bytes_min` bytes an item; that every item is at
/// least as long as the bound says is checked here, in debug builds.
fn for_each_item<'a>(
    r: &mut Reader<'a>,
    item_bytes_min: usize,
    mut item: impl FnMut(&mut Reader<'a>) -> DecodeResult<()>,
) -> DecodeResult<()> {
    for _ in 0..r.count(item_bytes_min)? {
        let start = r.position();
        item(r)?;
        debug_assert!(
            r.position() - start >= item_bytes_min,
            "an item of {} bytes, below the {item_bytes_min} its count was checked against",
            r.position() - start
        );
    }
    Ok(())
}
