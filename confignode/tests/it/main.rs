//! ConfigNode integration tests: the fence propagator under an injected (paused) clock, and a
//! 3-ConfigNode cluster over loopback with a fake DataNode.

mod cluster;
mod fake;
mod fence;
mod process;
mod propagator;
mod simulation;
