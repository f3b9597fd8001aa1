//! What query results may hold in memory (REVIEW N5): a result is built and kept in memory until
//! its client has read it, so every result is charged, as it is built, against a bound per
//! result and a bound over every result of the node; one that would pass either is refused with
//! a status that says which, instead of running the node out of memory.
//!
//! Bytes are estimated, not measured: a row costs its vector ([`ROW_OVERHEAD_BYTES`]), a cell
//! per column ([`CELL_BYTES`]) and the heap bytes of its text and blob values. The estimate is
//! an upper bound of what the wire carries, so pages bounded by it are bounded on the wire too.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{StatusCode, Value};

use super::{Cell, ExecError, ExecResult};

/// Bytes of one cell in memory.
pub const CELL_BYTES: usize = std::mem::size_of::<Cell>();

/// Bytes of a row besides its cells: its vector, the allocator's share and the map node that
/// holds it while a join builds it.
pub const ROW_OVERHEAD_BYTES: usize = std::mem::size_of::<Vec<Cell>>() + 40;

/// The heap bytes of a value besides its cell.
pub fn value_heap_bytes(value: &Value) -> usize {
    match value {
        Value::Text(s) | Value::String(s) => s.len(),
        Value::Blob(b) => b.len(),
        _ => 0,
    }
}

/// The bytes a row takes, as results are charged.
pub fn row_bytes(row: &[Cell]) -> usize {
    ROW_OVERHEAD_BYTES
        + row.len() * CELL_BYTES
        + row.iter().flatten().map(value_heap_bytes).sum::<usize>()
}

/// The bytes of points read from a series and not yet placed in rows.
pub fn points_bytes(points: &[(i64, Value)]) -> usize {
    std::mem::size_of_val(points)
        + points
            .iter()
            .map(|(_, v)| value_heap_bytes(v))
            .sum::<usize>()
}

/// The bounds every result of one node is charged against, and what they hold now.
#[derive(Debug)]
pub struct ResultBudget {
    result_bytes_max: usize,
    node_bytes_max: usize,
    used: AtomicUsize,
    /// Results refused because one passed `result_bytes_max`.
    pub refused_result: AtomicU64,
    /// Results refused because all results together would pass `node_bytes_max`.
    pub refused_node: AtomicU64,
}

impl ResultBudget {
    /// A budget of `result_bytes_max` per result (`query_result_bytes_max`) and
    /// `node_bytes_max` over all results (`query_results_bytes_max_per_node`).
    pub fn new(result_bytes_max: usize, node_bytes_max: usize) -> Arc<ResultBudget> {
        Arc::new(ResultBudget {
            result_bytes_max,
            node_bytes_max,
            used: AtomicUsize::new(0),
            refused_result: AtomicU64::new(0),
            refused_node: AtomicU64::new(0),
        })
    }

    /// Bytes all open results hold now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A charge for one new result.
    pub fn charge(self: &Arc<Self>) -> ResultCharge {
        ResultCharge {
            budget: Some(self.clone()),
            bytes: 0,
        }
    }
}

/// The bytes one result holds, charged to its node's budget: taken as the result is built,
/// given back as its rows are sent, and all of it when the charge is dropped.
#[derive(Debug)]
pub struct ResultCharge {
    /// `None`: nothing bounds this result (the CLI's own executor, tests).
    budget: Option<Arc<ResultBudget>>,
    bytes: usize,
}

impl ResultCharge {
    /// A charge that nothing bounds.
    pub fn unbounded() -> ResultCharge {
        ResultCharge {
            budget: None,
            bytes: 0,
        }
    }

    /// Bytes charged now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes this result may still be charged before its own bound refuses it (the node's
    /// bound may refuse it sooner).
    pub fn room(&self) -> usize {
        match &self.budget {
            Some(budget) => budget.result_bytes_max.saturating_sub(self.bytes),
            None => usize::MAX,
        }
    }

    /// Charges `bytes` more, or refuses them (700 when this result would pass its own bound,
    /// 606 when all results of the node would pass theirs), charging nothing.
    pub fn add(&mut self, bytes: usize) -> ExecResult<()> {
        let Some(budget) = &self.budget else {
            self.bytes += bytes;
            return Ok(());
        };
        let wanted = self.bytes.saturating_add(bytes);
        if wanted > budget.result_bytes_max {
            budget.refused_result.fetch_add(1, Ordering::Relaxed);
            return Err(ExecError::refused(
                StatusCode::IllegalParameter,
                format!(
                    "the result needs more than {} bytes of memory (query_result_bytes_max); \
                     select fewer series, a narrower time range or fewer rows (LIMIT)",
                    budget.result_bytes_max
                ),
            ));
        }
        let before = budget.used.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > budget.node_bytes_max {
            budget.used.fetch_sub(bytes, Ordering::AcqRel);
            budget.refused_node.fetch_add(1, Ordering::Relaxed);
            return Err(ExecError::refused(
                StatusCode::WriteProcessReject,
                format!(
                    "the open query results of this DataNode hold {before} of their {} bytes \
                     (query_results_bytes_max_per_node); read or close open results, or retry \
                     later",
                    budget.node_bytes_max
                ),
            ));
        }
        self.bytes = wanted;
        Ok(())
    }

    /// Gives back `bytes` (at most what is charged).
    pub fn release(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        self.bytes -= bytes;
        if let Some(budget) = &self.budget {
            budget.used.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Makes the charge exactly `bytes`: more is charged (and may be refused), less given back.
    pub fn settle(&mut self, bytes: usize) -> ExecResult<()> {
        if bytes > self.bytes {
            self.add(bytes - self.bytes)
        } else {
            self.release(self.bytes - bytes);
            Ok(())
        }
    }
}

impl Drop for ResultCharge {
    fn drop(&mut self) {
        self.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_bounded_per_result_and_per_node_and_given_back() {
        let budget = ResultBudget::new(1000, 1500);
        let mut a = budget.charge();
        a.add(600).unwrap();
        a.add(400).unwrap();
        let e = a.add(1).unwrap_err();
        assert_eq!(e.code(), 700);
        assert!(e.to_string().contains("query_result_bytes_max"), "{e}");
        assert_eq!((a.bytes(), budget.used()), (1000, 1000));
        let mut b = budget.charge();
        b.add(500).unwrap();
        let e = b.add(1).unwrap_err();
        assert_eq!(e.code(), 606);
        assert!(
            e.to_string().contains("query_results_bytes_max_per_node"),
            "{e}"
        );
        assert_eq!(b.bytes(), 500, "a refused charge takes nothing");
        a.release(300);
        b.settle(700).unwrap();
        assert_eq!(budget.used(), 1400);
        b.settle(100).unwrap();
        assert_eq!(budget.used(), 800);
        drop(a);
        assert_eq!(budget.used(), 100);
        drop(b);
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.refused_result.load(Ordering::Relaxed), 1);
        assert_eq!(budget.refused_node.load(Ordering::Relaxed), 1);
        // Nothing bounds an unbounded charge.
        let mut free = ResultCharge::unbounded();
        free.add(usize::MAX / 2).unwrap();
        free.release(usize::MAX);
        assert_eq!(free.bytes(), 0);
    }

    #[test]
    fn row_bytes_count_cells_and_heap() {
        let row = vec![
            Some(Value::Int64(1)),
            None,
            Some(Value::Text("abcd".into())),
        ];
        assert_eq!(row_bytes(&row), ROW_OVERHEAD_BYTES + 3 * CELL_BYTES + 4);
    }
}
