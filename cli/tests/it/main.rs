//! End-to-end tests of the `fencepost` binary: the built executable run as a child process
//! against an in-process cluster (`testkit`), its stdout, stderr and exit status checked.

mod bench;
mod fenced;
mod harness;
mod offline;
mod statements;
