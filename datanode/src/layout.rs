//! A DataNode's data directory: its identity file (id and incarnation epoch), each region's
//! replica file, and the leftovers of an interrupted region removal.

use std::path::Path;

use crate::error::{Error, Result};

/// Deletes `regions/<id>/` (absent is fine) and fsyncs `regions/`: the last step of a removal,
/// also how start-up finishes one a crash interrupted.
pub(crate) fn remove_region_dir(regions_dir: &Path, region_id: u64) -> Result<()> {
    let region_dir = regions_dir.join(region_id.to_string());
    match std::fs::remove_dir_all(&region_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("removing {}", region_dir.display()), e)),
    }
    common::durable::sync_dir(regions_dir)
        .map_err(|e| Error::io(format!("syncing {}", regions_dir.display()), e))
}

/// Deletes every `regions/<id>/` that has no `regions/<id>.replicas`: a region's replica file is
/// written before its directory is created and deleted before it is removed, so such a
/// directory can only be what a crash left of a removal. Returns their ids.
pub(crate) fn clean_removal_leftovers(dir: &Path) -> Result<Vec<u64>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
    };
    let mut leftovers = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<u64>().ok())
        else {
            continue;
        };
        if entry.path().is_dir() && !dir.join(format!("{id}.replicas")).exists() {
            leftovers.push(id);
        }
    }
    leftovers.sort_unstable();
    for id in &leftovers {
        remove_region_dir(dir, *id)?;
    }
    Ok(leftovers)
}

/// `identity` holds `"<node id> <incarnation epoch>\n"`.
pub(crate) fn read_identity(path: &Path) -> Result<(u64, u64)> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let bad = |reason: &str| Error::Identity {
        path: path.display().to_string(),
        reason: reason.to_string(),
    };
    let mut parts = text.split_whitespace();
    let id = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no node id"))?;
    let epoch = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no incarnation epoch"))?;
    Ok((id, epoch))
}

/// Replaces a small file atomically and durably ([`common::durable::replace_durably`]).
pub(crate) fn write_durably(path: &Path, text: &str) -> Result<()> {
    common::durable::replace_durably(path, text.as_bytes())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

pub(crate) fn write_identity(path: &Path, id: u64, epoch: u64) -> Result<()> {
    write_durably(path, &format!("{id} {epoch}\n"))
}

/// `regions/<id>.replicas` holds `"<database>\n<id>,<id>,...\n"` (no ids for a joining
/// replica).
pub(crate) fn write_replicas(
    dir: &Path,
    region_id: u64,
    database: &str,
    peers: &[u64],
) -> Result<()> {
    let peers: Vec<String> = peers.iter().map(u64::to_string).collect();
    write_durably(
        &dir.join(format!("{region_id}.replicas")),
        &format!("{database}\n{}\n", peers.join(",")),
    )
}

pub(crate) fn stored_regions(dir: &Path) -> Result<Vec<(u64, String, Vec<u64>)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(id) = name.strip_suffix(".replicas").and_then(|s| s.parse().ok()) else {
            continue;
        };
        let path = entry.path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let bad = || Error::Identity {
            path: path.display().to_string(),
            reason: "not <database>\\n<id>,<id>...".into(),
        };
        let mut lines = text.lines();
        let database = lines.next().ok_or_else(bad)?.to_string();
        let peers = lines
            .next()
            .ok_or_else(bad)?
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| p.trim().parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<u64>>>()?;
        out.push((id, database, peers));
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn identity_and_replica_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("identity");
        assert_eq!(read_identity(&path).unwrap(), (0, 0));
        write_identity(&path, 4, 9).unwrap();
        assert_eq!(read_identity(&path).unwrap(), (4, 9));
        std::fs::write(&path, "x").unwrap();
        assert!(read_identity(&path).is_err());

        write_replicas(dir.path(), 7, "root.sg", &[1, 2, 3]).unwrap();
        write_replicas(dir.path(), 8, "root.sg", &[]).unwrap();
        assert_eq!(
            stored_regions(dir.path()).unwrap(),
            vec![
                (7, "root.sg".to_string(), vec![1, 2, 3]),
                (8, "root.sg".to_string(), vec![])
            ]
        );
    }
}
