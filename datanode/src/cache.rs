//! The DataNode's metadata caches: schemas, the partition table, and region routes (replica sets,
//! leader hints, DataNode addresses). They are trusted only under a live lease: every lookup checks
//! the lease first and fails closed with 535 (`LeaseFencedRetryPolicy::None`).
//!
//! A generation counter rises on every clear or invalidation. A caller that fetched metadata from
//! the ConfigNode stores it only if the generation did not move since it started — otherwise it
//! could put back an entry that an invalidation or a lease recovery just removed — and the
//! coordinator re-checks the generation before each dispatch, so an invalidation also cancels
//! operations that had already read the old entries.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::table::TableView;
use common::{DataType, LeaseFencedRetryPolicy};
use parking_lot::RwLock;

use crate::lease::MetadataLeaseManager;
use engine::{LeaseFenced, LeaseGate};

/// A device's database and the types of its known series.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSchema {
    /// e.g. `root.sg`.
    pub database: String,
    /// Measurement → type.
    pub types: BTreeMap<String, DataType>,
    /// Alias → the measurement it names, for the names asked that are aliases: a write or type
    /// lookup by an alias is one by that series.
    pub aliases: BTreeMap<String, String>,
    /// The ConfigNode metadata version the entry was fetched at: the fencing token of the
    /// inserts validated against it.
    pub version: u64,
    /// The database's time to live in ms when fetched (`None` = none). SET TTL invalidates the
    /// database's entries on every DataNode before it is acknowledged, so a cached value is
    /// never older than an acknowledged SET TTL.
    pub ttl_ms: Option<i64>,
    /// The database is the table model's: only a table write may write the device.
    pub table_model: bool,
}

impl DeviceSchema {
    /// Whether `name` is a series of the device or an alias of one.
    pub fn knows(&self, name: &str) -> bool {
        self.types.contains_key(name) || self.aliases.contains_key(name)
    }

    /// The measurement `name` stands for: the series it is the alias of, else itself.
    pub fn series_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases.get(name).map_or(name, String::as_str)
    }
}

/// Where a region lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegionRoute {
    /// The region's database.
    pub database: String,
    /// DataNodes holding a replica.
    pub replicas: Vec<u64>,
    /// The leader last heard of (0 = unknown).
    pub leader: u64,
    /// A migration in progress, `(from, to)`: `to` hosts a joining replica that the region's
    /// leader swaps for `from`.
    pub migration: Option<(u64, u64)>,
}

/// Addresses of a DataNode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeAddresses {
    /// `DataNodeInternalService`.
    pub internal: String,
    /// `SessionService`.
    pub rpc: String,
}

#[derive(Default)]
struct Inner {
    schemas: HashMap<String, DeviceSchema>,
    partitions: HashMap<(String, i64), u64>,
    /// (database, series slot) → the region groups holding it in every time slot. Never empty:
    /// a slot without a group is not cached (the next write may place it).
    series_slots: HashMap<(String, u32), Vec<u64>>,
    regions: BTreeMap<u64, RegionRoute>,
    nodes: BTreeMap<u64, NodeAddresses>,
    /// (database, table) → the table-model table's schema and incarnation (its devices not
    /// kept). A table only gains columns (and its tags' order never changes) while it lives, so
    /// an entry that covers a tablet's columns is true until DROP DATABASE or DROP TABLE
    /// invalidates it.
    tables: HashMap<(String, String), TableView>,
    /// The fence floor of the last re-stamp ([`MetadataCache::restamp`]): a schema stored
    /// since is stamped at least this.
    restamped_to: u64,
}

/// Everything a recovery pulls from the ConfigNode before the lease returns to NORMAL.
#[derive(Clone, Debug, Default)]
pub struct PulledMetadata {
    /// Every region group.
    pub regions: BTreeMap<u64, RegionRoute>,
    /// Every registered DataNode.
    pub nodes: BTreeMap<u64, NodeAddresses>,
}

