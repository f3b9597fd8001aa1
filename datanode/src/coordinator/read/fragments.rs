//! EXPLAIN ANALYZE's record of a statement's region reads (its fragments): each read of a
//! region on its leader ([`super::Coordinator`]'s `read_region`) adds its series, rows and time
//! to the statement's [`Fragments`] when one is in scope. The scope is the statement's task and
//! the tasks its reads spawn, so no call between the executor and the coordinator carries it.
//! Calls of one kind to one region on one replica are summed, so the record stays as small as
//! the set of regions read, however many pages a long read takes.

use std::future::Future;
use std::sync::Arc;

use common::views::FragmentView;
use parking_lot::Mutex;

tokio::task_local! {
    static FRAGMENTS: Fragments;
}

/// One statement's fragments, shared by the tasks reading for it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fragments(Arc<Mutex<Vec<FragmentView>>>);

impl Fragments {
    /// Runs `work` recording its region reads into `fragments` (nothing when `None`).
    pub(crate) async fn scope<F: Future>(fragments: Option<Fragments>, work: F) -> F::Output {
        match fragments {
            Some(fragments) => FRAGMENTS.scope(fragments, work).await,
            None => work.await,
        }
    }

    /// The fragments of the statement this task reads for, if it records any.
    pub(crate) fn current() -> Option<Fragments> {
        FRAGMENTS.try_with(Clone::clone).ok()
    }

    /// Adds one region read to the statement's record, if it keeps one.
    pub(crate) fn record(read: FragmentView) {
        let _ = FRAGMENTS.try_with(|fragments| {
            FragmentView::record_into(&mut fragments.0.lock(), read);
        });
    }

    /// Everything recorded so far, in the order each fragment was first read; the record is
    /// left empty.
    pub(crate) fn take(&self) -> Vec<FragmentView> {
        std::mem::take(&mut *self.0.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(region: u64, rows: u64) -> FragmentView {
        FragmentView {
            kind: "raw",
            region,
            replica: "127.0.0.1:10730".into(),
            local: true,
            calls: 1,
            series: 2,
            rows,
            elapsed_us: 10,
            retries: 0,
        }
    }

    #[tokio::test]
    async fn reads_in_scope_are_summed_per_region_and_others_are_not_kept() {
        Fragments::record(read(1, 5));
        let fragments = Fragments::default();
        Fragments::scope(Some(fragments.clone()), async {
            Fragments::record(read(1, 5));
            Fragments::record(read(2, 7));
            let inner = Fragments::current();
            tokio::spawn(Fragments::scope(inner, async {
                Fragments::record(read(1, 3))
            }))
            .await
            .expect("task");
        })
        .await;
        let taken = fragments.take();
        assert_eq!(taken.len(), 2);
        assert_eq!((taken[0].region, taken[0].calls, taken[0].rows), (1, 2, 8));
        assert_eq!((taken[1].region, taken[1].series, taken[1].rows), (2, 2, 7));
        assert!(fragments.take().is_empty());
    }
}
