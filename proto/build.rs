//! Compiles `proto/*.proto` with protox (a protobuf compiler in Rust), so building needs no
//! system `protoc`, and hands the descriptor set to tonic's prost code generator.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/common.proto",
        "proto/confignode.proto",
        "proto/datanode.proto",
        "proto/session.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Unimplemented RPCs answer UNIMPLEMENTED, so a test double implements only what it needs.
        .generate_default_stubs(true)
        // Received raft messages stay slices of the receive buffer, and the entries decoded from
        // them slices of those (`RaftMessage::decode_shared`): no copy between socket and log.
        .bytes(".fencepost.RaftMessageBatch.messages")
        // Tablet columns and timestamps in their fixed-width form stay slices of the receive
        // buffer until they are copied once into the tablet's vectors.
        .bytes(".fencepost.Column.fixed_le")
        .bytes(".fencepost.Tablet.timestamps_le")
        // Tags and attributes stay in key order, as SHOW TIMESERIES lists them.
        .btree_map(".")
        .compile_fds(descriptors)?;
    Ok(())
}
