//! How raft messages leave a node: the message with its group, its wire form, the `Transport`
//! trait; and the seeded RNG the core and the simulations share.

use bytes::Bytes;
use protobuf::Message as _;
use raft::eraftpb::Message;

use crate::error::StorageError;
use crate::{GroupId, NodeId};

/// One raft message with the group it belongs to. Raft peer ids are node ids, so `message.to`
/// names the destination node.
#[derive(Debug, Clone, PartialEq)]
pub struct RaftMessage {
    /// The raft group (region) the message belongs to.
    pub group: GroupId,
    /// The raft-rs message.
    pub message: Message,
}

impl RaftMessage {
    /// Wire form for a networked transport: group id as u64 little-endian, then the protobuf
    /// encoding of the raft-rs message.
    pub fn encode(&self) -> Vec<u8> {
        let body_len = self.message.compute_size() as usize;
        let mut out = Vec::with_capacity(8 + body_len);
        out.extend_from_slice(&self.group.to_le_bytes());
        self.message
            .write_to_vec(&mut out)
            .expect("a raft message in memory always encodes");
        out
    }

    /// Whether the message carries entries or a snapshot (an append or a snapshot message), as
    /// opposed to the small ones that keep a group's leadership: heartbeats, votes, responses.
    pub fn is_bulk(&self) -> bool {
        matches!(
            self.message.get_msg_type(),
            raft::eraftpb::MessageType::MsgAppend | raft::eraftpb::MessageType::MsgSnapshot
        )
    }

    /// The data of the snapshot a snapshot message carries (`None` for any other message).
    pub fn snapshot_data(&self) -> Option<&[u8]> {
        (self.message.get_msg_type() == raft::eraftpb::MessageType::MsgSnapshot)
            .then(|| self.message.get_snapshot().get_data())
    }

    /// Inverse of [`RaftMessage::encode`].
    pub fn decode(bytes: &[u8]) -> Result<RaftMessage, StorageError> {
        RaftMessage::decode_shared(&Bytes::copy_from_slice(bytes))
    }

    /// Inverse of [`RaftMessage::encode`] without copying: the entries' data are slices of
    /// `bytes`, which they keep alive.
    pub fn decode_shared(bytes: &Bytes) -> Result<RaftMessage, StorageError> {
        let corrupt = |reason: String| StorageError::Corrupt {
            log_index: 0,
            reason,
        };
        if bytes.len() < 8 {
            return Err(corrupt(format!("raft message of {} bytes", bytes.len())));
        }
        let group = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
        let message = Message::parse_from_carllerche_bytes(&bytes.slice(8..))
            .map_err(|e| corrupt(e.to_string()))?;
        Ok(RaftMessage { group, message })
    }
}

/// Sends raft messages to other nodes. Delivery is best effort: raft retries, so an
/// implementation drops messages rather than block the node (bounded queues, no retries here).
pub trait Transport {
    /// Sends `messages` (all addressed to `to_node`, possibly of several groups).
    fn send(&self, to_node: NodeId, messages: Vec<RaftMessage>);
}

/// SplitMix64: a tiny seeded RNG, so that no dependency's global RNG leaks into determinism.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// An RNG seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`; `low` when the range is empty.
    pub fn range(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u32) -> bool {
        self.range(0, 1000) < u64::from(per_mille)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::MessageType;

    #[test]
    fn raft_message_wire_form_round_trips() {
        let mut message = Message {
            to: 2,
            from: 1,
            term: 5,
            ..Default::default()
        };
        message.set_msg_type(MessageType::MsgHeartbeat);
        let envelope = RaftMessage { group: 7, message };
        let bytes = envelope.encode();
        assert_eq!(&bytes[..8], &7u64.to_le_bytes());
        assert_eq!(RaftMessage::decode(&bytes).unwrap(), envelope);
        assert!(RaftMessage::decode(&bytes[..5]).is_err());
    }

    #[test]
    fn shared_decoding_leaves_entry_data_in_the_received_buffer() {
        let mut message = Message {
            to: 2,
            from: 1,
            term: 5,
            ..Default::default()
        };
        message.set_msg_type(MessageType::MsgAppend);
        let data = Bytes::from(vec![0xab; 4096]);
        message.entries.push(raft::eraftpb::Entry {
            index: 9,
            term: 5,
            data: data.clone(),
            ..Default::default()
        });
        let envelope = RaftMessage { group: 3, message };
        let received = Bytes::from(envelope.encode());
        let decoded = RaftMessage::decode_shared(&received).unwrap();
        assert_eq!(decoded, envelope);
        let entry = &decoded.message.entries[0].data;
        let buffer = received.as_ptr_range();
        assert!(
            buffer.contains(&entry.as_ptr()),
            "entry data was copied out of the received buffer"
        );
        assert!(RaftMessage::decode_shared(&received.slice(..7)).is_err());
    }
}
