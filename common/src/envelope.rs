//! The one sealed envelope of Fencepost's self-contained files (the region manifest, region and
//! ConfigNode snapshots): `magic (8 bytes) ‖ body ‖ CRC32 (little-endian) of magic and body`.
//! A body that needs a format version carries it first (the manifest's u32); a new magic is the
//! other way to version (the region snapshot's `FPRSNAP1` → `FPRSNAP2`).

use crate::codec::{DecodeError, DecodeResult, Reader, Writer};

/// Magic length.
pub const MAGIC_LEN: usize = 8;
/// Magic plus CRC: the smallest envelope.
pub const OVERHEAD: usize = MAGIC_LEN + 4;

/// `magic ‖ body ‖ CRC32`, the body written by `body`.
pub fn seal(magic: &[u8; MAGIC_LEN], body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(magic);
    body(&mut w);
    let crc = crc32fast::hash(w.as_slice());
    w.u32(crc);
    let bytes = w.into_bytes();
    debug_assert!(open(&bytes, &[magic]).is_ok(), "a sealed envelope opens");
    bytes
}

/// Checks the CRC, then the magic against `magics` (the current one and any older ones still
/// read): the index of the magic found and a reader over the body, whose errors report offsets
/// in the whole file.
pub fn open<'a>(bytes: &'a [u8], magics: &[&[u8; MAGIC_LEN]]) -> DecodeResult<(usize, Reader<'a>)> {
    if bytes.len() < OVERHEAD {
        return Err(DecodeError {
            offset: 0,
            reason: format!("{} bytes is too short for a sealed file", bytes.len()),
        });
    }
    let (sealed, crc) = bytes.split_at(bytes.len() - 4);
    let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    if crc32fast::hash(sealed) != stored {
        return Err(DecodeError {
            offset: sealed.len() as u64,
            reason: "CRC mismatch".into(),
        });
    }
    let (magic, body) = sealed.split_at(MAGIC_LEN);
    match magics.iter().position(|m| m.as_slice() == magic) {
        Some(index) => Ok((index, Reader::at(body, MAGIC_LEN))),
        None => Err(DecodeError {
            offset: 0,
            reason: format!("unknown magic {:?}", String::from_utf8_lossy(magic)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_envelope() {
        let bytes = seal(b"FPTEST01", |w| w.u32(7));
        let mut expected = b"FPTEST01".to_vec();
        expected.extend_from_slice(&7u32.to_le_bytes());
        let crc = crc32fast::hash(&expected);
        expected.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(bytes, expected);
        let (which, mut body) = open(&bytes, &[b"FPOLD001", b"FPTEST01"]).unwrap();
        assert_eq!(which, 1);
        assert_eq!(body.u32().unwrap(), 7);
        body.finish().unwrap();
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_refused() {
        let bytes = seal(b"FPTEST01", |w| w.str16("root.sg"));
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(open(&bad, &[b"FPTEST01"]).is_err(), "bit {i}");
        }
        for len in 0..bytes.len() {
            assert!(open(&bytes[..len], &[b"FPTEST01"]).is_err(), "length {len}");
        }
    }

    #[test]
    fn an_unknown_magic_is_refused() {
        let bytes = seal(b"FPTEST01", |_| {});
        let e = open(&bytes, &[b"FPTEST02"]).unwrap_err();
        assert!(e.reason.contains("FPTEST01"), "{e}");
    }

    #[test]
    fn body_errors_report_offsets_in_the_file() {
        let bytes = seal(b"FPTEST01", |w| w.u8(9));
        let (_, mut body) = open(&bytes, &[b"FPTEST01"]).unwrap();
        assert_eq!(body.bool().unwrap_err().offset, MAGIC_LEN as u64);
    }
}
