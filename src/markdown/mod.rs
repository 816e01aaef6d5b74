//! Pure parsing of a note's Markdown (no I/O): frontmatter, tags, headings, block ids and links,
//! as Obsidian reads them. (Being written.)
