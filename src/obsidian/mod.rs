//! Obsidian's own formats, parsed without I/O: `.obsidian` settings, JSON Canvas documents and
//! Moment.js date formats for daily notes. (Being written.)