/// The schema, partition and route caches.
pub struct MetadataCache {
    lease: Arc<MetadataLeaseManager>,
    generation: AtomicU64,
    /// Rises with the generation and at every re-stamp ([`MetadataCache::restamp`]): what the
    /// in-flight guard counts operations by, so a drain waits for those that read the old
    /// entries or stamps.
    epoch: AtomicU64,
    entries_max: usize,
    inner: RwLock<Inner>,
}

impl MetadataCache {
    /// Empty caches gated by `lease`, each holding at most `entries_max` entries.
    pub fn new(lease: Arc<MetadataLeaseManager>, entries_max: usize) -> MetadataCache {
        assert!(entries_max > 0, "cache_entries_max must be positive");
        MetadataCache {
            lease,
            generation: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            entries_max,
            inner: RwLock::new(Inner::default()),
        }
    }

    /// The current generation; pass it back to the `put_*` calls.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The current epoch (see the field).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    fn check(&self) -> Result<(), LeaseFenced> {
        self.lease.check(LeaseFencedRetryPolicy::None)
    }

    /// The cached schema of `device`.
    pub fn schema(&self, device: &str) -> Result<Option<DeviceSchema>, LeaseFenced> {
        self.check()?;
        Ok(self.inner.read().schemas.get(device).cloned())
    }

    /// The cached region of `(device, time_slot)`.
    pub fn partition(&self, device: &str, time_slot: i64) -> Result<Option<u64>, LeaseFenced> {
        self.check()?;
        Ok(self
            .inner
            .read()
            .partitions
            .get(&(device.to_string(), time_slot))
            .copied())
    }

    /// The region groups holding `series_slot` of `database` in every time slot, if cached.
    /// The ConfigNode never moves a series slot out of its group while the database lives, so
    /// an entry stays true until DROP DATABASE invalidates it.
    pub fn series_slot_regions(
        &self,
        database: &str,
        series_slot: u32,
    ) -> Result<Option<Vec<u64>>, LeaseFenced> {
        self.check()?;
        Ok(self
            .inner
            .read()
            .series_slots
            .get(&(database.to_string(), series_slot))
            .cloned())
    }

    /// Stores where series slots live (dropped if the caches moved on since `generation`);
    /// entries naming no region are skipped.
    pub fn put_series_slot_regions(
        &self,
        generation: u64,
        entries: Vec<((String, u32), Vec<u64>)>,
    ) -> bool {
        self.put(generation, |inner| {
            inner.series_slots.extend(
                entries
                    .into_iter()
                    .filter(|(_, regions)| !regions.is_empty()),
            );
        })
    }

    /// The cached schema and incarnation of a table-model table.
    pub fn table(&self, database: &str, table: &str) -> Result<Option<TableView>, LeaseFenced> {
        self.check()?;
        Ok(self
            .inner
            .read()
            .tables
            .get(&(database.to_string(), table.to_string()))
            .cloned())
    }

    /// Stores a table's schema and incarnation fetched at `generation` (without its devices);
    /// false if the caches moved on since.
    pub fn put_table(&self, generation: u64, database: &str, table: TableView) -> bool {
        let table = TableView {
            devices: Vec::new(),
            ..table
        };
        self.put(generation, |inner| {
            inner
                .tables
                .insert((database.to_string(), table.schema.name.clone()), table);
        })
    }

    /// Drops a table's entry (its columns are being extended, or it is being dropped).
    pub fn forget_table(&self, database: &str, table: &str) {
        self.inner
            .write()
            .tables
            .remove(&(database.to_string(), table.to_string()));
    }

    /// The cached route of a region.
    pub fn region(&self, region: u64) -> Result<Option<RegionRoute>, LeaseFenced> {
        self.check()?;
        Ok(self.inner.read().regions.get(&region).cloned())
    }

    /// The addresses of a DataNode.
    pub fn node(&self, node: u64) -> Result<Option<NodeAddresses>, LeaseFenced> {
        self.check()?;
        Ok(self.inner.read().nodes.get(&node).cloned())
    }

    fn put(&self, generation: u64, f: impl FnOnce(&mut Inner)) -> bool {
        let mut inner = self.inner.write();
        // Checked under the write lock, which `clear` and `invalidate` also take: an entry fetched
        // before an invalidation can never land after it.
        if self.generation.load(Ordering::Acquire) != generation {
            return false;
        }
        f(&mut inner);
        // A bounded cache: when full, start over rather than track recency.
        if inner.schemas.len() > self.entries_max {
            inner.schemas.clear();
        }
        if inner.series_slots.len() > self.entries_max {
            inner.series_slots.clear();
        }
        if inner.partitions.len() > self.entries_max {
            inner.partitions.clear();
        }
        if inner.tables.len() > self.entries_max {
            inner.tables.clear();
        }
        true
    }

    /// Stores a device's schema fetched at `generation`; false if the caches moved on since.
    pub fn put_schema(&self, generation: u64, device: &str, mut schema: DeviceSchema) -> bool {
        self.put(generation, |inner| {
            schema.version = schema.version.max(inner.restamped_to);
            inner.schemas.insert(device.to_string(), schema);
        })
    }

    /// Stores partitions, routes and DataNode addresses fetched at `generation`.
    pub fn put_partitions(
        &self,
        generation: u64,
        partitions: Vec<((String, i64), u64)>,
        regions: Vec<(u64, RegionRoute)>,
        nodes: Vec<(u64, NodeAddresses)>,
    ) -> bool {
        self.put(generation, |inner| {
            inner.partitions.extend(partitions);
            for (id, route) in regions {
                let leader = inner.regions.get(&id).map_or(0, |r| r.leader);
                let keep = if route.leader == 0 {
                    leader
                } else {
                    route.leader
                };
                inner.regions.insert(
                    id,
                    RegionRoute {
                        leader: keep,
                        ..route
                    },
                );
            }
            inner.nodes.extend(nodes);
        })
    }

    /// Records who leads a region (a hint: a wrong one costs one redirect). Hints are not
    /// metadata a write is validated against, so they are taken whatever the generation.
    pub fn set_leader(&self, region: u64, leader: u64) {
        if leader == 0 {
            return;
        }
        if let Some(route) = self.inner.write().regions.get_mut(&region) {
            route.leader = leader;
        }
    }

    /// Removes everything (lease recovery).
    pub fn clear(&self) {
        let mut inner = self.inner.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *inner = Inner::default();
    }

    /// Installs what a recovery pulled, after [`MetadataCache::clear`].
    pub fn install(&self, pulled: PulledMetadata) {
        let mut inner = self.inner.write();
        inner.regions = pulled.regions;
        inner.nodes = pulled.nodes;
    }

    /// Re-stamps every cached schema fetched at a version below `floor` with it, and every one
    /// stored from now on (a fence-floor round, REVIEW N9). The ConfigNode sends it only while
    /// no fence operation is pending, once every one at or below `floor` has completed: each
    /// was invalidated here (or this node was fenced, and a recovery clears everything before
    /// the cache is trusted again), and a fetch that started before one of those invalidations
    /// is never stored (the generation moved), so whatever is cached, or stored later from a
    /// fetch no invalidation overtook, holds as of `floor`. A write validated from now on
    /// carries a token at or above it, which the regions' floor admits. Nothing is removed, so
    /// the generation stays (running writes go on); the epoch rises, so the drain waits for
    /// the operations that read the old stamps.
    pub fn restamp(&self, floor: u64) {
        let mut inner = self.inner.write();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        inner.restamped_to = inner.restamped_to.max(floor);
        for schema in inner.schemas.values_mut() {
            schema.version = schema.version.max(floor);
        }
    }

    /// Removes the schemas and partitions of `databases` and of the devices of `series`, and
    /// the table schemas of `databases` and of `tables` (database, table) with the schemas of
    /// every device of those tables (ConfigNode invalidation). Once this returns, no lookup can
    /// return them.
    pub fn invalidate(
        &self,
        databases: &[String],
        series: &[(String, String)],
        tables: &[(String, String)],
    ) {
        let mut inner = self.inner.write();
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let prefixes: Vec<String> = tables.iter().map(|(db, t)| format!("{db}.{t}")).collect();
        let in_database = |device: &str| {
            databases.iter().any(|db| device_in(device, db))
                || prefixes.iter().any(|p| device == p || device_in(device, p))
        };
        inner
            .schemas
            .retain(|device, schema| !in_database(device) && !databases.contains(&schema.database));
        for (device, measurement) in series {
            if let Some(schema) = inner.schemas.get_mut(device) {
                schema.types.remove(measurement);
            }
        }
        inner
            .partitions
            .retain(|(device, _), _| !in_database(device));
        inner
            .series_slots
            .retain(|(database, _), _| !databases.contains(database));
        inner
            .regions
            .retain(|_, r| !databases.contains(&r.database));
        inner
            .tables
            .retain(|key, _| !databases.contains(&key.0) && !tables.contains(key));
    }
}

