//! Byte offsets to 1-based line and character column.

use std::cell::Cell;

use super::Pos;

/// Start offsets of every line of a note, to turn byte ranges into [`Pos`] values.
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset where each line starts; the first is 0.
    starts: Vec<usize>,
    /// The last position computed (offset, line, column): items come mostly in text order, so
    /// counting characters from there keeps a note with one huge line and many items linear
    /// instead of quadratic.
    cursor: Cell<(usize, usize, usize)>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the line starts of `text` (lines end at `\n`).
    pub(crate) fn new(text: &'a str) -> Self {
        let mut starts = Vec::with_capacity(text.len() / 40 + 1);
        starts.push(0);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex {
            text,
            starts,
            cursor: Cell::new((0, 1, 1)),
        }
    }

    /// 1-based line of the byte at `offset`.
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset).max(1)
    }

    /// The position of the byte range `start..end`. Both ends must be char boundaries of the
    /// text (every caller passes ranges from the parser or from char-wise scanning).
    pub(crate) fn pos(&self, start: usize, end: usize) -> Pos {
        let line = self.line(start);
        let (cursor_offset, cursor_line, cursor_column) = self.cursor.get();
        let (from, base_column) = if cursor_line == line && cursor_offset <= start {
            (cursor_offset, cursor_column)
        } else {
            (self.starts[line - 1], 1)
        };
        let column = base_column + self.text.get(from..start).map_or(0, |s| s.chars().count());
        self.cursor.set((start, line, column));
        Pos {
            line: to_pos(line),
            column: to_pos(column),
            start: to_pos(start),
            end: to_pos(end),
        }
    }
}

/// A line, column or offset as stored in a [`Pos`]: saturating at [`super::MAX_POSITION`],
/// which no note read through the vault reaches.
fn to_pos(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(super::MAX_POSITION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters_not_bytes() {
        let text = "ab\nçé #x\n";
        let idx = LineIndex::new(text);
        let start = text.find('#').unwrap();
        let pos = idx.pos(start, start + 2);
        assert_eq!((pos.line, pos.column), (2, 4));
    }

    #[test]
    fn columns_stay_right_when_positions_go_back_and_forth() {
        let text = "aé b\nçd é\n";
        let idx = LineIndex::new(text);
        let expected = |offset: usize| {
            let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
            text[line_start..offset].chars().count() + 1
        };
        let offsets: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for &o in offsets
            .iter()
            .chain(offsets.iter().rev())
            .chain(offsets.iter().step_by(3))
        {
            assert_eq!(idx.pos(o, o).column as usize, expected(o), "offset {o}");
        }
    }

    #[test]
    fn offset_at_line_start_is_column_one() {
        let text = "a\nb";
        let idx = LineIndex::new(text);
        assert_eq!((idx.pos(2, 3).line, idx.pos(2, 3).column), (2, 1));
        assert_eq!((idx.pos(0, 0).line, idx.pos(0, 0).column), (1, 1));
        // The end of the text after a final newline is on the (empty) next line.
        let text = "a\n";
        assert_eq!(LineIndex::new(text).pos(2, 2).line, 2);
    }
}
