//! The region digest: FNV-1a (64-bit) over a canonical encoding of every series' type and points in
//! sorted order. Only the logical content goes in, never the flush state, so replicas holding the
//! same data agree whatever they have flushed.

use common::{DataType, Value};

use crate::region::RegionDigest;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub(crate) struct DigestBuilder {
    hash: u64,
    points: u64,
}

impl DigestBuilder {
    pub(crate) fn new() -> DigestBuilder {
        DigestBuilder {
            hash: FNV_OFFSET,
            points: 0,
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash ^= b as u64;
            self.hash = self.hash.wrapping_mul(FNV_PRIME);
        }
    }

    /// Starts a series; series must come in sorted order.
    pub(crate) fn series(&mut self, device: &str, measurement: &str, data_type: DataType) {
        self.bytes(&[0xff]);
        self.bytes(&(device.len() as u32).to_le_bytes());
        self.bytes(device.as_bytes());
        self.bytes(&(measurement.len() as u32).to_le_bytes());
        self.bytes(measurement.as_bytes());
        self.bytes(&[data_type.code()]);
    }

    /// Adds a point of the current series; points must come in ascending time order.
    pub(crate) fn point(&mut self, timestamp: i64, value: &Value) {
        self.points += 1;
        self.bytes(&timestamp.to_le_bytes());
        match value {
            Value::Boolean(v) => self.bytes(&[*v as u8]),
            Value::Int32(v) | Value::Date(v) => self.bytes(&v.to_le_bytes()),
            Value::Int64(v) | Value::Timestamp(v) => self.bytes(&v.to_le_bytes()),
            Value::Float(v) => self.bytes(&v.to_bits().to_le_bytes()),
            Value::Double(v) => self.bytes(&v.to_bits().to_le_bytes()),
            Value::Text(v) | Value::String(v) => {
                self.bytes(&(v.len() as u32).to_le_bytes());
                self.bytes(v.as_bytes());
            }
            Value::Blob(v) => {
                self.bytes(&(v.len() as u32).to_le_bytes());
                self.bytes(v);
            }
        }
    }

    pub(crate) fn finish(self, applied_index: u64) -> RegionDigest {
        RegionDigest {
            applied_index,
            points: self.points,
            hash: self.hash,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_digest() {
        let empty = DigestBuilder::new().finish(0);
        assert_eq!(empty.hash, FNV_OFFSET);
        let mut d = DigestBuilder::new();
        d.series("root.sg.d1", "s1", DataType::Int64);
        d.point(1, &Value::Int64(2));
        let digest = d.finish(3);
        assert_eq!(digest.points, 1);
        assert_eq!(digest.applied_index, 3);
        // Golden (computed independently): the canonical encoding must not drift between versions,
        // or replicas running different builds would disagree.
        assert_eq!(digest.hash, 0x0e26_3980_d6dd_65f0);
    }
}