fn device_in(device: &str, database: &str) -> bool {
    common::path::is_under(device, database)
}

#[cfg(test)]
mod tests {
    use super::*;
    use consensus::ManualClock;

    fn live_cache() -> (MetadataCache, Arc<MetadataLeaseManager>, ManualClock) {
        let clock = ManualClock::default();
        let lease = Arc::new(MetadataLeaseManager::new(Arc::new(clock.clone()), 100));
        lease.on_heartbeat(0).unwrap();
        lease.recover(|| {}, || Ok::<(), ()>(())).unwrap();
        (MetadataCache::new(lease.clone(), 10), lease, clock)
    }

    #[test]
    fn fails_closed_when_fenced_and_refuses_entries_from_before_a_clear() {
        let (cache, _lease, clock) = live_cache();
        let g = cache.generation();
        let schema = DeviceSchema {
            database: "root.sg".into(),
            types: [("s1".to_string(), DataType::Int64)].into(),
            aliases: BTreeMap::new(),
            version: 1,
            ttl_ms: None,
            table_model: false,
        };
        assert!(cache.put_schema(g, "root.sg.d1", schema.clone()));
        assert_eq!(cache.schema("root.sg.d1").unwrap(), Some(schema.clone()));
        cache.invalidate(&["root.sg".into()], &[], &[]);
        assert_eq!(cache.schema("root.sg.d1").unwrap(), None);
        assert!(
            !cache.put_schema(g, "root.sg.d1", schema),
            "fetched before the invalidation"
        );
        clock.advance_ms(101);
        assert_eq!(
            cache.schema("root.sg.d1"),
            Err(LeaseFenced {
                policy: LeaseFencedRetryPolicy::None
            })
        );
    }

