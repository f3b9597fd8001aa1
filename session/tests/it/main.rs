//! Session integration tests: a real in-process cluster over loopback (`testkit`) and scripted
//! test doubles for answers a healthy cluster rarely gives (redirect loops, bounded retries).

mod cluster;
mod codecs;
mod doubles;
mod tables;
mod ttl;
