// A zlib stream that inflates to `n` zero bytes at about 1,000 to 1, shared by the image
// tests of the library (`include!`d by `src/media/image.rs`) and the image and PDF tests of the
// binary (`tests/images.rs`, `tests/pdfs.rs`).

/// A zlib stream that inflates to `n` zero bytes at about 1,000 to 1: one dynamic-Huffman
/// block whose codes make "copy 258 bytes at distance 1" two zero bits (`media::image`'s
/// tests show the decoder inflates it).
fn zlib_zeros(n: u64) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        acc: u64,
        len: u32,
    }
    impl Bits {
        /// `count` bits of `value`, least significant first.
        fn put(&mut self, value: u64, count: u32) {
            self.acc |= value << self.len;
            self.len += count;
            while self.len >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.len -= 8;
            }
        }
    }
    let mut b = Bits {
        out: vec![0x78, 0x01],
        acc: 0,
        len: 0,
    };
    b.put(1, 1); // the last block
    b.put(2, 2); // dynamic Huffman codes
    b.put(29, 5); // 286 literal/length codes
    b.put(1, 5); // 2 distance codes
    b.put(14, 4); // 18 code length codes
    for sym in [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1] {
        b.put(if matches!(sym, 0 | 1 | 2 | 18) { 2 } else { 0 }, 3);
    }
    // Code length codes 0, 1, 2, 18 are 00, 01, 10, 11 (most significant first: reversed).
    let cl = [0b00u64, 0b10, 0b01, 0b11];
    // Literal 0 and end of block 2 bits, 255 and 28 zeros between, length 258 1 bit.
    for (sym, extra) in [
        (2, None),
        (3, Some(127)),
        (3, Some(106)),
        (2, None),
        (3, Some(17)),
    ] {
        b.put(cl[sym], 2);
        if let Some(e) = extra {
            b.put(e, 7);
        }
    }
    b.put(cl[1], 2); // symbol 285 (length 258)
    b.put(cl[1], 2); // distance codes 0 and 1
    b.put(cl[1], 2);
    b.put(0b01, 2); // literal 0 (code 10)
    let mut zeros = (n - 1) / 258 * 2; // copies of 258 at distance 1: two zero bits each
    while b.len != 0 && zeros > 0 {
        b.put(0, 1);
        zeros -= 1;
    }
    b.out.resize(b.out.len() + (zeros / 8) as usize, 0);
    b.put(0, (zeros % 8) as u32);
    for _ in 0..(n - 1) % 258 {
        b.put(0b01, 2); // the rest, literal zeros
    }
    b.put(0b11, 2); // end of block (code 11)
    if b.len > 0 {
        b.put(0, 8 - b.len);
    }
    b.out
        .extend_from_slice(&((((n % 65521) as u32) << 16) | 1).to_be_bytes());
    b.out
}