    #[test]
    fn table_schemas_go_with_their_database_their_drop_and_the_lease() {
        let (cache, _lease, clock) = live_cache();
        let g = cache.generation();
        let schema = TableView {
            schema: common::table::TableSchema {
                name: "t".into(),
                columns: vec![common::table::TableColumn {
                    name: "k".into(),
                    category: common::table::Category::Tag,
                    data_type: DataType::String,
                }],
                ttl_ms: None,
            },
            created_version: 4,
            devices: Vec::new(),
        };
        assert!(cache.put_table(g, "root.db", schema.clone()));
        assert!(cache.put_table(g, "root.other", schema.clone()));
        assert_eq!(cache.table("root.db", "t").unwrap(), Some(schema.clone()));
        cache.forget_table("root.db", "t");
        assert_eq!(cache.table("root.db", "t").unwrap(), None);
        let g = cache.generation();
        assert!(cache.put_table(g, "root.db", schema.clone()));
        // DROP DATABASE's invalidation takes the database's tables, and refuses a fetch from
        // before it.
        cache.invalidate(&["root.db".into()], &[], &[]);
        assert_eq!(cache.table("root.db", "t").unwrap(), None);
        assert_eq!(
            cache.table("root.other", "t").unwrap(),
            Some(schema.clone())
        );
        assert!(!cache.put_table(g, "root.db", schema.clone()));
        // DROP TABLE's invalidation takes that table alone.
        let g = cache.generation();
        let mut other_table = schema.clone();
        other_table.schema.name = "u".into();
        assert!(cache.put_table(g, "root.db", schema.clone()));
        assert!(cache.put_table(g, "root.db", other_table.clone()));
        // With the schemas of the table's devices (its device of no tags is its own path).
        let device = |database: &str| DeviceSchema {
            database: database.into(),
            types: [("v".to_string(), DataType::Double)].into(),
            aliases: BTreeMap::new(),
            version: 1,
            ttl_ms: None,
            table_model: false,
        };
        for d in ["root.db.t", "root.db.t.-a", "root.db.tx.-a", "root.db.u.-a"] {
            assert!(cache.put_schema(g, d, device("root.db")));
        }
        cache.invalidate(&[], &[], &[("root.db".into(), "t".into())]);
        assert_eq!(cache.table("root.db", "t").unwrap(), None);
        for (d, kept) in [
            ("root.db.t", false),
            ("root.db.t.-a", false),
            ("root.db.tx.-a", true),
            ("root.db.u.-a", true),
        ] {
            assert_eq!(cache.schema(d).unwrap().is_some(), kept, "{d}");
        }
        assert_eq!(cache.table("root.db", "u").unwrap(), Some(other_table));
        assert!(!cache.put_table(g, "root.db", schema));
        clock.advance_ms(101);
        assert!(
            cache.table("root.other", "t").is_err(),
            "fails closed when fenced"
        );
    }

