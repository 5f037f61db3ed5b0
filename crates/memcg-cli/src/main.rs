//! The `memcg` command.
fn main() {}
