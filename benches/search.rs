//! Search benchmark, side by side with other MCP servers (being written).

fn main() {}