    #[test]
    fn series_invalidation_removes_only_that_series() {
        let (cache, _lease, _clock) = live_cache();
        let g = cache.generation();
        let schema = DeviceSchema {
            database: "root.sg".into(),
            types: [
                ("s1".to_string(), DataType::Int64),
                ("s2".to_string(), DataType::Double),
            ]
            .into(),
            aliases: BTreeMap::new(),
            version: 1,
            ttl_ms: None,
            table_model: false,
        };
        cache.put_schema(g, "root.sg.d1", schema);
        cache.invalidate(&[], &[("root.sg.d1".into(), "s1".into())], &[]);
        let left = cache.schema("root.sg.d1").unwrap().unwrap();
        assert_eq!(left.types.keys().collect::<Vec<_>>(), ["s2"]);
        assert!(device_in("root.sg.d1", "root.sg"));
        assert!(!device_in("root.sgx.d1", "root.sg"));
    }

    #[test]
    fn a_fence_floor_restamps_cached_and_later_schemas_without_moving_the_generation() {
        let (cache, _lease, _clock) = live_cache();
        let g = cache.generation();
        let schema = |version| DeviceSchema {
            database: "root.sg".into(),
            types: [("s1".to_string(), DataType::Int64)].into(),
            aliases: BTreeMap::new(),
            version,
            ttl_ms: None,
            table_model: false,
        };
        assert!(cache.put_schema(g, "root.sg.old", schema(3)));
        assert!(cache.put_schema(g, "root.sg.new", schema(12)));
        let epoch = cache.epoch();
        cache.restamp(10);
        assert!(
            cache.epoch() > epoch,
            "the drain waits for readers of the old stamps"
        );
        assert_eq!(
            cache.generation(),
            g,
            "nothing removed: running writes go on"
        );
        let version = |device| cache.schema(device).unwrap().unwrap().version;
        assert_eq!(version("root.sg.old"), 10, "re-stamped with the floor");
        assert_eq!(
            version("root.sg.new"),
            12,
            "a newer fetch keeps its version"
        );
        assert!(cache.put_schema(g, "root.sg.late", schema(4)));
        assert_eq!(
            version("root.sg.late"),
            10,
            "stored after the round: re-stamped too"
        );
        cache.invalidate(&["root.sg".into()], &[], &[]);
        assert!(
            !cache.put_schema(g, "root.sg.late", schema(4)),
            "a fetch an invalidation overtook is never stored"
        );
    }
}
