//! Fuzzes `obsidian::canvas::parse_canvas` with arbitrary bytes.
//!
//! It may never panic, and whatever it returns must keep its promises: the size bounds hold,
//! the issue list is bounded, and a canvas reported with no issues really is valid (unique
//! ids, edges between existing nodes, colours in the spec's forms, file subpaths starting
//! with `#`).

#![no_main]

use std::collections::HashSet;

use capvault::obsidian::canvas::{
    MAX_CANVAS_BYTES, MAX_CANVAS_ITEMS, MAX_ISSUES, NodeKind, is_valid_color, parse_canvas,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(canvas) = parse_canvas(data) else {
        return;
    };
    assert!(data.len() <= MAX_CANVAS_BYTES);
    assert!(canvas.nodes.len() <= MAX_CANVAS_ITEMS);
    assert!(canvas.edges.len() <= MAX_CANVAS_ITEMS);
    assert!(canvas.issues.len() <= MAX_ISSUES + 1);
    assert!(canvas.issues.iter().all(|i| !i.is_empty()));

    // The helpers must agree with the node list.
    let files = canvas.file_nodes().count();
    assert_eq!(files, canvas.file_references().count());
    assert!(files <= canvas.nodes.len());

    if !canvas.issues.is_empty() {
        return;
    }
    let mut ids = HashSet::new();
    for node in &canvas.nodes {
        assert!(!node.id.is_empty(), "valid canvas with an empty node id");
        assert!(
            ids.insert(node.id.as_str()),
            "valid canvas with a duplicate node id"
        );
        if let Some(c) = &node.color {
            assert!(is_valid_color(c), "valid canvas with colour {c:?}");
        }
        match &node.kind {
            NodeKind::File {
                subpath: Some(s), ..
            } => assert!(s.starts_with('#')),
            NodeKind::Other { .. } => panic!("valid canvas with an unknown node type"),
            _ => {}
        }
        assert!(canvas.node(&node.id).is_some());
    }
    let mut edge_ids = HashSet::new();
    for edge in &canvas.edges {
        assert!(!edge.id.is_empty(), "valid canvas with an empty edge id");
        assert!(
            edge_ids.insert(edge.id.as_str()),
            "valid canvas with a duplicate edge id"
        );
        assert!(
            ids.contains(edge.from_node.as_str()),
            "edge from an unknown node"
        );
        assert!(
            ids.contains(edge.to_node.as_str()),
            "edge to an unknown node"
        );
        if let Some(c) = &edge.color {
            assert!(is_valid_color(c), "valid canvas with edge colour {c:?}");
        }
    }
});
