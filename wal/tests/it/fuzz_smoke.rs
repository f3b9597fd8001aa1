//! A bounded run of the recovery fuzz harness (`wal::fuzzing::recover_from_bytes`, the same one
//! `wal/fuzz` drives) over random bytes and mutated valid segments from a seeded generator.
//! Set `WAL_FUZZ_SEED` to replay a run; the seed is printed when a case fails.

use std::panic::{catch_unwind, AssertUnwindSafe};

use wal::fuzzing::{recover_from_bytes, with_valid_checksums, Outcome};
use wal::{Durability, Wal};

use crate::util::{mem_dir, options, payload_for, segment_files};

const CASES: u64 = 2500;

/// splitmix64: small, seedable, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
}

/// Valid single-segment images with single records, batches and empty payloads, in the current
/// format version and in the previous one.
fn corpus() -> Vec<Vec<u8>> {
    let mut images = Vec::new();
    for (records, len) in [(1u64, 0usize), (3, 10), (5, 100), (2, 700), (12, 40)] {
        let dir = mem_dir("wal-fuzz-corpus");
        let mut opts = options(dir.path(), 1 << 20, Durability::None);
        opts.preallocate = false;
        let wal = Wal::open(opts).expect("open");
        for i in 0..records {
            if i % 4 == 3 {
                let a = payload_for(i, len);
                wal.append_batch(&[&a, b"", &a]).expect("batch");
            } else {
                wal.append(&payload_for(i, len)).expect("append");
            }
        }
        drop(wal);
        let mut bytes = std::fs::read(&segment_files(dir.path())[0]).expect("read");
        if len == 10 {
            // Also a copy with a preallocated-looking zero tail.
            let mut padded = bytes.clone();
            padded.resize(bytes.len() + 500, 0);
            images.push(padded);
        }
        images.push(std::mem::take(&mut bytes));
    }
    // A segment of the previous format version, which a log opens and then appends after.
    images.push(crate::golden::v1_segment());
    images
}

fn mutate(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    let rounds = 1 + rng.below(3);
    for _ in 0..rounds {
        let len = bytes.len() as u64;
        match rng.below(8) {
            0 if len > 0 => {
                let at = rng.below(len) as usize;
                bytes[at] ^= 1 << rng.below(8);
            }
            1 => bytes.truncate(rng.below(len + 1) as usize),
            2 => {
                let extra = rng.below(200) as usize;
                let fill = if rng.below(2) == 0 {
                    0
                } else {
                    rng.next() as u8
                };
                bytes.extend(std::iter::repeat_n(fill, extra));
            }
            3 if len > 0 => {
                let at = rng.below(len) as usize;
                let n = (rng.below(32) as usize).min(bytes.len() - at);
                for b in &mut bytes[at..at + n] {
                    *b = rng.next() as u8;
                }
            }
            4 if len > 0 => {
                let at = rng.below(len) as usize;
                let n = (rng.below(64) as usize).min(bytes.len() - at);
                bytes[at..at + n].fill(0);
            }
            5 if len >= 40 => {
                // Copy a chunk elsewhere: duplicated or misplaced records.
                let from = rng.below(len - 20) as usize;
                let n = 1 + rng.below(20) as usize;
                let chunk = bytes[from..from + n].to_vec();
                let to = rng.below(len - n as u64) as usize;
                bytes[to..to + n].copy_from_slice(&chunk);
            }
            6 if len >= 40 => {
                // A huge or odd length word in some record header position.
                let at = 32 + rng.below(len - 36) as usize;
                let word =
                    [u32::MAX, 0x7FFF_FFFF, 1 << 31, rng.next() as u32][rng.below(4) as usize];
                bytes[at..at + 4].copy_from_slice(&word.to_le_bytes());
            }
            _ => {
                let at = rng.below(len + 1) as usize;
                bytes.insert(at, rng.next() as u8);
            }
        }
    }
    bytes
}

#[test]
fn recovery_never_panics_on_random_and_mutated_segments() {
    let seed = std::env::var("WAL_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    let mut rng = Rng(seed);
    let corpus = corpus();
    let (mut failed, mut recovered, mut with_records) = (0u64, 0u64, 0u64);
    for case in 0..CASES {
        let input = if case % 5 == 0 {
            let len = rng.below(300) as usize;
            (0..len).map(|_| rng.next() as u8).collect()
        } else if case % 5 == 1 {
            // Mutated records whose checksums are then made valid again: exercises the index,
            // batch and tail rules rather than the checksum.
            let base = corpus[rng.below(corpus.len() as u64) as usize].clone();
            let body = mutate(&mut rng, base[32..].to_vec());
            with_valid_checksums(&body)
        } else {
            let base = corpus[rng.below(corpus.len() as u64) as usize].clone();
            mutate(&mut rng, base)
        };
        match catch_unwind(AssertUnwindSafe(|| recover_from_bytes(&input))) {
            Ok(Outcome::OpenFailed) => failed += 1,
            Ok(Outcome::Recovered(n)) => {
                recovered += 1;
                if n > 0 {
                    with_records += 1;
                }
            }
            Err(panic) => {
                eprintln!(
                    "recovery harness panicked: WAL_FUZZ_SEED={seed} case {case}, input {} bytes: {:02x?}",
                    input.len(),
                    input
                );
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!("fuzz smoke seed {seed}: {failed} open failures, {recovered} recovered ({with_records} with records)");
    assert!(
        failed > 0 && with_records > 0,
        "seed {seed}: the harness did not reach both outcomes"
    );
}
